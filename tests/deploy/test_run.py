"""services.run, the entry point of the Ansible roles in process mode: the parts that need no
server (the full start/stop cycle runs in test_ansible.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services import run

SHARDS = [
    {
        "name": "shard01",
        "nodes": [
            {"name": "shard01-a", "host": "10.0.0.1", "port": 5432, "rest_port": 8008},
            {"name": "shard01-b", "host": "10.0.0.2", "port": "5433", "rest_port": "8009"},
        ],
    },
    {
        "name": "shard02",
        "nodes": [{"name": "shard02-a", "host": "10.0.0.2", "port": 5432, "rest_port": 8008}],
    },
]


def test_local_nodes_are_those_of_this_address_in_order() -> None:
    nodes = run.local_nodes(SHARDS, "10.0.0.2")
    assert [(n.name, n.shard, n.port, n.rest_port) for n in nodes] == [
        ("shard01-b", "shard01", 5433, 8009),
        ("shard02-a", "shard02", 5432, 8008),
    ]
    assert [n.name for n in run.local_nodes(SHARDS, None)] == [
        "shard01-a",
        "shard01-b",
        "shard02-a",
    ]
    assert run.local_nodes(SHARDS, "10.0.0.9") == []


def test_env_file_reads_like_systemd(tmp_path: Path) -> None:
    env = tmp_path / "router.env"
    env.write_text("# comment\n\nSHARDLOG_A=1\nSHARDLOG_DSN=postgresql://u@h:1/d?x=y\n")
    assert run.read_env_file(env) == {
        "SHARDLOG_A": "1",
        "SHARDLOG_DSN": "postgresql://u@h:1/d?x=y",
    }


@pytest.mark.parametrize(
    ("outcomes", "changed"),
    [
        ({"a": "reused", "b": "not running"}, False),
        ({"a": "reused", "b": "started"}, True),
        ({"a": "stopped"}, True),
        ({"a": "reloaded"}, True),
        ({"a": "initialized"}, True),
        ({"a": {"running": True}}, False),
    ],
)
def test_changed_only_when_something_was_done(outcomes: dict[str, object], changed: bool) -> None:
    assert run.changed(outcomes) is changed


def test_init_is_for_the_metadata_instance_only() -> None:
    parser = run.build_parser()
    args = parser.parse_args(["init", "metadata", "--root", "/x", "--port", "5432"])
    assert (args.action, args.kind, args.port) == ("init", "metadata", 5432)
    with pytest.raises(SystemExit):
        parser.parse_args(["init", "etcd", "--root", "/x"])


def test_stop_all_on_an_empty_root_stops_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run.main(["stop-all", "--root", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"changed": False, "services": {"router": "not running"}}


def test_start_without_a_rendered_config_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run.main(
        ["start", "haproxy", "--root", str(tmp_path), "--stats-port", "1", "--timeout", "1"]
    )
    assert code == 1
    assert "rendered by the ansible role first" in json.loads(capsys.readouterr().out)["error"]
