"""Request bodies sent with ``Content-Encoding: gzip`` (or ``deflate``), decoded as they arrive
in pieces of at most PIECE_BYTES: whoever reads them counts the decoded bytes against the body
limit (router.ingest.body.Body), so a small body that inflates to gigabytes (a zip bomb) is
refused at the limit, never held in memory. Pure but for the stream it reads."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator

from router.errors import BadRequest, ShardlogError, excerpt

PIECE_BYTES = 2**16
# Pieces decoded before the event loop is let serve others: a body that arrived at once (a
# small gzip that inflates to hundreds of MiB) is inflated a megabyte at a time, not in one go.
PIECES_PER_TURN = 16
# zlib's window bits: gzip framing, zlib framing (what HTTP calls deflate).
_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}


class UnsupportedEncoding(ShardlogError):
    status = 415
    code = "unsupported_media_type"


def decoder(encoding: str | None) -> int | None:
    """zlib's window bits for a Content-Encoding, None for identity; refused if unknown."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return None
    if name not in _WBITS:
        raise UnsupportedEncoding(
            f"content encoding {excerpt(name)} is not one of gzip, deflate, identity",
            "content-encoding",
        )
    return _WBITS[name]


async def decoded(chunks: AsyncIterator[bytes], wbits: int | None) -> AsyncIterator[bytes]:
    """The body's bytes decoded (several gzip members one after another, as ``cat a.gz b.gz``
    makes, are one body)."""
    if wbits is None:
        async for chunk in chunks:
            yield chunk
        return
    inflate = zlib.decompressobj(wbits)
    fed = False  # the current member has had bytes
    pieces = 0
    try:
        async for chunk in chunks:
            while chunk or fed:
                fed = True
                piece = inflate.decompress(chunk, PIECE_BYTES)
                if piece:
                    yield piece
                    pieces += 1
                    if pieces % PIECES_PER_TURN == 0:
                        await asyncio.sleep(0)
                if inflate.eof:
                    # The next member's bytes (zlib also leaves them in unconsumed_tail).
                    chunk = inflate.unused_data
                    inflate, fed = zlib.decompressobj(wbits), False
                    continue
                chunk = inflate.unconsumed_tail
                if not chunk and len(piece) < PIECE_BYTES:
                    break  # all of this chunk decoded; wait for the next
    except zlib.error as exc:
        raise BadRequest(f"the body is not valid {_name(wbits)} data: {exc}", "body") from None
    if fed:
        raise BadRequest(f"the {_name(wbits)} body is cut off before its end", "body")


def _name(wbits: int) -> str:
    return "gzip" if wbits == 31 else "deflate"
