import pytest

from router.catalog.snapshot import redact_dsn
from router.db.dsn import DsnError, as_uri, parse_dsn
from router.db.pools import connect_options
from router.settings import PoolSettings


@pytest.mark.parametrize(
    ("dsn", "hosts", "dbname"),
    [
        ("postgresql://u@127.0.0.1:5433/shardlog", (("127.0.0.1", 5433),), "shardlog"),
        ("postgres://db.example/x", (("db.example", 5432),), "x"),
        (
            "postgresql://u:secret@h1:5432,h2:5433/logs?target_session_attrs=read-write",
            (("h1", 5432), ("h2", 5433)),
            "logs",
        ),
        ("postgresql://[::1]:6000/x", (("::1", 6000),), "x"),
        ("host=a,b port=1,2 dbname=x user=u", (("a", 1), ("b", 2)), "x"),
        ("host=a port=7 dbname='my db' password='it\\'s'", (("a", 7),), "my db"),
        ("host=a dbname=x", (("a", 5432),), "x"),
    ],
)
def test_valid(dsn: str, hosts: tuple[tuple[str, int], ...], dbname: str) -> None:
    parsed = parse_dsn(dsn)
    assert parsed.hosts == hosts
    assert parsed.dbname == dbname
    assert parsed.multi_host == (len(hosts) > 1)


@pytest.mark.parametrize(
    ("dsn", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("mysql://h/db", "scheme"),
        ("postgresql://h:99999/db", "port"),
        ("postgresql://h:abc/db", "port"),
        ("postgresql://h1,,h2/db", "host"),
        ("postgresql://h/db?bogus=1", "unknown connection parameter"),
        ("postgresql://h/db?target_session_attrs=sometimes", "target_session_attrs"),
        ("just words", "neither"),
        ("host=a,b port=1,2,3", "3 ports"),
        ("dbname=x", "no host"),
        ("host=a\nport=1", "control"),
        ("host=a port=1 nonsense", "cannot parse"),
    ],
)
def test_invalid(dsn: str, reason: str) -> None:
    with pytest.raises(DsnError, match=reason):
        parse_dsn(dsn)


@pytest.mark.parametrize(
    ("dsn", "uri"),
    [
        ("postgresql://u@h/x", "postgresql://u@h/x"),
        ("host=a,b port=1,2 dbname=x user=u", "postgresql://u@a:1,b:2/x"),
        (
            "host=::1 port=5 dbname='my db' user=u password='p@ss' sslmode=require",
            "postgresql://u:p%40ss@[::1]:5/my%20db?sslmode=require",
        ),
        ("host=h dbname=x", "postgresql://h:5432/x"),
    ],
)
def test_keyword_dsns_become_uris(dsn: str, uri: str) -> None:
    assert as_uri(dsn) == uri
    assert parse_dsn(as_uri(dsn)).hosts == parse_dsn(dsn).hosts


def test_passwords_are_redacted() -> None:
    assert redact_dsn("postgresql://u:secret@h/x") == "postgresql://u:***@h/x"
    assert "secret" not in redact_dsn("host=h password=secret dbname=x")
    assert "secret" not in redact_dsn("host=h password='se cret' dbname=x")
    assert "secret" not in redact_dsn("postgresql://h/x?password=secret&sslmode=require")


MULTI = "postgresql://shardlog@h1:5432,h2:5432/shardlog?target_session_attrs=read-write"


def test_pool_options_keep_the_dsns_session_target() -> None:
    assert connect_options(MULTI, PoolSettings()).get("target_session_attrs") is None
    bare = "postgresql://shardlog@h1:5432,h2:5432/shardlog"
    assert connect_options(bare, PoolSettings())["target_session_attrs"] == "read-write"
    single = "postgresql://shardlog@h1:5432/shardlog"
    assert "target_session_attrs" not in connect_options(single, PoolSettings(), "prefer-standby")


def test_search_pool_options_prefer_a_standby_over_the_dsn() -> None:
    options = connect_options(MULTI, PoolSettings(), "prefer-standby")
    assert options["target_session_attrs"] == "prefer-standby"


def test_connect_timeout_is_asyncpgs_timeout_not_a_server_setting() -> None:
    from router.db.dsn import for_asyncpg

    assert for_asyncpg("postgresql://u@h:5432/db?connect_timeout=7&sslmode=disable") == (
        "postgresql://u@h:5432/db?sslmode=disable",
        7.0,
    )
    assert for_asyncpg("host=h port=5432 dbname=db connect_timeout=1")[1] == 2.0
    assert for_asyncpg("host=h port=5432 dbname=db connect_timeout=0")[1] is None
    assert for_asyncpg("postgresql://u@h:5432/db") == ("postgresql://u@h:5432/db", None)


@pytest.mark.parametrize("value", ["abc", "1.5", "\u0661"])
def test_connect_timeout_must_be_whole_seconds(value) -> None:
    with pytest.raises(DsnError):
        parse_dsn(f"host=h dbname=db connect_timeout={value}")


def test_the_reader_finds_the_primary_by_recovery_not_by_read_only() -> None:
    """The reader's sessions are read-only by default, so "read-write" would match no host of
    a multi-host shard: its pool asks for the primary instead."""
    from router.db import roles

    options = connect_options(MULTI, PoolSettings(), role=roles.READER)
    assert options["target_session_attrs"] == "primary"
    bare = MULTI.split("?")[0]
    assert connect_options(bare, PoolSettings(), role=roles.READER)["target_session_attrs"] == (
        "primary"
    )
    standby = connect_options(MULTI, PoolSettings(), "prefer-standby", roles.READER)
    assert standby["target_session_attrs"] == "prefer-standby"
