"""Server-Sent Events as a client reads them: lines in, events out. Pure: no I/O.

The parts of the format shardlog's tail streams use (https://html.spec.whatwg.org/multipage/
server-sent-events.html#event-stream-interpretation): ``event``, ``data`` (several lines
joined by a newline), ``id`` (kept as the last event id, also by events without data) and
comments, which a parser skips."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServerEvent:
    event: str
    data: str
    id: str | None


@dataclass
class EventParser:
    last_id: str | None = None
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def feed(self, line: str) -> ServerEvent | None:
        """One line without its end; the event it completes, if any."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\x00" not in value:
            self._id = value
        return None

    def _dispatch(self) -> ServerEvent | None:
        if self._id is not None:
            self.last_id = self._id
        event = ServerEvent(self._event or "message", "\n".join(self._data), self.last_id)
        has_data = bool(self._data)
        self._event, self._data, self._id = "", [], None
        return event if has_data else None
