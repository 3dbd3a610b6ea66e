import asyncpg
import pytest

from router.db.failures import coordinator_error, is_transient
from router.errors import BadRequest, GatewayTimeout, Unavailable

SETTING = "SHARDLOG_SEARCH__SHARD_TIMEOUT_S"


@pytest.mark.parametrize(
    ("exc", "kind", "status"),
    [
        (asyncpg.InvalidRegularExpressionError("bad"), BadRequest, 400),
        (TimeoutError(), GatewayTimeout, 504),
        (asyncpg.QueryCanceledError("statement timeout"), GatewayTimeout, 504),
        (asyncpg.UndefinedTableError("gone"), Unavailable, 503),
        (asyncpg.UndefinedObjectError('user mapping not found for "x"'), Unavailable, 503),
        (asyncpg.CannotConnectNowError("starting"), Unavailable, 503),
        # No host of a multi-host DSN matches its target (a failover under way).
        (asyncpg.InternalClientError("no suitable host: target attribute"), Unavailable, 503),
    ],
)
def test_what_a_client_is_told(exc: BaseException, kind: type, status: int) -> None:
    error = coordinator_error(exc, 5.0, SETTING)
    assert isinstance(error, kind)
    assert error.status == status


def test_a_bug_stays_a_bug() -> None:
    assert coordinator_error(asyncpg.DivisionByZeroError("x"), 5.0, SETTING) is None
    assert coordinator_error(ValueError("x"), 5.0, SETTING) is None


def test_a_timeout_names_the_setting() -> None:
    error = coordinator_error(TimeoutError(), 2.5, SETTING)
    assert error is not None and "2.5s" in error.message and SETTING in error.message


def test_a_connection_asyncpg_gave_up_on_is_tried_again() -> None:
    """InternalClientError: a connection broken mid-protocol, or no host of a multi-host DSN
    that is what it asks for (a standby reader whose only standby a failover lost): another
    attempt (the primary) serves it, as a broken connection's would."""
    assert is_transient(asyncpg.InternalClientError("target attribute"))
    assert not is_transient(asyncpg.DivisionByZeroError("x"))
