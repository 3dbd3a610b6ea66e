"""The segment codec of compacted days (native/pg_segments/, the PostgreSQL extension
shardlog_segments) on a real shard: audit rows packed into a block come back unpacked exactly as
PostgreSQL's own arrays hold them, row by row and in order; corrupt blocks are refused with
SQLSTATE XX001 and leave the connection working; bad arguments are named; the trigram filter
never says no to a present substring (nor to a case-insensitive one) and says no to most absent
ones; every shardlog role may call the functions, and a database owner may create the
extension without being a superuser."""

from __future__ import annotations

import contextlib
import os
import random
import string
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.db import pools, roles
from router.settings import Settings
from services.cluster import LocalCluster

EXTENSION = "CREATE EXTENSION IF NOT EXISTS shardlog_segments"
PACK = (
    "shardlog_pack_audit($1::bigint[], $2::text[]::timestamptz[], $3::text[], "
    "$4::text[]::jsonb[], $5::text[]::xid8[])"
)
# Both sides as PostgreSQL prints them: the unpacked block, and the arrays it was packed from.
ROUND_TRIP = f"""
    SELECT u.ord, u.id, u.ts::text, u.content, u.attrs::text, u.created_xid::text
    FROM shardlog_unpack_audit({PACK}) AS u ORDER BY u.ord
"""
ARRAYS = """
    SELECT a.ord::int, a.id, a.ts::text, a.content, a.attrs::text, a.xid::text
    FROM unnest($1::bigint[], $2::text[]::timestamptz[], $3::text[], $4::text[]::jsonb[],
                $5::text[]::xid8[]) WITH ORDINALITY AS a (id, ts, content, attrs, xid, ord)
    ORDER BY a.ord
"""
# Every column as text: an instant PostgreSQL accepts may lie beyond Python's datetime.
AS_TEXT = """
    SELECT ord, id, ts::text, content, attrs::text, created_xid::text
    FROM shardlog_unpack_audit($1)
"""
# A bounded unpack, and PostgreSQL's own range test over the arrays it was packed from.
BOUNDED = f"""
    SELECT u.ord, u.id, u.ts::text, u.content, u.attrs::text, u.created_xid::text
    FROM shardlog_unpack_audit({PACK}, $6::text::timestamptz, $7::text::timestamptz) AS u
    ORDER BY u.ord
"""
IN_RANGE = f"""
    SELECT * FROM ({ARRAYS}) AS a
    WHERE a.ts::timestamptz >= $6::text::timestamptz AND a.ts::timestamptz < $7::text::timestamptz
    ORDER BY a.ord
"""
GRAMS_PROBE = "SELECT shardlog_may_contain(shardlog_grams($1::text[]), p) FROM unnest($2::text[]) p"


@contextlib.asynccontextmanager
async def codec_connection(cluster: LocalCluster) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the first shard, with the extension created."""
    connection = await asyncpg.connect(cluster.shards[0].spec.dsn())
    try:
        await connection.execute(EXTENSION)
        yield connection
    finally:
        await connection.close()


@pytest.fixture(scope="module")
async def shard(cluster: LocalCluster) -> AsyncIterator[asyncpg.Connection]:
    async with codec_connection(cluster) as connection:
        yield connection


Row = tuple[int, str, str, str | None, int | None]


def examples(count: int) -> Any:
    """Hypothesis settings for a test on the module's connection."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\0"))


def json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXTS,
    json_containers,
    max_leaves=8,
)
# Instants as text, from PostgreSQL's first to its last microsecond, the infinities included.
INSTANTS = st.one_of(
    st.datetimes().map(lambda moment: moment.isoformat() + "+00"),
    st.sampled_from(
        [
            "-infinity",
            "infinity",
            "4714-11-24 00:00:00+00 BC",
            "294276-12-31 23:59:59.999999+00",
            "2000-01-01 00:00:00+00",
        ]
    ),
)
ROWS = st.lists(
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),
        INSTANTS,
        TEXTS,
        st.one_of(st.none(), JSON.map(lambda value: orjson.dumps(value).decode())),
        st.one_of(st.none(), st.integers(0, 2**64 - 1)),
    ),
    max_size=40,
)


def columns(rows: list[Row]) -> list[list[Any]]:
    return [
        [row[0] for row in rows],
        [row[1] for row in rows],
        [row[2] for row in rows],
        [row[3] for row in rows],
        [None if row[4] is None else str(row[4]) for row in rows],
    ]


async def assert_round_trip(shard: asyncpg.Connection, rows: list[Row]) -> None:
    arguments = columns(rows)
    unpacked = [tuple(row) for row in await shard.fetch(ROUND_TRIP, *arguments)]
    packed_from = [tuple(row) for row in await shard.fetch(ARRAYS, *arguments)]
    assert unpacked == packed_from
    assert [row[0] for row in unpacked] == list(range(1, len(rows) + 1))
    assert [(row[1], row[3]) for row in unpacked] == [(row[0], row[2]) for row in rows]
    block_rows = await shard.fetchval(f"SELECT shardlog_block_rows({PACK})", *arguments)
    assert block_rows == len(rows)


@examples(60)
@given(rows=ROWS)
async def test_unpack_gives_back_what_was_packed(
    shard: asyncpg.Connection, rows: list[Row]
) -> None:
    await assert_round_trip(shard, rows)


@examples(60)
@given(rows=ROWS, data=st.data())
async def test_a_bounded_unpack_builds_the_rows_of_its_range_alone(
    shard: asyncpg.Connection, rows: list[Row], data: st.DataObject
) -> None:
    """[from, to): the rows PostgreSQL's own comparison keeps, in stored order with their
    ordinals, whatever the order of the block's ts (a block need not be sorted)."""
    bound = st.one_of(INSTANTS, st.sampled_from([row[1] for row in rows])) if rows else INSTANTS
    arguments = [*columns(rows), data.draw(bound), data.draw(bound)]
    bounded = [tuple(row) for row in await shard.fetch(BOUNDED, *arguments)]
    assert bounded == [tuple(row) for row in await shard.fetch(IN_RANGE, *arguments)]


async def test_long_lines_and_an_empty_block_round_trip(shard: asyncpg.Connection) -> None:
    long_line = "é" + "x" * 100_000 + "\u2603"
    rows: list[Row] = [
        (2, "2026-01-01 00:00:01+00", long_line, None, None),
        (1, "2026-01-01 00:00:00+00", "", '{"a": {"b": [1, 2.5, null]}}', 2**64 - 1),
        (3, "2026-01-01 00:00:00+00", long_line[::-1], "[]", 3),
    ]
    await assert_round_trip(shard, rows)
    await assert_round_trip(shard, [])


async def a_block(shard: asyncpg.Connection) -> bytes:
    rows: list[Row] = [
        (10 + n, f"2026-01-01 00:{n:02}:00+00", f"line {n} of a block", '{"n": 1}', 700 + n)
        for n in range(20)
    ]
    block: bytes = await shard.fetchval(f"SELECT {PACK}", *columns(rows))
    return block


async def assert_refused(shard: asyncpg.Connection, block: bytes) -> None:
    with pytest.raises(asyncpg.DataCorruptedError, match="corrupt shardlog segment"):
        await shard.fetch("SELECT * FROM shardlog_unpack_audit($1)", block)
    assert await shard.fetchval("SELECT 1") == 1


async def test_every_truncation_is_refused(shard: asyncpg.Connection) -> None:
    block = await a_block(shard)
    for length in range(len(block)):
        await assert_refused(shard, block[:length])
    await assert_refused(shard, block + b"\0")


async def test_a_flipped_bit_is_refused_or_changes_nothing(shard: asyncpg.Connection) -> None:
    """The zstd checksum covers the payload: a flipped bit is refused, unless it is one zstd
    ignores (its frame header's unused bit, a bitstream's padding) and the rows stay the same."""
    block = await a_block(shard)
    unpack = "SELECT * FROM shardlog_unpack_audit($1)"
    original = await shard.fetch(unpack, block)
    refused = 0
    for at in range(len(block)):
        for bit in range(8):
            flipped = bytearray(block)
            flipped[at] ^= 1 << bit
            try:
                assert await shard.fetch(unpack, bytes(flipped)) == original, (at, bit)
            except asyncpg.DataCorruptedError:
                refused += 1
    assert refused >= 0.97 * len(block) * 8
    assert await shard.fetchval("SELECT 1") == 1


async def test_bad_headers_are_refused(shard: asyncpg.Connection) -> None:
    block = await a_block(shard)
    huge = (0xFFFFFFFF).to_bytes(4, "little")
    await assert_refused(shard, b"XLSG" + block[4:])
    await assert_refused(shard, block[:5] + b"\x02" + block[6:])  # a flow block's kind
    await assert_refused(shard, block[:8] + huge + block[12:])  # rows
    await assert_refused(shard, block[:12] + huge + block[16:])  # payload length
    await assert_refused(shard, block[:12] + (2**30 - 1).to_bytes(4, "little") + block[16:])
    await assert_refused(shard, b"")
    with pytest.raises(asyncpg.DataCorruptedError):
        await shard.fetchval("SELECT shardlog_block_rows($1)", b"SLSG")
    with pytest.raises(asyncpg.DataCorruptedError):
        await shard.fetchval("SELECT shardlog_may_contain($1, 'abc')", b"\x01\x03")
    assert await shard.fetchval("SELECT shardlog_block_rows($1)", block) == 20


@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        (([1, 2], ["2026-01-01"], ["a", "b"], [None, None], [None, None]), "ArraySubscript", "ts"),
        (([1], ["2026-01-01"], ["a", "b"], [None], [None]), "ArraySubscript", "contents"),
        (([1], ["2026-01-01"], ["a"], [None, None], [None]), "ArraySubscript", "attrs"),
        (([1], ["2026-01-01"], ["a"], [None], []), "ArraySubscript", "xids"),
        (([1, None], ["2026-01-01"] * 2, ["a", "b"], [None] * 2, [None] * 2), "NullValue", "ids"),
        (([1, 2], ["2026-01-01", None], ["a", "b"], [None] * 2, [None] * 2), "NullValue", "ts"),
        (
            ([1, 2], ["2026-01-01"] * 2, [None, "b"], [None] * 2, [None] * 2),
            "NullValue",
            "contents",
        ),
    ],
)
async def test_bad_arguments_are_named(
    shard: asyncpg.Connection, arguments: tuple[list[Any], ...], error: str, named: str
) -> None:
    with pytest.raises(asyncpg.PostgresError, match=rf"^{named}\b") as raised:
        await shard.fetchval(f"SELECT {PACK}", *arguments)
    assert type(raised.value).__name__.startswith(error)
    assert await shard.fetchval("SELECT 1") == 1


def fold(text: bytes) -> bytes:
    return text.translate(
        bytes.maketrans(string.ascii_uppercase.encode(), string.ascii_lowercase.encode())
    )


def swap_ascii_case(text: str) -> str:
    return "".join(c.swapcase() if c in string.ascii_letters else c for c in text)


@examples(80)
@given(contents=st.lists(TEXTS, min_size=1, max_size=8), data=st.data())
async def test_the_filter_never_rejects_a_present_pattern(
    shard: asyncpg.Connection, contents: list[str], data: st.DataObject
) -> None:
    chosen = data.draw(st.sampled_from(contents))
    start = data.draw(st.integers(0, len(chosen)))
    end = data.draw(st.integers(start, len(chosen)))
    substring = chosen[start:end]
    patterns = [substring, swap_ascii_case(substring), *data.draw(st.lists(TEXTS, max_size=4))]
    answers = [row[0] for row in await shard.fetch(GRAMS_PROBE, contents, patterns)]
    for pattern, answer in zip(patterns, answers, strict=True):
        present = any(fold(pattern.encode()) in fold(content.encode()) for content in contents)
        if present or len(pattern.encode()) < 3:
            assert answer, pattern


def log_lines(rng: random.Random, count: int) -> list[str]:
    """Lines shaped like real logs: a timestamp, a level, a component, words, numbers, addresses."""
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(300)]
    components = ["sshd", "kernel", "CRON", "nginx", "postgres", "dhclient", "systemd"]
    levels = ["INFO", "WARN", "ERROR", "DEBUG"]
    lines = []
    for n in range(count):
        address = ".".join(str(rng.randint(0, 255)) for _ in range(4))
        phrase = " ".join(rng.choices(words, k=rng.randint(5, 14)))
        lines.append(
            f"2026-03-14T{n % 24:02}:{n % 60:02}:{rng.randint(0, 59):02}Z {rng.choice(levels)} "
            f"{rng.choice(components)}[{rng.randint(100, 99999)}]: {phrase} from {address} "
            f"port {rng.randint(1, 65535)} took {rng.randint(0, 5000)}ms"
        )
    return lines


async def test_the_shards_case_insensitive_matching_folds_what_the_filter_folds(
    shard: asyncpg.Connection,
) -> None:
    """The filter folds A-Z only, so `~*` and ILIKE literals may use it only where PostgreSQL
    folds no other letter: the C locale of the shards (services/postgres.py's initdb)."""
    assert await shard.fetchval("SELECT current_setting('lc_ctype')") == "C"
    answers = await shard.fetchrow(
        "SELECT 'ééé' ~* 'ÉÉÉ', 'ééé' ILIKE 'ÉÉÉ', 'kkk' ~* E'\\u212A\\u212A\\u212A', "
        "'abc' ~* 'ABC', 'abc' ILIKE 'ABC'"
    )
    assert tuple(answers) == (False, False, False, True, True)


async def test_the_filter_rejects_most_absent_patterns(shard: asyncpg.Connection) -> None:
    rng = random.Random(37)
    contents = log_lines(rng, 1000)
    folded = [fold(content.encode()) for content in contents]
    alphabet = string.ascii_lowercase + string.digits + " .:"
    absent: list[str] = []
    while len(absent) < 2000:
        pattern = "".join(rng.choices(alphabet, k=6))
        if not any(pattern.encode() in content for content in folded):
            absent.append(pattern)
    answers = [row[0] for row in await shard.fetch(GRAMS_PROBE, contents, absent)]
    false_positive_rate = sum(answers) / len(answers)
    assert false_positive_rate < 0.03, false_positive_rate
    grams: bytes = await shard.fetchval("SELECT shardlog_grams($1::text[])", contents)
    # 8 bits for each distinct trigram: far smaller than the text it stands for.
    assert len(grams) < sum(len(content) for content in folded) / 4


async def test_every_shardlog_role_may_call_the_codec(
    shard: asyncpg.Connection, cluster: LocalCluster, settings: Settings
) -> None:
    for role in (roles.WRITER, roles.READER, roles.RETENTION):
        connection = await pools.connect(cluster.shards[0].spec.dsn(), settings.pools, role=role)
        try:
            unpacked = await connection.fetch(
                "SELECT content FROM shardlog_unpack_audit(shardlog_pack_audit("
                "'{1}', '{2026-01-01}', '{a line}', '{NULL}', '{NULL}'))"
            )
            assert [row[0] for row in unpacked] == ["a line"]
            assert await connection.fetchval(
                "SELECT shardlog_may_contain(shardlog_grams('{a line}'), 'LINE')"
            )
        finally:
            await connection.close()


async def test_a_database_owner_may_create_the_extension(
    shard: asyncpg.Connection, cluster: LocalCluster
) -> None:
    """Trusted: no superuser needed, only CREATE on the database (its owner has it)."""
    name = f"pgseg_trusted_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    await shard.execute(f'CREATE ROLE "{name}" NOLOGIN')
    await shard.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    try:
        scratch = await asyncpg.connect(cluster.shards[0].spec.dsn(name))
        try:
            await scratch.execute(f'SET ROLE "{name}"')
            assert not await scratch.fetchval(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
            )
            await scratch.execute("CREATE EXTENSION shardlog_segments")
            assert (
                await scratch.fetchval(
                    "SELECT shardlog_block_rows(shardlog_pack_audit('{}', '{}', '{}', '{}', '{}'))"
                )
                == 0
            )
        finally:
            await scratch.close()
    finally:
        await shard.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await shard.execute(f'DROP ROLE IF EXISTS "{name}"')


async def test_a_shard_of_version_1_0_is_updated_by_its_migration(
    shard: asyncpg.Connection, cluster: LocalCluster
) -> None:
    """Shard migration 0011 brings a database with extension 1.0 (migration 0010's) to 1.1:
    the bounded unpack, and the filter probed after a segment's owner and bounds."""
    migration = (Path(__file__).parents[2] / "schema/shard/0011_segments_range.sql").read_text()
    name = f"pgseg_update_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    await shard.execute(f'CREATE DATABASE "{name}"')
    try:
        scratch = await asyncpg.connect(cluster.shards[0].spec.dsn(name))
        try:
            await scratch.execute("CREATE EXTENSION shardlog_segments VERSION '1.0'")
            await scratch.execute(migration)
            assert (
                await scratch.fetchval(
                    "SELECT extversion FROM pg_extension WHERE extname = 'shardlog_segments'"
                )
                == "1.1"
            )
            packed = (
                "shardlog_pack_audit('{1,2}', $1::timestamptz[], '{a,b}', '{NULL,NULL}', '{1,2}')"
            )
            instants = [datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)]
            bounded = await scratch.fetch(
                f"SELECT ord, content FROM shardlog_unpack_audit({packed}, $2, $3)",
                instants,
                instants[1],
                instants[1] + timedelta(microseconds=1),
            )
            assert [tuple(row) for row in bounded] == [(2, "b")]
            assert (
                await scratch.fetchval(
                    "SELECT procost FROM pg_proc WHERE proname = 'shardlog_may_contain'"
                )
                == 1000
            )
        finally:
            await scratch.close()
    finally:
        await shard.execute(f'DROP DATABASE IF EXISTS "{name}"')


# --- blocks made here from the format's description (native/pg_segments/shardlog_segments.c)

MASK64 = 2**64 - 1
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag_deltas(values: list[int]) -> bytes:
    out, previous = bytearray(), 0
    for value in values:
        delta = (value - previous) & MASK64
        signed = delta - 2**64 if delta >= 2**63 else delta
        out += varint(((signed << 1) ^ (signed >> 63)) & MASK64)
        previous = value
    return bytes(out)


def null_bitmap(values: list[Any]) -> bytes:
    out = bytearray((len(values) + 7) // 8)
    for row, value in enumerate(values):
        if value is None:
            out[row // 8] |= 1 << (row % 8)
    return bytes(out)


Microrow = tuple[int, int, str, str | None, int | None]


def audit_payload(rows: list[Microrow]) -> bytes:
    """id, ts in microseconds since 2000, content, attrs text, created_xid."""
    ids, stamps, contents, attrs, xids = (
        (list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [], [], [])
    )
    present_attrs = [value.encode() for value in attrs if value is not None]
    encoded = [content.encode() for content in contents]
    return b"".join(
        [
            varint(len(rows)),
            zigzag_deltas(stamps),
            zigzag_deltas(ids),
            null_bitmap(xids),
            zigzag_deltas([xid for xid in xids if xid is not None]),
            null_bitmap(attrs),
            b"".join(varint(len(value)) for value in present_attrs),
            b"".join(varint(len(value)) for value in encoded),
            *present_attrs,
            *encoded,
        ]
    )


def raw_block(rows: int, payload: bytes, kind: int = 1) -> bytes:
    """A block (of audit rows, kind 1, unless told) whose zstd frame stores the payload as raw
    blocks (no checksum): what an attacker who knows the format can hand to the decoder."""
    frame = bytearray(b"\x28\xb5\x2f\xfd\xe0" + len(payload).to_bytes(8, "little"))
    chunks = [payload[at : at + 100_000] for at in range(0, len(payload), 100_000)] or [b""]
    for index, chunk in enumerate(chunks):
        last = int(index == len(chunks) - 1)
        frame += (last | len(chunk) << 3).to_bytes(3, "little") + chunk
    header = (
        b"SLSG\x01"
        + bytes([kind, 0, 0])
        + rows.to_bytes(4, "little")
        + len(payload).to_bytes(4, "little")
    )
    return header + bytes(frame)


def crafted_block(payload: bytes, rows: int, kind: int, data: st.DataObject) -> bytes:
    """A valid payload damaged by a few byte changes, cuts and insertions, in a raw frame that
    declares the true row count, one more or less, or 2^31 - 1."""
    damaged = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["set", "cut", "insert"]))
        at = data.draw(st.integers(0, len(damaged)))
        if action == "set" and at < len(damaged):
            damaged[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del damaged[at : at + data.draw(st.integers(1, 8))]
        else:
            damaged[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    declared = data.draw(st.sampled_from([rows, rows + 1, max(rows - 1, 0), 2**31 - 1]))
    return raw_block(declared, bytes(damaged), kind)


MICROROWS = st.lists(
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-(2**50), 2**50),
        TEXTS,
        st.one_of(
            st.none(),
            st.dictionaries(TEXTS, st.integers(-(2**31), 2**31), max_size=3).map(
                lambda value: orjson.dumps(value).decode()
            ),
        ),
        st.one_of(st.none(), st.integers(0, 2**64 - 1)),
    ),
    max_size=30,
)


@examples(50)
@given(rows=MICROROWS)
async def test_a_block_made_by_the_description_unpacks(
    shard: asyncpg.Connection, rows: list[Microrow]
) -> None:
    unpacked = await shard.fetch(
        "SELECT ord, id, ts, content, attrs, created_xid::text FROM shardlog_unpack_audit($1)",
        raw_block(len(rows), audit_payload(rows)),
    )
    assert [row["ord"] for row in unpacked] == list(range(1, len(rows) + 1))
    assert [
        (
            row["id"],
            row["ts"],
            row["content"],
            row["attrs"] and orjson.loads(row["attrs"]),
            row["created_xid"],
        )
        for row in unpacked
    ] == [
        (
            id_,
            EPOCH + timedelta(microseconds=ts),
            content,
            attrs and orjson.loads(attrs),
            None if xid is None else str(xid),
        )
        for id_, ts, content, attrs, xid in rows
    ]


@examples(300)
@given(rows=MICROROWS, data=st.data())
async def test_a_crafted_payload_is_refused_or_read_in_bounds(
    shard: asyncpg.Connection, rows: list[Microrow], data: st.DataObject
) -> None:
    """Valid frames around damaged payloads (no checksum to catch them): every one is read
    whole or refused with XX001, never another error, and the backend lives on."""
    with contextlib.suppress(asyncpg.DataCorruptedError):
        await shard.fetch(AS_TEXT, crafted_block(audit_payload(rows), len(rows), 1, data))
    assert await shard.fetchval("SELECT 1") == 1


async def test_an_instant_beyond_timestamptz_is_refused(shard: asyncpg.Connection) -> None:
    infinities = [(1, -(2**63), "x", None, None), (2, 2**63 - 1, "y", None, None)]
    unpacked = await shard.fetch(AS_TEXT, raw_block(2, audit_payload(infinities)))
    assert [row["ts"] for row in unpacked] == ["-infinity", "infinity"]
    await assert_refused(shard, raw_block(1, audit_payload([(1, -(2**62), "x", None, None)])))
