"""bench/storage's rows and cuts: the committed corpus is loghub's 16 files, each line once and
as written; timestamps are distinct and ordered within an owner inside the day; segments are
cut at 1,000 rows or 256 KiB of content; the VictoriaLogs filter is the exact substring."""

from __future__ import annotations

import gzip
from datetime import UTC, date, datetime, timedelta

from bench.storage import corpus, layouts, searches, victorialogs
from router.search.query import Window

DAY = date(2026, 11, 20)


def test_the_corpus_is_16_systems_of_2000_lines_each_as_written() -> None:
    systems = corpus.systems()
    assert len(systems) == 16
    assert {len(lines) for lines in systems.values()} == {2000}
    for name, lines in systems.items():
        data = gzip.decompress((corpus.CORPUS / f"{name}_2k.log.gz").read_bytes())
        terminator = b"\r\n" if b"\r\n" in data else b"\n"
        rebuilt = terminator.join(line.encode() for line in lines)
        assert data in (rebuilt, rebuilt + terminator), name
    notice = (corpus.CORPUS / "LICENSE").read_text()
    assert "The above license notice shall be included in all copies of the datasets." in notice
    assert "dd61d0952749ee7963bde24220d1be5ede023033" in notice


def test_stamps_are_distinct_inside_the_day_and_increase_within_an_owner() -> None:
    rows = corpus.real_rows(DAY, 300)
    assert len(rows) == 16 * 300
    assert len({r.ts for r in rows}) == len(rows)
    start = datetime(2026, 11, 20, tzinfo=UTC)
    assert all(start <= r.ts < start + timedelta(days=1) for r in rows)
    for owner in {r.owner for r in rows}:
        stamps = [r.ts for r in rows if r.owner == owner]
        assert stamps == sorted(stamps)
    assert rows == corpus.real_rows(DAY, 300)  # seeded
    synthetic = corpus.synthetic_rows(DAY, 50)
    assert {len(r.content) for r in synthetic} == {512}
    assert set("".join(r.content for r in synthetic)) <= set("abcdef ")
    assert len({r.content for r in synthetic}) == 50


def test_the_rare_pattern_matches_its_share_and_the_window_holds_its_most() -> None:
    rows = corpus.real_rows(DAY, None)
    rare = corpus.pattern_with_share(rows, 0.0005)
    matched = [r for r in rows if rare in r.content]
    assert len(rare) >= 6 and 0.0002 <= len(matched) / len(rows) <= 0.001
    start, end = corpus.busiest_hour(rows, rare)
    assert end - start == timedelta(hours=1)
    assert any(start <= r.ts < end for r in matched)


def test_segments_are_cut_at_the_row_count_or_the_content_bytes() -> None:
    assert layouts.cuts(["x"] * 2500, 1000, None) == [0] * 1000 + [1] * 1000 + [2] * 500
    big = "y" * 100_000
    assert layouts.cuts([big] * 5, 1000, 256 * 1024) == [0, 0, 1, 1, 2]
    assert layouts.cuts(["z" * 300_000, "a"], 1000, 256 * 1024) == [0, 1]


def test_victorialogs_is_asked_for_the_exact_substring_in_the_window() -> None:
    start = datetime(2026, 11, 20, 3, tzinfo=UTC)
    search = searches.Search(
        "s", ('say "hi"', "x:y"), Window(start, start + timedelta(hours=1)), False
    )
    assert searches.logsql(search) == (
        '_time:[2026-11-20T03:00:00Z, 2026-11-20T04:00:00Z) _msg:*"say \\"hi\\""* '
        '_msg:*"x:y"* | sort by (_time) | limit 100 | fields _time, _msg'
    )
    assert victorialogs.substring("abc").startswith("_msg:*")
