"""Connection limits from settings, with the cap fitted to the open-files limit."""

from __future__ import annotations

import resource

import pytest

from router.http.limits import connection_limits
from router.open_files import FD_RESERVE, connection_cap, raise_fd_limit
from router.settings import ServerSettings


@pytest.mark.parametrize(
    ("wanted", "fd_limit", "cap"),
    [
        (2048, 1_048_576, 2048),  # plenty of files
        (2048, 1024, 768),  # 1024 - 256 reserved
        (2048, 300, 150),  # a small limit: half of it
        (10, 1024, 10),
        (2048, 1, 1),
    ],
)
def test_connection_cap(wanted: int, fd_limit: int, cap: int) -> None:
    assert connection_cap(wanted, fd_limit) == cap


def test_limits_follow_the_settings() -> None:
    server = ServerSettings(
        header_timeout_s=3,
        max_header_bytes=2048,
        body_idle_timeout_s=7,
        body_min_bytes_per_s=0,
        max_connections=100,
    )
    limits = connection_limits(server)
    assert (limits.header_timeout_s, limits.max_header_bytes) == (3, 2048)
    assert (limits.body_idle_timeout_s, limits.body_min_bytes_per_s) == (7, 0)
    assert limits.max_connections == 100
    assert limits.health_connections == 16


def test_the_open_files_limit_is_raised_within_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
        wanted = 2048 + FD_RESERVE
        expected = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        assert raise_fd_limit(wanted) == expected
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == expected
        assert raise_fd_limit(100) == expected  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_defaults_are_sane() -> None:
    server = ServerSettings()
    assert server.header_timeout_s == 10
    assert server.body_idle_timeout_s == 30
    assert server.body_min_bytes_per_s == 500
    assert server.max_connections == 2048
    assert server.max_header_bytes == 65536
