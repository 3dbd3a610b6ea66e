"""util-linux's logger against the listener: RFC 5424 and RFC 3164, UDP and TCP (octet counted
and LF framed); each test's messages found by search with their owner, ts and attrs."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta

import httpx
import pytest

from tests.support import real_now
from tests.syslog.platform import RunningSyslog, found, unique

SD_ID = "shardlog@32473"


def logger(listener: RunningSyslog, *args: str) -> None:
    subprocess.run(
        ["logger", "--server", "127.0.0.1", "--port", str(listener.port), *args],
        check=True,
        timeout=10,
        # RFC 3164 timestamps are local time: the listener reads them as UTC (its setting).
        env={**os.environ, "TZ": "UTC"},
    )


@pytest.mark.parametrize(
    "transport",
    [["--udp"], ["--tcp", "--octet-count"], ["--tcp"]],
    ids=["udp", "tcp-octet", "tcp-lf"],
)
def test_rfc5424_with_structured_data(
    listener: RunningSyslog, api: httpx.Client, transport: list[str]
) -> None:
    owner = unique("logger5424")
    before = real_now() - timedelta(seconds=1)
    for n in range(3):
        logger(
            listener,
            *transport,
            "--rfc5424",
            "--tag", "billing",
            "--id=4242",
            "--msgid", "LOGIN",
            "--priority", "auth.warning",
            "--sd-id", SD_ID,
            "--sd-param", f'owner="{owner}"',
            "--sd-param", 'note="a \\"quoted\\" \\]bracket \\\\ here"',
            f"user {n} logged in",
        )  # fmt: skip
    items = found(api, owner, 3)
    assert [item["content"] for item in items] == [f"user {n} logged in" for n in range(3)]
    after = real_now() + timedelta(seconds=1)
    for item in items:
        assert before <= datetime.fromisoformat(item["ts"]) <= after
        attrs = item["attrs"]
        assert attrs["facility"] == "auth" and attrs["severity"] == "warning"
        assert attrs["app_name"] == "billing" and attrs["procid"] == "4242"
        assert attrs["msgid"] == "LOGIN"
        assert attrs["sd"][SD_ID] == {"owner": owner, "note": 'a "quoted" ]bracket \\ here'}
        assert attrs["hostname"]


@pytest.mark.parametrize("transport", [["--udp"], ["--tcp"]], ids=["udp", "tcp"])
def test_rfc3164_owner_from_the_tag(
    listener: RunningSyslog, api: httpx.Client, transport: list[str]
) -> None:
    """No structured data: the owner rule falls back to app_name (the tag)."""
    owner = unique("logger3164")
    logger(listener, *transport, "--rfc3164", "--tag", owner, "-p", "local3.err", "disk full")
    (item,) = found(api, owner, 1)
    assert item["content"] == "disk full"
    assert item["attrs"]["facility"] == "local3" and item["attrs"]["severity"] == "err"
    assert item["attrs"]["app_name"] == owner
    # A 3164 timestamp has whole seconds, in the listener's zone (UTC here).
    ts = datetime.fromisoformat(item["ts"])
    assert ts.microsecond == 0
    assert abs(ts - real_now()) < timedelta(seconds=30)
