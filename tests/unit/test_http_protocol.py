"""The protocol's pure parts: the raw answers it writes and the throttled report."""

from __future__ import annotations

import logging

import httptools
import orjson
import pytest

from router.http.protocol import EventLog, raw_answer


class Parsed:
    def __init__(self) -> None:
        self.headers: dict[bytes, bytes] = {}
        self.body = b""
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


def test_raw_answer_is_valid_http_with_the_error_body() -> None:
    data = raw_answer(
        408,
        "request_timeout",
        "too slow",
        default_headers=[(b"server", b"uvicorn")],
        extra=[(b"retry-after", b"1")],
    )
    parsed = Parsed()
    parser = httptools.HttpResponseParser(parsed)
    parser.feed_data(data)
    assert parsed.complete
    assert parser.get_status_code() == 408
    assert data.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert parsed.headers[b"connection"] == b"close"
    assert parsed.headers[b"content-type"] == b"application/json"
    assert parsed.headers[b"server"] == b"uvicorn"
    assert parsed.headers[b"retry-after"] == b"1"
    assert orjson.loads(parsed.body) == {
        "error": {"code": "request_timeout", "message": "too slow", "field": None}
    }


def test_event_log_reports_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    events = EventLog(interval_s=10)
    with caplog.at_level(logging.WARNING, logger="router.http"):
        events.note("header timeouts", 100.0)  # the first is reported at once
        for second in range(101, 110):
            events.note("header timeouts", float(second))
        events.note("body timeouts", 109.5)
        events.note("header timeouts", 110.0)
    reports = [r.getMessage() for r in caplog.records]
    assert len(reports) == 2
    assert reports[0].endswith(": 1 header timeouts")
    assert reports[1].endswith(": 1 body timeouts, 10 header timeouts")
