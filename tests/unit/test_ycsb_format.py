"""bench/ycsb's pure parts: the property-file parser and its defaults, the shipped workloads A-F,
the record layout and its checks, and YCSB's text output layout."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.ycsb.__main__ import STANDARD, arguments, workloads_of
from bench.ycsb.generators import fnvhash64
from bench.ycsb.measurements import ERROR, OK, Measurements, java_double, ordinal, ycsb_text
from bench.ycsb.properties import PropertyError, parse_properties, workload_from
from bench.ycsb.records import Layout, record, row_problem
from bench.ycsb.suite import plan_layout

LINE = re.compile(r"^\[[A-Z-]+\], [A-Za-z0-9().=/_-]+, -?[0-9][0-9.E-]*$")


def test_parser_reads_java_properties() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "\n"
        "recordcount=1000\n"
        "  operationcount : 20\n"
        "table usertable2\n"
        "requestdistribution=zip\\\n"
        "    fian\n"
        "readproportion=0.5\n"
        "readproportion=0.25\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "recordcount": "1000",
        "operationcount": "20",
        "table": "usertable2",
        "requestdistribution": "zipfian",
        "readproportion": "0.25",
        "empty": "",
    }


def test_defaults_are_coreworkloads() -> None:
    workload = workload_from({"recordcount": "10"})
    assert workload.readproportion == 0.95 and workload.updateproportion == 0.05
    assert workload.insertproportion == workload.scanproportion == 0.0
    assert workload.requestdistribution == "uniform"
    assert (workload.fieldcount, workload.fieldlength, workload.maxscanlength) == (10, 100, 1000)
    assert workload.field_names[0] == "field0" and workload.table == "usertable"
    assert workload.percentiles == (95.0, 99.0)
    assert workload.proportions == {"READ": 0.95, "UPDATE": 0.05}


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"recordcount": "ten"}, "recordcount='ten' is not a whole number"),
        ({"recordcount": "10", "readproportion": "half"}, "readproportion='half'"),
        ({"recordcount": "10", "readproportion": "1.5"}, "readproportion=1.5 is not between"),
        ({"recordcount": "10", "requestdistribution": "hotspot"}, "requestdistribution='hotspot'"),
        ({"recordcount": "10", "readallfields": "yes"}, "readallfields='yes' is not true or false"),
        ({"operationcount": "5"}, "recordcount must be set"),
        ({"recordcount": "10", "fieldlengthdistribution": "zipfian"}, "supports only constant"),
        ({"recordcount": "10", "minscanlength": "9", "maxscanlength": "3"}, "minscanlength"),
        (
            {
                "recordcount": "1",
                "operationcount": "1",
                "readproportion": "0",
                "updateproportion": "0",
            },
            "every operation proportion is 0",
        ),
    ],
)
def test_bad_values_are_refused_by_name(properties: dict[str, str], named: str) -> None:
    with pytest.raises(PropertyError, match=re.escape(named)):
        workload_from(properties)


def test_shipped_workloads_are_ycsbs_a_to_f() -> None:
    shares = {
        path.name: workload_from(
            parse_properties(path.read_text(), path.name), path.name
        ).proportions
        for path in STANDARD
    }
    assert shares == {
        "workloada": {"READ": 0.5, "UPDATE": 0.5},
        "workloadb": {"READ": 0.95, "UPDATE": 0.05},
        "workloadc": {"READ": 1.0},
        "workloadd": {"READ": 0.95, "INSERT": 0.05},
        "workloade": {"SCAN": 0.95, "INSERT": 0.05},
        "workloadf": {"READ": 0.5, "READMODIFYWRITE": 0.5},
    }
    distributions = [
        workload_from(parse_properties(p.read_text())).requestdistribution for p in STANDARD
    ]
    assert distributions == ["zipfian", "zipfian", "zipfian", "latest", "zipfian", "zipfian"]


def test_command_line_overrides_every_file(tmp_path: Path) -> None:
    args = arguments(["--recordcount", "50", "--threads", "3", "-p", "maxscanlength=7"])
    workloads = workloads_of(args)
    assert [w.name for w in workloads] == [p.name for p in STANDARD]
    assert {(w.recordcount, w.threadcount, w.maxscanlength) for w in workloads} == {(50, 3, 7)}
    with pytest.raises(PropertyError, match="expected key=value"):
        workloads_of(arguments(["-p", "novalue"]))
    with pytest.raises(PropertyError, match="cannot read"):
        workloads_of(arguments(["-P", str(tmp_path / "missing")]))


def test_records_live_in_their_slot_and_are_checked() -> None:
    workload = workload_from({"recordcount": "10", "fieldcount": "3", "fieldlength": "150"})
    layout = Layout(datetime(2026, 1, 1, tzinfo=UTC), 100_000)
    written = record(workload, layout, "ycsb-x", 7, 2)
    assert written["content"] == "user" + str(fnvhash64(7))
    assert written["ts"] == "2026-01-01T00:00:00.700002+00:00"
    assert len(written["attrs"]["field2"]) == 150
    assert layout.position(datetime.fromisoformat(written["ts"])) == (7, 2)
    assert layout.slots(7, 3) == ("2026-01-01T00:00:00.700000+00:00", "2026-01-01T00:00:01+00:00")
    item = {**written, "ref": "r"}
    assert row_problem(workload, layout, item) is None
    tampered = {**item, "attrs": {**item["attrs"], "field1": "x" * 150}}
    assert "field1 differs" in str(row_problem(workload, layout, tampered))
    moved = {**item, "ts": layout.ts(7, 3).isoformat()}
    assert "wrong ts" in str(row_problem(workload, layout, moved))
    assert "no keynum" in str(row_problem(workload, layout, {**item, "attrs": None}))


def test_layout_keeps_the_key_space_within_retention() -> None:
    workloads = [
        workload_from({"recordcount": "1000", "operationcount": "100", "insertproportion": "0.5"})
    ]
    now = datetime(2026, 5, 1, tzinfo=UTC)
    layout = plan_layout(workloads, 100_000, now)
    assert layout.ts(1000 + 100 + 1, 0) < now
    with pytest.raises(PropertyError, match="retention"):
        plan_layout([workload_from({"recordcount": "30000000"})], 100_000, now)


def test_output_has_ycsbs_layout() -> None:
    measurements = Measurements((95.0, 99.0), runtime_ms=2000, operations=5)
    for latency in (300, 100, 200, 400):
        measurements.measure("READ", latency, OK)
    measurements.measure("UPDATE", 1000, ERROR)
    text = ycsb_text(measurements)
    assert text.splitlines() == [
        "[OVERALL], RunTime(ms), 2000",
        "[OVERALL], Throughput(ops/sec), 2.5",
        "[READ], Operations, 4",
        "[READ], AverageLatency(us), 250.0",
        "[READ], MinLatency(us), 100",
        "[READ], MaxLatency(us), 400",
        "[READ], 95thPercentileLatency(us), 400",
        "[READ], 99thPercentileLatency(us), 400",
        "[READ], Return=OK, 4",
        "[UPDATE], Operations, 1",
        "[UPDATE], AverageLatency(us), 1000.0",
        "[UPDATE], MinLatency(us), 1000",
        "[UPDATE], MaxLatency(us), 1000",
        "[UPDATE], 95thPercentileLatency(us), 1000",
        "[UPDATE], 99thPercentileLatency(us), 1000",
        "[UPDATE], Return=ERROR, 1",
    ]
    assert all(LINE.match(line) for line in text.splitlines())
    assert measurements.failed == 1


def test_percentiles_ordinals_and_java_doubles() -> None:
    measurements = Measurements()
    for latency in range(1, 101):
        measurements.measure("READ", latency, OK)
    series = measurements.series["READ"]
    assert (series.percentile(50), series.percentile(95), series.percentile(99)) == (50, 95, 99)
    assert [ordinal(p) for p in (1.0, 2.0, 3.0, 11.0, 50.0, 95.0, 99.9)] == [
        "1st",
        "2nd",
        "3rd",
        "11th",
        "50th",
        "95th",
        "99.9",
    ]
    assert java_double(98.91196834817013) == "98.91196834817013"
    assert java_double(2.5) == "2.5" and java_double(0.0) == "0.0"
    assert java_double(12345678.0) == "1.2345678E7"
    assert java_double(0.0001) == "1.0E-4"
