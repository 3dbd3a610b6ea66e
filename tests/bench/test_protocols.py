"""bench/protocols at a tiny scale: every way in runs every repeat, the counters account for
every row, the summary, the verdicts and the plot are written; and the encoders send what the
decoders read back (the bench measures the rows it claims to)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import cramjam
import pytest

from bench.protocols import bodies
from bench.protocols.__main__ import main, shifted
from router.protocols import loki, otlp, syslog
from tests.bench.conftest import own_ports
from tests.support import free_port_range

RECORDS = [
    {"owner": f"o{n % 3}", "ts": f"2026-11-25T10:00:0{n}.12345{n}+00:00", "content": f"line {n}"}
    for n in range(6)
]


def test_the_encoders_send_what_the_decoders_read() -> None:
    now = datetime(2026, 11, 25, 12, tzinfo=UTC)
    expected = sorted((r["owner"], datetime.fromisoformat(r["ts"]), r["content"]) for r in RECORDS)
    pushed = loki.decode_protobuf(
        bytes(cramjam.snappy.decompress_raw(bodies.loki(RECORDS))), ["owner"]
    )
    exported = otlp.decode_protobuf(bodies.otlp(RECORDS), ["service.name"], now)
    for messages in (
        [m for _, stream in pushed for m in stream],
        [m for group in exported for m in group.messages],
    ):
        assert sorted((m.owner, m.ts, m.content) for m in messages) == expected
    assert bodies.ndjson(RECORDS).count(b"\n") == len(RECORDS)
    assert bodies.es_bulk(RECORDS).count(b'"create"') == len(RECORDS)
    frames = bodies.syslog(RECORDS)
    length, _, rest = frames.partition(b" ")
    first = syslog.parse(rest[: int(length)], now)
    assert (first.app_name, first.ts, first.msg) == ("o0", expected[0][1], "line 0")


def test_runs_differ_by_their_timestamps_only() -> None:
    moved = shifted(RECORDS, 3)
    assert [r["content"] for r in moved] == [r["content"] for r in RECORDS]
    assert all(
        datetime.fromisoformat(b["ts"]) - datetime.fromisoformat(a["ts"])
        == (datetime.fromisoformat("2026-01-01T00:00:00.000003") - datetime(2026, 1, 1))
        for a, b in zip(RECORDS, moved, strict=True)
    )


@pytest.mark.slow
def test_a_tiny_protocols_bench_counts_every_row(results: Path, tmp_path: Path) -> None:
    flags = ["--rows", "600", "--batch", "100", "--clients", "2", "--repeats", "2"]
    flags += ["--shards", "2", "--syslog-port", str(free_port_range(2))]
    flags += ["--data-dir", str(tmp_path / "p")]
    assert main([*flags, *own_ports(2)]) == 0

    payload = json.loads((results / "protocols.json").read_text())
    assert (results / "protocols.png").stat().st_size > 0
    assert "data_dir" not in payload["params"] and str(tmp_path) not in json.dumps(payload)
    assert set(payload["summary"]) == set(bodies.ENCODERS)
    for summary in payload["summary"].values():
        assert len(summary["rows_per_s_runs"]) == 2 and summary["rows_per_s"] > 0
    assert payload["summary"]["ndjson"]["ratio_to_ndjson"] == 1.0
    # The warm-up's 100 rows and 2 runs of 600, each protocol: counted by the router or the
    # listener once committed.
    assert payload["counted"] == dict.fromkeys(set(bodies.ENCODERS) - {"ndjson"}, 1300)
    assert set(payload["targets"]) == {f"{p}_over_ndjson" for p in bodies.ENCODERS} - {
        "ndjson_over_ndjson"
    }
