"""RELP, rsyslog's Reliable Event Logging Protocol, the server's side. Pure: frames in, frames
out; router/syslogd/relp_server.py runs the sessions.

A frame is ``TXNR SP COMMAND SP DATALEN [SP DATA] LF``: a transaction number (1..999999999), a
command of at most 32 letters, the length of DATA. A client opens with ``open`` (its offers,
``name=value`` lines), sends ``syslog`` commands (DATA: one syslog message) and ends with
``close``. The server answers every command with ``rsp`` and the same txnr, in order: ``200 OK``
(for ``open``, followed by its own offers), an empty answer to ``close``; and it sends
``serverclose`` (txnr 0) before it closes a session itself. A frame that breaks these rules
leaves the stream unframeable: ``broken`` is set and the session is to be ended."""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_TXNR = 999_999_999
MAX_COMMAND = 32
# open's offers are small; the data of a syslog command is a message, bounded by the caller.
_HEADER = re.compile(rb"([0-9]{1,9}) ([a-z]{1,32}) ([0-9]{1,9})([ \n])")
_PREFIX = re.compile(rb"[0-9]{0,9}|[0-9]{1,9} ([a-z]{0,32}|[a-z]{1,32} [0-9]{0,9})")
HEADER_MAX = 9 + 1 + MAX_COMMAND + 1 + 9 + 1
SERVER_OFFERS = b"relp_version=0\nrelp_software=shardlog\ncommands=syslog"


class Frame(NamedTuple):
    txnr: int
    command: str
    data: bytes


class RelpFramer:
    def __init__(self, max_data: int) -> None:
        self.max_data = max_data
        self.broken: str | None = None
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        if self.broken is not None:
            return []
        self._buffer += data
        frames: list[Frame] = []
        buffer = self._buffer
        at = 0
        while at < len(buffer):
            match = _HEADER.match(buffer, at)
            if match is None:
                if len(buffer) - at >= HEADER_MAX or not _prefix_ok(bytes(buffer[at:])):
                    self.broken = "not a RELP frame header"
                break
            txnr, command, length = int(match[1]), match[2].decode(), int(match[3])
            if length > self.max_data:
                self.broken = f"{length} bytes of data, more than {self.max_data}"
                break
            if match[4] == b"\n":
                if length:
                    self.broken = "data announced but none sent"
                    break
                frames.append(Frame(txnr, command, b""))
                at = match.end()
                continue
            end = match.end() + length
            if end >= len(buffer):
                break
            if buffer[end] != 0x0A:
                self.broken = "a frame does not end with LF"
                break
            frames.append(Frame(txnr, command, bytes(buffer[match.end() : end])))
            at = end + 1
        del buffer[:at]
        return frames


def _prefix_ok(pending: bytes) -> bool:
    """Whether ``pending`` may still become a frame header once more bytes come."""
    return _PREFIX.fullmatch(pending) is not None


def response(txnr: int, text: bytes) -> bytes:
    return frame(txnr, "rsp", text)


def frame(txnr: int, command: str, data: bytes) -> bytes:
    if not data:
        return f"{txnr} {command} 0\n".encode()
    return f"{txnr} {command} {len(data)} ".encode() + data + b"\n"


def offers(data: bytes) -> dict[str, str]:
    """The ``name=value`` lines of an ``open`` command."""
    found: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        name, _, value = line.partition("=")
        if name:
            found[name.strip()] = value.strip()
    return found


def open_answer(client_offers: dict[str, str]) -> bytes:
    """``200 OK`` with our offers, or 500 when the client does not offer the syslog command."""
    if "syslog" not in client_offers.get("commands", "").split(","):
        return b"500 the client offers no syslog command"
    return b"200 OK\n" + SERVER_OFFERS


SERVER_CLOSE = frame(0, "serverclose", b"")
