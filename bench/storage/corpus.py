"""The rows bench/storage stores and searches: real log lines of 16 systems (loghub's
``*_2k.log``, committed under corpus/, license in corpus/LICENSE), one owner per system, and
the synthetic text: 512 characters over 'abcdef ', drawn anew for each row (seeded), one
owner. Not bench/ingest's windows of one shared pool: those repeat each other, and a peer that
compresses across rows deduplicates repeats and flatters itself. Each line is
stored once. Timestamps spread over one past UTC day, increasing within an owner, distinct
across all rows (seeded), so that every peer's (ts) order is the same order."""

from __future__ import annotations

import gzip
import random
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from bench.ingest import generate
from router import clock

CORPUS = Path(__file__).parent / "corpus"
SYNTHETIC_OWNER = "synthetic"
DAY_US = 86_400 * 1_000_000
WORD = re.compile(r"[A-Za-z0-9_.:/-]{6,}")


@dataclass(frozen=True)
class Row:
    owner: str
    ts: datetime
    content: str


def systems() -> dict[str, list[str]]:
    """Each system's lines as written: the bytes up to each newline, without the line
    terminator (CR LF or LF); files end with or without a final newline."""
    found = {}
    for path in sorted(CORPUS.glob("*_2k.log.gz")):
        data = gzip.decompress(path.read_bytes())
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        found[path.name.removesuffix("_2k.log.gz")] = [
            line.removesuffix(b"\r").decode("utf-8") for line in lines
        ]
    return found


def past_day() -> date:
    """A day that closed at least a day ago by the one clock (any hour of the run)."""
    return clock.today() - timedelta(days=2)


def _stamps(count: int, day: date, rng: random.Random, taken: set[int]) -> list[datetime]:
    start = datetime.combine(day, time(), tzinfo=UTC)
    offsets: set[int] = set()
    while len(offsets) < count:
        offset = rng.randrange(DAY_US)
        if offset not in taken:
            offsets.add(offset)
    taken |= offsets
    return [start + timedelta(microseconds=offset) for offset in sorted(offsets)]


def real_rows(day: date, per_owner: int | None, seed: int = 37) -> list[Row]:
    """The first ``per_owner`` lines of every system (all of them with None)."""
    rng = random.Random(seed)
    taken: set[int] = set()
    rows: list[Row] = []
    for owner, lines in systems().items():
        chosen = lines[:per_owner] if per_owner else lines
        stamps = _stamps(len(chosen), day, rng, taken)
        rows.extend(Row(owner, ts, line) for ts, line in zip(stamps, chosen, strict=True))
    return rows


def synthetic_rows(day: date, count: int, seed: int = 38) -> list[Row]:
    rng = random.Random(seed)
    stamps = _stamps(count, day, rng, set())
    return [
        Row(SYNTHETIC_OWNER, ts, "".join(rng.choices(generate.ALPHABET, k=generate.CONTENT_CHARS)))
        for ts in stamps
    ]


def pattern_with_share(rows: list[Row], share: float) -> str:
    """A word of 6+ characters of the rows (letters, digits and ``_.:/-``, three letters at
    least: what a person searches, not a bare number or time of day) whose substring matches
    the line share closest to ``share``, ties broken by the word: deterministic."""
    target = share * len(rows)
    frequency: dict[str, int] = {}
    for row in rows:
        for word in set(WORD.findall(row.content)):
            if sum(c.isalpha() for c in word) >= 3:
                frequency[word] = frequency.get(word, 0) + 1
    candidates = sorted(frequency, key=lambda w: (abs(frequency[w] - target), w))[:50]

    def matched(word: str) -> int:
        return sum(1 for row in rows if word in row.content)

    return min(candidates, key=lambda w: (abs(matched(w) - target), w))


def busiest_hour(rows: list[Row], pattern: str) -> tuple[datetime, datetime]:
    """The one-hour window (on the hour) holding the most rows that contain ``pattern``,
    the earliest such hour on a tie."""
    hours: dict[datetime, int] = {}
    for row in rows:
        if pattern in row.content:
            hour = row.ts.replace(minute=0, second=0, microsecond=0)
            hours[hour] = hours.get(hour, 0) + 1
    start = min(hours, key=lambda h: (-hours[h], h))
    return start, start + timedelta(hours=1)
