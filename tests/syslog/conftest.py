"""One syslog listener for the session, beside the session's cluster and router."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from router.auth.scopes import SYSTEM_TENANT
from router.settings import Settings
from services.cluster import LocalCluster
from tests.support import free_port_range, run_cli
from tests.syslog.platform import RunningSyslog


@pytest.fixture(scope="session")
def syslog_ports() -> Iterator[int]:
    """Loopback ports of our own, one per call."""
    return itertools.count(free_port_range(40))


@pytest.fixture(scope="session")
def listener(
    settings: Settings,
    cluster: LocalCluster,
    syslog_ports: Iterator[int],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningSyslog]:
    # The tests' senders are this host's (127.0.0.1), writing as the system tenant; other
    # loopback addresses (127.0.0.2 and up) stay unknown unless a test maps them.
    mapped = run_cli(settings, "syslog-senders", "set", "127.0.0.1", "--tenant", SYSTEM_TENANT)
    assert mapped.returncode == 0, mapped.stderr
    home = tmp_path_factory.mktemp("syslog")
    with RunningSyslog(home, settings, syslog_ports).running() as process:
        yield process
