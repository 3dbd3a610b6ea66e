"""The reference flow tools, run locally: nfcapd (a NetFlow/IPFIX collector writing nfdump
files), softflowd and pmacctd (exporters reading a packet capture), nfdump (reads the files back).

They are the flow collector's ground truth (bench/collector, tests/flowtruth). Each is started
and stopped by its PID with a deadline and keeps its log. Debian 12's versions: softflowd 1.1.0,
nfdump 1.7.1, pmacct 1.7.7 (Makefile APT_PACKAGES). What the tests established about them:

- softflowd ``-n a:p,b:p`` (one -n, comma-separated, at most 16) sends every datagram to each
  destination (``-l`` would spread them instead); a second ``-n`` replaces the first.
- softflowd reading a capture (``-r``) holds every flow until the end of the file, then exports
  them all in one burst, unpaced: a collector needs a receive buffer of a few MB (nfcapd ``-B``).
- ``-a`` takes the clock from the capture (boot = first packet, export time = last packet), so
  flow times are the packets' times (v5/v9: to the second, as the header carries whole seconds).
"""

from __future__ import annotations

import csv
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from services import process
from services.daemon import Daemon
from services.process import ServiceError

Version = Literal[5, 9, 10]
Collector = tuple[str, int]
RECEIVE_BUFFER = 8 << 20
_PROTOCOLS = {"ICMP": 1, "TCP": 6, "UDP": 17, "ICMP6": 58}
_EXPORTED = re.compile(
    r"Flows exported: (\d+) \((\d+) records\) in (\d+) packets \((\d+) failures\)"
)


@dataclass(frozen=True, order=True)
class FiveTuple:
    """One direction of a conversation; addresses in their compressed text form."""

    src: str
    dst: str
    src_port: int
    dst_port: int
    proto: int

    def reversed(self) -> FiveTuple:
        return FiveTuple(self.dst, self.src, self.dst_port, self.src_port, self.proto)


@dataclass(frozen=True)
class Totals:
    flows: int
    packets: int
    bytes: int


@dataclass(frozen=True)
class ExportStats:
    """What an exporter said it sent (softflowd's statistics at the end of a capture)."""

    flows: int  # softflowd's flows hold both directions
    records: int  # one per direction that saw packets (v5, v9 and IPFIX without -b)
    datagrams: int  # per destination
    failures: int
    log: Path


# --- UDP sockets, as the kernel lists them ---------------------------------------------------


def _udp_sockets(port: int) -> list[list[str]]:
    """The kernel's lines (fields) of every UDP socket bound to ``port`` (any address, IPv4 or
    IPv6)."""
    found = []
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append(fields)
    return found


def udp_receive_queue(port: int) -> int | None:
    """Bytes waiting in the receive queue of the UDP socket bound to ``port``, or None when
    none is bound."""
    sockets = _udp_sockets(port)
    if not sockets:
        return None
    return sum(int(fields[4].split(":")[1], 16) for fields in sockets)


def udp_drops(port: int) -> int:
    """Datagrams the kernel dropped for the UDP socket bound to ``port`` since it was opened
    (its receive buffer full): the last column of /proc/net/udp."""
    return sum(int(fields[-1]) for fields in _udp_sockets(port))


def wait_drained(port: int, timeout: float) -> None:
    """Until the socket on ``port`` has read every datagram that reached it."""
    deadline = time.monotonic() + timeout
    while (queued := udp_receive_queue(port)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if queued:
        raise ServiceError(f"port {port} still holds {queued} unread bytes after {timeout:.0f}s")


# --- nfcapd: the reference collector -----------------------------------------------------------


class Nfcapd:
    """nfcapd in the foreground on ``host:port``, writing into ``home/flows``."""

    def __init__(
        self, home: Path, port: int, host: str = "127.0.0.1", name: str = "nfcapd"
    ) -> None:
        self.host, self.port = host, port
        self.home = home.absolute()
        self.daemon = Daemon(name, self.home, None, marker="nfcapd")

    @property
    def flow_dir(self) -> Path:
        return self.home / "flows"

    @property
    def log_file(self) -> Path:
        return self.daemon.log_file

    def start(self, timeout: float = 10.0) -> None:
        self.flow_dir.mkdir(parents=True, exist_ok=True)
        command: list[str | os.PathLike[str]] = [
            "nfcapd",
            "-w",
            self.flow_dir,
            "-b",
            self.host,
            "-p",
            str(self.port),
        ]
        # One file per hour at most (the tests stop it sooner); a burst-sized socket buffer.
        command += ["-t", "3600", "-B", str(RECEIVE_BUFFER)]
        self.daemon.start(command, lambda: udp_receive_queue(self.port) is not None, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Once every datagram that arrived is read: SIGTERM, on which nfcapd writes its file
        out (renamed from nfcapd.current.PID to nfcapd.YYYYMMDDhhmm), then SIGKILL at the
        deadline."""
        if not self.daemon.running():
            return
        try:
            wait_drained(self.port, timeout)
        finally:
            self.daemon.stop(timeout)

    def totals(self) -> dict[FiveTuple, Totals]:
        return nfdump_totals(self.flow_dir)


# --- nfdump: what the collector stored ---------------------------------------------------------


def _nfdump(*args: str | os.PathLike[str], timeout: float = 60.0) -> str:
    result = subprocess.run(
        ["nfdump", *(os.fspath(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TZ": "UTC", "LC_ALL": "C"},
    )
    if result.returncode != 0:
        raise ServiceError(f"nfdump {' '.join(map(str, args))}: {result.stderr.strip()}")
    return result.stdout


def _csv_rows(text: str) -> list[dict[str, str]]:
    """nfdump's csv: a header, one line per record, then (after a blank line when aggregated)
    its summary."""
    body = []
    for line in text.strip().splitlines():
        if not line or line == "Summary":
            break
        body.append(line)
    return list(csv.DictReader(body))


def _key(row: dict[str, str]) -> FiveTuple:
    proto = row["pr"].strip()
    return FiveTuple(
        row["sa"].strip(),
        row["da"].strip(),
        int(row["sp"]),
        int(row["dp"]),
        _PROTOCOLS[proto] if proto in _PROTOCOLS else int(proto),
    )


def nfdump_totals(flow_dir: Path) -> dict[FiveTuple, Totals]:
    """Per directional 5-tuple: nfdump's own aggregation (``-A srcip,dstip,srcport,dstport,
    proto``) for packets and bytes, and the number of records it holds for flows.

    nfdump 1.7.1 prints aggregated csv with full IPv6 addresses but without the flow count, and
    ``-o fmt:%fl`` with the count but IPv6 addresses shortened to ``2001:db..34:5678`` (``-o
    json`` with -A prints empty records); so the flows come from the unaggregated records, and
    their sums must agree with the aggregation.
    """
    if not any(flow_dir.glob("nfcapd.*")):
        return {}
    aggregated = _nfdump(
        "-R", flow_dir, "-N", "-A", "srcip,dstip,srcport,dstport,proto", "-o", "csv"
    )
    records = _nfdump("-R", flow_dir, "-N", "-o", "csv")
    counted: dict[FiveTuple, list[int]] = {}
    for row in _csv_rows(records):
        sums = counted.setdefault(_key(row), [0, 0, 0])
        sums[0] += 1
        sums[1] += int(row["ipkt"])
        sums[2] += int(row["ibyt"])
    totals = {}
    for row in _csv_rows(aggregated):
        key = _key(row)
        flows, packets, size = counted.pop(key, [0, 0, 0])
        if (packets, size) != (int(row["ipkt"]), int(row["ibyt"])):
            raise ServiceError(f"nfdump's aggregation of {key} disagrees with its records")
        totals[key] = Totals(flows, packets, size)
    if counted:
        raise ServiceError(f"nfdump aggregated no line for {sorted(counted)[:3]}")
    return dict(sorted(totals.items()))


def nfdump_flow_count(flow_dir: Path) -> int:
    """The records nfcapd's files under ``flow_dir`` hold (the sum of nfdump -I's Flows)."""
    total = 0
    for path in sorted(flow_dir.glob("nfcapd.*")):
        for line in _nfdump("-I", "-r", path).splitlines():
            if line.startswith("Flows:"):
                total += int(line.split()[1])
    return total


def nfdump_exporters(flow_dir: Path) -> str:
    """nfdump -E: the exporters and samplers the files hold (the sampling nfcapd applied)."""
    files = sorted(flow_dir.glob("nfcapd.*"))
    return "\n".join(_nfdump("-E", path) for path in files)


# --- exporters reading a capture ---------------------------------------------------------------


def _run_logged(command: Sequence[str | os.PathLike[str]], log: Path, timeout: float) -> None:
    """Run ``command`` to its end with its output in ``log``; TERM then KILL at the deadline."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        child = subprocess.Popen(
            [os.fspath(part) for part in command],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            process.terminate(child.pid, signal.SIGTERM, timeout=5)
            child.wait()
            raise ServiceError(
                f"{command[0]} did not finish within {timeout:.0f}s; see {log}:\n"
                + process.tail(log)
            ) from None
    if child.returncode != 0:
        raise ServiceError(f"{command[0]} exited with {child.returncode}:\n{process.tail(log)}")


def softflowd_replay(
    pcap: Path,
    collectors: Sequence[Collector],
    version: Version,
    log: Path,
    *,
    sample_rate: int = 0,
    track_v6: bool = False,
    bidirectional: bool = False,
    timeout: float = 60.0,
) -> ExportStats:
    """softflowd reads ``pcap`` and exports every flow to each of ``collectors`` at its end.

    ``-a`` (the capture's clock), ``-d`` (foreground: no pid file, no privilege drop),
    ``-c none`` (no control socket). ``sample_rate`` N >= 2 is ``-s N``: every Nth packet.
    ``track_v6`` is ``-6`` (v9 and IPFIX track IPv6 anyway; v5 cannot carry it).
    ``bidirectional`` is ``-b`` (IPFIX only: one record for both directions, RFC 5103).
    """
    destinations = ",".join(f"{host}:{port}" for host, port in collectors)
    command: list[str | os.PathLike[str]] = ["softflowd", "-d", "-a", "-c", "none", "-r", pcap]
    command += ["-v", str(version), "-n", destinations]
    # Every flow kept until the end of the file (softflowd evicts the oldest past -m).
    command += ["-m", "1000000"]
    if sample_rate >= 2:
        command += ["-s", str(sample_rate)]
    if track_v6:
        command.append("-6")
    if bidirectional:
        command.append("-b")
    _run_logged(command, log, timeout)
    match = _EXPORTED.search(log.read_text(errors="replace"))
    if match is None:
        raise ServiceError(f"softflowd printed no export statistics:\n{process.tail(log)}")
    flows, records, datagrams, failures = (int(group) for group in match.groups())
    return ExportStats(flows, records, datagrams, failures, log)


PMACCT_CONFIG = """\
daemonize: false
pcap_savefile: {pcap}
plugins: nfprobe
nfprobe_receiver: {host}:{port}
nfprobe_version: {version}
nfprobe_engine: 77
aggregate: src_host, dst_host, src_port, dst_port, proto
"""


def pmacct_replay(
    pcap: Path, collector: Collector, version: Version, home: Path, *, timeout: float = 60.0
) -> Path:
    """pmacctd reads ``pcap`` with its nfprobe plugin (a softflowd 0.9.7 descendant) exporting
    to ``collector`` as engine 77 (its own observation domain / source id, apart from
    softflowd's on the same address, whose sampling options would otherwise apply to it);
    it flushes every flow at the end of the file and exits. Its log's path.
    pmacctd sleeps 2 s before reading a savefile (its plugins start meanwhile)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / f"pmacctd-v{version}.conf"
    host, port = collector
    config.write_text(PMACCT_CONFIG.format(pcap=pcap, host=host, port=port, version=version))
    log = home / f"pmacctd-v{version}.log"
    _run_logged(["pmacctd", "-f", config], log, timeout)
    return log


def udp_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A bound UDP socket with a receive buffer large enough for an exporter's burst."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.bind((host, port))
    return sock


def receive(sock: socket.socket, count: int, timeout: float = 10.0) -> list[bytes]:
    """``count`` datagrams from ``sock`` (already queued, or arriving before the deadline)."""
    datagrams: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(datagrams) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ServiceError(f"{len(datagrams)} of {count} datagrams within {timeout:.0f}s")
        sock.settimeout(left)
        try:
            datagrams.append(sock.recv(65535))
        except TimeoutError:
            continue
    return datagrams
