"""router/protocols/syslog_framing.py and router/protocols/relp.py: frames out of a stream fed
in pieces of any size."""

from __future__ import annotations

import pytest

from router.protocols import relp
from router.protocols.syslog_framing import StreamFramer


def feed_in_pieces(framer: StreamFramer, data: bytes, size: int) -> list[bytes]:
    frames: list[bytes] = []
    for start in range(0, len(data), size):
        frames += framer.feed(data[start : start + size])
    return frames


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_octet_counting(size: int) -> None:
    stream = b"5 hello11 hello\nworld3 abc"
    framer = StreamFramer(100)
    assert feed_in_pieces(framer, stream, size) == [b"hello", b"hello\nworld", b"abc"]
    assert framer.octet_counting and framer.broken is None


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_lf_framing_skips_blank_lines_and_strips_cr(size: int) -> None:
    framer = StreamFramer(100)
    frames = feed_in_pieces(framer, b"<13>one\r\n\n<13>two\n<13>unfinished", size)
    assert frames == [b"<13>one", b"<13>two"]
    assert framer.octet_counting is False


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_oversize_frames_are_counted_and_the_stream_goes_on(size: int) -> None:
    counted = StreamFramer(8)
    stream = b"3 abc20 " + b"x" * 20 + b"2 ok"
    assert feed_in_pieces(counted, stream, size) == [b"abc", b"ok"]
    assert counted.oversize == 1
    lines = StreamFramer(8)
    stream = b"<1>short\n" + b"y" * 30 + b"\n<1>after\n"
    assert feed_in_pieces(lines, stream, size) == [b"<1>short", b"<1>after"]
    assert lines.oversize == 1


@pytest.mark.parametrize("stream", [b"5 hello x", b"12345678901 x", b"0 ", b"3 abcdef"])
def test_a_broken_octet_count_ends_the_stream(stream: bytes) -> None:
    framer = StreamFramer(1 << 20)
    framer.feed(stream)
    assert framer.broken == "no frame length"
    assert framer.feed(b"5 hello") == []


@pytest.mark.parametrize("size", [1, 6, 1000])
def test_relp_frames(size: int) -> None:
    offers = b"relp_version=0\ncommands=syslog"
    stream = b"1 open 30 " + offers + b"\n2 syslog 5 <1>hi\n3 close 0\n"
    framer = relp.RelpFramer(100)
    frames: list[relp.Frame] = []
    for start in range(0, len(stream), size):
        frames += framer.feed(stream[start : start + size])
    assert frames == [
        relp.Frame(1, "open", offers),
        relp.Frame(2, "syslog", b"<1>hi"),
        relp.Frame(3, "close", b""),
    ]
    assert framer.broken is None


@pytest.mark.parametrize(
    "stream",
    [b"x open 0\n", b"1 OPEN 0\n", b"1 syslog 3 abcX", b"1 syslog 500 ", b"1 syslog 3\n", b"1  "],
)
def test_relp_broken_frames(stream: bytes) -> None:
    framer = relp.RelpFramer(100)
    assert framer.feed(stream) == []
    assert framer.broken is not None


def test_relp_answers() -> None:
    assert relp.response(7, b"200 OK") == b"7 rsp 6 200 OK\n"
    assert relp.response(9, b"") == b"9 rsp 0\n"
    assert relp.SERVER_CLOSE == b"0 serverclose 0\n"
    offered = relp.offers(b"relp_version=0\nrelp_software=librelp,1.11.0\ncommands=syslog")
    assert relp.open_answer(offered).startswith(b"200 OK\n")
    assert b"commands=syslog" in relp.open_answer(offered)
    assert relp.open_answer({"commands": "other"}).startswith(b"500 ")
