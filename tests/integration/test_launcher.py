"""Lifecycle of one PostgreSQL instance started by the project's launcher."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import markupsafe
import pytest

import router
import services
from router import cluster_defaults
from services.postgres import InstanceSpec, PostgresInstance
from services.process import ServiceError, free_port, is_alive, make_owned_dir, server_user


@pytest.fixture
def instance(tmp_path: Path) -> PostgresInstance:
    spec = InstanceSpec(name="solo", port=free_port(), role="shard", group="g")
    inst = PostgresInstance(spec, tmp_path / "pg", server_user(), settings={"fsync": "off"})
    yield inst
    inst.stop(timeout=10)


def test_start_reuse_stop(instance: PostgresInstance) -> None:
    assert instance.start() == "started"
    pid = instance.pid()
    assert pid is not None and instance.ready()
    assert instance.psql("shardlog", "SHOW max_wal_size").strip() == "4GB"
    assert instance.psql("shardlog", "SELECT current_user").strip() == "shardlog"
    assert instance.start() == "reused"
    assert instance.pid() == pid
    assert instance.stop() is True
    assert not is_alive(pid)
    assert instance.pid() is None
    assert instance.stop() is False  # stopping a stopped instance is harmless
    assert instance.log_file.exists()


def test_runs_as_unprivileged_user_when_root(instance: PostgresInstance) -> None:
    instance.start()
    owner = instance.psql("postgres", "SELECT 1")  # reachable
    assert owner.strip() == "1"
    pid = instance.pid()
    assert pid is not None
    uid = os.stat(f"/proc/{pid}").st_uid
    if os.geteuid() == 0:
        assert uid != 0
        assert instance.data_dir.stat().st_uid == uid
    else:
        assert uid == os.geteuid()


def test_restart_after_kill_with_stale_pid_file(instance: PostgresInstance) -> None:
    instance.start()
    instance.kill()
    assert instance.pid_file.exists()  # left behind by the crash
    assert instance.pid() is None
    assert instance.start() == "started"
    assert instance.psql("shardlog", "SELECT 42").strip() == "42"


def test_stale_pid_file_naming_an_unrelated_process(instance: PostgresInstance) -> None:
    instance.start()
    instance.stop()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid_file_text = f"{sleeper.pid}\n{instance.data_dir}\n"
        instance.pid_file.write_text(pid_file_text)
        assert instance.pid() is None
        assert instance.start() == "started"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_port_taken_is_a_clear_error(instance: PostgresInstance, tmp_path: Path) -> None:
    instance.start()
    other = PostgresInstance(
        InstanceSpec(name="clash", port=instance.spec.port, role="shard"),
        tmp_path / "other",
        server_user(),
    )
    with pytest.raises(ServiceError, match="is taken"):
        other.start()


def test_data_survives_restart(instance: PostgresInstance) -> None:
    instance.start()
    instance.psql("shardlog", "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
    instance.stop()
    instance.start()
    assert instance.psql("shardlog", "SELECT v FROM kept").strip() == "7"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None,
    reason="needs root to switch to an ordinary user",
)
def test_launcher_works_for_an_ordinary_user(tmp_path: Path) -> None:
    """The same launcher run by an ordinary account starts servers as that account."""
    user = server_user()
    assert user is not None
    home = make_owned_dir(tmp_path / "ordinary", user)
    # The checkout may sit in a directory the ordinary user cannot read (a 0700 clone), so the
    # launcher, the defaults it shares with the router and its one dependency are copied where
    # it can.
    code = tmp_path / "code"
    for package in (services, jinja2, markupsafe):
        source = Path(package.__file__).parent
        shutil.copytree(source, code / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    (code / "router").mkdir()
    for module in (router, cluster_defaults):
        shutil.copy(Path(module.__file__), code / "router")
    script = (
        "import sys; from pathlib import Path;"
        "from services.postgres import InstanceSpec, PostgresInstance;"
        "from services.process import server_user, free_port;"
        "assert server_user() is None;"
        "i = PostgresInstance(InstanceSpec('solo', free_port(), 'shard'), Path(sys.argv[1]), None);"
        "print(i.start()); print(i.psql('shardlog', 'SELECT current_user').strip());"
        "print(i.stop())"
    )
    result = subprocess.run(
        ["runuser", "-u", user.name, "--", "/usr/bin/python3", "-c", script, str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=home,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(code)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["started", "shardlog", "True"]
