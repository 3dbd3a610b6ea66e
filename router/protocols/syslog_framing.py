"""Syslog over a stream (TCP, TLS): RFC 6587's two framings, told apart once per connection by
its first byte: a digit is octet counting (``MSG-LEN SP MSG``), anything else non-transparent
framing (each message ends with LF). Pure: bytes are fed in as they arrive, whole frames come
out.

A frame longer than ``max_bytes`` is counted in ``oversize`` and dropped, and the stream goes
on: octet counting skips the announced length; LF framing discards up to the next LF. Octet
counting whose header is not a length and a space cannot be framed again: ``broken`` is set
and the connection is to be closed. Empty LF frames (blank lines, a lone CR) are skipped."""

from __future__ import annotations

# A length of more digits than this is no syslog frame (1 GB - 1).
MAX_LENGTH_DIGITS = 9


class StreamFramer:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.octet_counting: bool | None = None  # None: no byte seen yet
        self.oversize = 0
        self.broken: str | None = None
        self._buffer = bytearray()
        self._skip = 0  # bytes of an oversize frame still to discard
        self._discarding = False  # LF framing: an oversize frame until its LF

    def feed(self, data: bytes) -> list[bytes]:
        """The frames completed by ``data`` (none once the stream is broken)."""
        if self.broken is not None or not data:
            return []
        if self.octet_counting is None:
            self.octet_counting = data[:1].isdigit()
        self._buffer += data
        return self._counted() if self.octet_counting else self._lines()

    def _counted(self) -> list[bytes]:
        frames: list[bytes] = []
        buffer = self._buffer
        at = 0
        while True:
            if self._skip:
                dropped = min(self._skip, len(buffer) - at)
                self._skip -= dropped
                at += dropped
                if self._skip:
                    break
            space = buffer.find(b" ", at, at + MAX_LENGTH_DIGITS + 1)
            if space < 0:
                pending = buffer[at:]
                if pending and (len(pending) > MAX_LENGTH_DIGITS or not pending.isdigit()):
                    self.broken = "no frame length"
                break
            digits = bytes(buffer[at:space])
            if not digits.isdigit() or digits[:1] == b"0":
                self.broken = "no frame length"
                break
            length = int(digits)
            if length > self.max_bytes:
                self.oversize += 1
                self._skip = length
                at = space + 1
                continue
            end = space + 1 + length
            if end > len(buffer):
                break
            frames.append(bytes(buffer[space + 1 : end]))
            at = end
        del buffer[:at]
        return frames

    def _lines(self) -> list[bytes]:
        frames: list[bytes] = []
        buffer = self._buffer
        at = 0
        while True:
            newline = buffer.find(b"\n", at)
            if newline < 0:
                if len(buffer) - at > self.max_bytes:
                    if not self._discarding:
                        self.oversize += 1
                    self._discarding = True
                    at = len(buffer)
                break
            if self._discarding:
                self._discarding = False
            else:
                frame = bytes(buffer[at:newline]).rstrip(b"\r")
                if len(frame) > self.max_bytes:
                    self.oversize += 1
                elif frame:
                    frames.append(frame)
            at = newline + 1
        del buffer[:at]
        return frames
