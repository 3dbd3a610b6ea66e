"""What every benchmark shares: its own local cluster and router (the default 12-shard
topology on ports of its own), repeated timed runs reduced to medians, ratios against a named
peer, and results written as JSON and a PNG plot under bench/results/."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import stamps
from router import bootstrap, clock
from router.auth import store as auth_store
from router.auth.scopes import SCOPES, SYSTEM_TENANT
from router.catalog import tables as day_tables
from router.cli.cluster import local_cluster
from router.db import catalog_login, pools
from router.settings import ClusterSettings, ServerSettings, Settings
from services import process
from services.router_process import RouterProcess
from services.syslog_process import SyslogProcess

RESULTS = Path(__file__).parent / "results"
# The Authorization header of the token bench_cluster makes for each router it starts (every
# scope, no limits), by the router's URL: benchmarks send it with every /v1 request.
TOKENS: dict[str, dict[str, str]] = {}


def auth_for(url: str) -> dict[str, str]:
    return TOKENS.get(url.rstrip("/"), {})


BENCH_BASE_PORT = int(os.environ.get("SHARDLOG_BENCH_BASE_PORT", "26432"))
BENCH_ROUTER_PORT = int(os.environ.get("SHARDLOG_BENCH_ROUTER_PORT", "8090"))


@dataclass
class Result:
    """One configuration measured ``repeats`` times."""

    name: str
    params: dict[str, Any]
    rows: int
    payload_bytes: int
    seconds: list[float] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.median_s

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.median_s / 1e6

    def summary(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "median_s": round(self.median_s, 4),
            "rows_per_s": round(self.rows_per_s),
            "mb_per_s": round(self.mb_per_s, 2),
        }


def scratch_dir(prefix: str) -> Path:
    """A new directory for a benchmark's own cluster, removed when the benchmark exits (its
    servers' data is hundreds of MB a run)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def bench_settings(
    data_dir: Path,
    shards: int = 12,
    groups: int = 2,
    *,
    ha: bool = False,
    base_port: int = BENCH_BASE_PORT,
    router_port: int = BENCH_ROUTER_PORT,
) -> Settings:
    """The benchmark's cluster: ``shards`` plain instances, or with ``ha`` as many shards of
    Patroni primary + replica with etcd and HAProxy. The benchmark reads the clock its router
    and cluster read (SHARDLOG_CLOCK__*, the wall clock unless a test shifts it)."""
    settings = Settings(
        cluster=ClusterSettings(
            data_dir=data_dir,
            shards=shards,
            groups=groups,
            base_port=base_port,
            ha=ha,
            ha_shards=shards,
        ),
        server=ServerSettings(port=router_port),
    )
    clock.configure(settings.clock)
    return settings


def router_env(settings: Settings) -> dict[str, str]:
    return {
        "SHARDLOG_CLUSTER__DATA_DIR": str(settings.cluster.data_dir),
        "SHARDLOG_CLUSTER__BASE_PORT": str(settings.cluster.base_port),
        "SHARDLOG_CLUSTER__SHARDS": str(settings.cluster.shards),
        "SHARDLOG_CLUSTER__GROUPS": str(settings.cluster.groups),
        "SHARDLOG_CLUSTER__HA": str(settings.cluster.ha).lower(),
        "SHARDLOG_CLUSTER__HA_SHARDS": str(settings.cluster.ha_shards),
        "SHARDLOG_SERVER__PORT": str(settings.server.port),
        # A benchmark compacts what it measures compacted itself (bench/storage), nothing else.
        "SHARDLOG_COMPACTION__ENABLED": "false",
    }


def cli_env(settings: Settings) -> dict[str, str]:
    """The CLI's environment: the benchmark cluster's settings, the shared clock, the
    cluster's password file (in os.environ since bench_cluster)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SHARDLOG_") or k.startswith("SHARDLOG_CLOCK__")
    }
    return {**clean, **router_env(settings)}


@contextmanager
def bench_cluster(
    settings: Settings,
    with_router: bool = True,
    router_extra_env: dict[str, str] | None = None,
    postgres: dict[str, str] | None = None,
) -> Iterator[tuple[Any, RouterProcess | None]]:
    """Start (or reuse) the benchmark cluster (a LocalCluster, or an HaCluster when
    ``settings.cluster.ha``) and its router; stop them afterwards. ``postgres`` overrides
    postgresql.conf values of every instance (e.g. ``{"shared_buffers": "1GB"}``); a reused
    data directory gets them at this start."""
    c = settings.cluster
    cluster = local_cluster(settings, ha=c.ha, parameters=postgres)
    router = None
    # A benchmark stopped by SIGTERM still stops what it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cluster.start()
        # Nobody is trusted: the benchmarks' own psql and superuser connections (peers, loads,
        # CHECKPOINT) read the cluster's password file.
        os.environ["PGPASSFILE"] = str(cluster.secrets.passfile)
        asyncio.run(bootstrap.migrate_all(settings))
        asyncio.run(bootstrap.register_topology(settings, cluster.topology))
        asyncio.run(bootstrap.migrate_all(settings))
        if with_router:
            router = RouterProcess(
                c.data_dir,
                settings.server.host,
                settings.server.port,
                env={**router_env(settings), **(router_extra_env or {})},
            )
            router.start()
            TOKENS[router.url] = bench_token(settings)
        yield cluster, router
    finally:
        if router is not None:
            router.stop()
        cluster.stop()


def bench_token(settings: Settings) -> dict[str, str]:
    """An every-scope token of the system tenant without limits, made in the catalog."""

    async def make() -> str:
        connection = await catalog_login.connect(settings)
        try:
            _, text = await auth_store.create_token(
                connection,
                SYSTEM_TENANT,
                "bench",
                SCOPES,
                "bench",
                limits=auth_store.TokenLimits(rate_per_s=0, ingest_bytes_per_s=0),
            )
            return text
        finally:
            await connection.close()

    return {"Authorization": f"Bearer {asyncio.run(make())}"}


async def send(url: str, path: str, bodies: list[bytes], clients: int) -> None:
    """``clients`` concurrent clients, each posting its share of the NDJSON bodies in turn;
    any answer but 200 ends the run."""

    async def client(mine: list[bytes]) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300, headers=auth_for(url)) as http:
            for body in mine:
                response = await http.post(
                    path, content=body, headers={"content-type": "application/x-ndjson"}
                )
                if response.status_code != 200:
                    raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")

    await asyncio.gather(*(client(bodies[i::clients]) for i in range(clients)))


async def timed_get(
    http: httpx.AsyncClient, params: dict[str, Any], path: str = "/v1/audit/search"
) -> tuple[float, dict[str, Any]]:
    """Milliseconds of one GET, and its JSON answer (anything but 200 ends the run)."""
    started = time.perf_counter()
    response = await http.get(path, params=params)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
    return elapsed, response.json()


def baseline_router(settings: Settings, home: Path, code: Path) -> RouterProcess:
    """A second router on the same cluster, running the router package of another checkout."""
    port = process.free_port()
    env = {**router_env(settings), "SHARDLOG_SERVER__PORT": str(port)}
    router = RouterProcess(home, settings.server.host, port, env=env, code=code)
    router.start()
    TOKENS[router.url] = bench_token(settings)
    return router


def timed(
    run: Callable[[], Awaitable[None]],
    repeats: int,
    warmup: int = 1,
    setup: Callable[[], Awaitable[None]] | None = None,
    teardown: Callable[[], Awaitable[None]] | None = None,
) -> list[float]:
    """Wall-clock seconds of ``repeats`` runs after ``warmup`` unmeasured ones; ``setup`` and
    ``teardown`` run untimed in the same event loop."""

    async def go() -> list[float]:
        if setup is not None:
            await setup()
        try:
            for _ in range(warmup):
                await run()
            seconds = []
            for _ in range(repeats):
                started = time.perf_counter()
                await run()
                seconds.append(time.perf_counter() - started)
            return seconds
        finally:
            if teardown is not None:
                await teardown()

    return asyncio.run(go())


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of a process so far, to the nanosecond (/proc/PID/stat counts
    in ticks of 10 ms: too coarse for a few percent of a second)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy (not idle or waiting) so far."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def verdict(value: float, target: float, *, at_most: bool = True) -> dict[str, Any]:
    """One target of a benchmark as every result file states it (bench/overview reads these):
    the measured value, the limit, its direction, and whether it was met. The one place a
    verdict is computed: bench/overview and the tests recompute stored ones with it."""
    met = value <= target if at_most else value >= target
    return {"value": value, "target": target, "met": met, "at_most": at_most}


def print_verdicts(judged: Mapping[str, Mapping[str, Any]]) -> None:
    """Each target's verdict on a line, and a SHORTFALL line for each one missed."""
    for name, found in judged.items():
        state = "met" if found["met"] else "SHORTFALL"
        bound = "<=" if found["at_most"] else ">="
        print(f"  {name:45} {found['value']:9.3f} (target {bound} {found['target']}): {state}")
        if not found["met"]:
            print(f"SHORTFALL: {name} {found['value']}, target {bound} {found['target']}")


def context(value: float, compared_with: str) -> dict[str, Any]:
    """A figure shown beside the targets, not judged: a comparison that cannot miss (with a
    path slow by design) or a figure of other code. ``compared_with`` says what it measures
    against and why it is not a target."""
    return {"value": value, "compared_with": compared_with}


class Progress:
    """Work done, its rate and the time left, on one terminal line (stderr) at most every
    ``every_s`` seconds, so that a long run shows it is moving."""

    def __init__(self, label: str, total: int, unit: str = "rows", every_s: float = 2.0) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self._every_s = every_s
        self._started = time.monotonic()
        self._shown = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if now - self._shown >= self._every_s or self.done >= self.total:
            self._shown = now
            print(self.line(now), file=sys.stderr, flush=True)

    def line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self.done / elapsed
        left = max(self.total - self.done, 0)
        eta = f"{left / rate:,.0f} s" if rate > 0 else "?"
        share = 100 * self.done / self.total if self.total else 100.0
        return (
            f"  {self.label}: {self.done:,}/{self.total:,} {self.unit} ({share:.0f} %), "
            f"{rate:,.0f} {self.unit}/s, ETA {eta}"
        )


def grouped_bars(axes: Any, labels: list[str], series: dict[str, list[float]]) -> None:
    """One group of bars per label, one bar per series (its name in the legend), ticks under
    the middle of each group."""
    width = 0.8 / max(len(series), 1)
    for offset, (name, values) in enumerate(series.items()):
        axes.bar([i + offset * width for i in range(len(labels))], values, width=width, label=name)
    axes.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))], labels)


def write_results(
    name: str,
    payload: dict[str, Any],
    plot: Callable[[Any], None],
    *,
    mode: Mapping[str, Any],
    parts: Mapping[str, bool] | None = None,
) -> tuple[Path, Path]:
    """bench/results/NAME.json (``payload`` under this run's stamp: time, commit, machine and
    ``mode``, see bench/stamps.py) and NAME.png. A benchmark measured in parts names them all
    in ``parts`` with whether this run measured each; its payload already holds the stored
    figures of the parts it did not measure."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS / f"{name}.json"
    earlier = json.loads(json_path.read_text()) if parts and json_path.exists() else None
    result = stamps.stamped(payload, stamps.stamp(name, mode), parts, earlier)
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    return json_path, draw(name, plot, stamps.caption(result))


def redraw(name: str, plot: Callable[[dict[str, Any]], Callable[[Any], None]]) -> Path:
    """NAME.png drawn again from the stored NAME.json, which stays as it is (its figures and
    their stamp): nothing is measured."""
    stored: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text())
    return draw(name, plot(stored), stamps.caption(stored))


def draw(name: str, plot: Callable[[Any], None], caption: str) -> Path:
    """NAME.png: the benchmark's plot with its stamp (commit, time, mode) along the bottom."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(11, 6))
    plot(figure)
    figure.text(0.005, 0.005, caption, fontsize=7, color="dimgrey")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    png_path = RESULTS / f"{name}.png"
    figure.savefig(png_path, dpi=110)
    plt.close(figure)
    return png_path


async def register_loaded(
    settings: Settings, metadata: Any, snapshot: Any, connections: dict[str, Any]
) -> None:
    """After a load by COPY straight into day tables: ANALYZE every shard, record its day
    tables in the catalog (and the coordinator), close the connections."""
    for name, connection in connections.items():
        await connection.execute("VACUUM ANALYZE")
        known = snapshot.shards[name]
        login = pools.coordinator_login(known.dsn, settings.pools)
        await day_tables.sync(metadata, known, connection, login)
        await connection.close()


def percentiles(latencies: list[float]) -> dict[str, float]:
    """Probe latencies (seconds) as their count, p50, p99 and max in milliseconds."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "probes": len(latencies),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "max_ms": round(max(latencies) * 1000, 2),
    }


@contextmanager
def syslog_listener(
    settings: Settings, home: Path, port: int, router_url: str
) -> Iterator[SyslogProcess]:
    """`shardlog syslog` of the benchmark's cluster on ``port`` (UDP and TCP), its metrics and
    /health on ``port + 1``; stopped afterwards. The listener writes only the messages of
    senders it knows: this host's, as the system tenant (the bench token's, which counts and
    searches them)."""
    mapped = httpx.put(
        f"{router_url}/v1/admin/syslog-senders/127.0.0.1",
        json={"tenant": SYSTEM_TENANT},
        headers=auth_for(router_url),
        timeout=30,
    )
    mapped.raise_for_status()
    env = {
        **router_env(settings),
        "SHARDLOG_SYSLOG__UDP_PORT": str(port),
        "SHARDLOG_SYSLOG__TCP_PORT": str(port),
        "SHARDLOG_SYSLOG__METRICS_PORT": str(port + 1),
    }
    listener = SyslogProcess(home, "127.0.0.1", port + 1, env)
    listener.start()
    try:
        yield listener
    finally:
        listener.stop()
