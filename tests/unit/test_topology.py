import pytest

from services.topology import build_topology


def test_default_is_twelve_shards_in_two_groups() -> None:
    topology = build_topology()
    assert len(topology.shards) == 12
    assert topology.groups == ("group1", "group2")
    assert [s.name for s in topology.shards if s.group == "group1"] == [
        f"shard{i:02d}" for i in range(1, 7)
    ]
    ports = [spec.port for spec in topology.instances]
    assert ports == list(range(25432, 25432 + 13))


def test_uneven_split_keeps_every_group_non_empty() -> None:
    topology = build_topology(shards=5, groups=3, base_port=30000)
    sizes = [sum(1 for s in topology.shards if s.group == g) for g in topology.groups]
    assert sizes == [2, 1, 2] or sorted(sizes) == [1, 2, 2]
    assert len(topology.groups) == 3


@pytest.mark.parametrize(
    ("shards", "groups", "port"), [(1, 2, 30000), (2, 0, 30000), (4, 2, 65534)]
)
def test_rejects_impossible_shapes(shards: int, groups: int, port: int) -> None:
    with pytest.raises(ValueError):
        build_topology(shards, groups, port)


def test_dsn_names_the_shardlog_database() -> None:
    spec = build_topology(shards=2, groups=1, base_port=30000).shards[0]
    assert spec.dsn() == "postgresql://shardlog@127.0.0.1:30001/shardlog"
