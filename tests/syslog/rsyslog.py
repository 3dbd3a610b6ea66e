"""rsyslogd as a forwarder, started by the tests in the foreground with a configuration of its
own (no imuxsock, no imklog: it reads nothing of the host's): one imtcp input per forwarding
path, each bound to a ruleset with one action towards the listener."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from services.tls import ServerCertificate
from tests.syslog.platform import RunningSyslog

PATHS = ("tcp", "udp", "relp", "tls")


def kept(path: str) -> str:
    """What docs/operations.md gives every TCP, TLS and RELP action so that a listener restart
    loses nothing (retried for ever, a disk-assisted queue), with a retry interval of a second
    instead of rsyslog's 30 s so that the tests need not wait."""
    return (
        f' action.resumeRetryCount="-1" queue.type="LinkedList" queue.filename="shardlog_{path}"'
        ' queue.maxDiskSpace="1g" queue.saveOnShutdown="on" action.resumeInterval="1"'
    )


def config(
    work: Path,
    inputs: dict[str, int],
    listener: RunningSyslog,
    certificate: ServerCertificate | None = None,
) -> str:
    """``certificate``: the client certificate TLS shows (mutual TLS)."""
    ca = listener.authority.cert
    mine = (
        f' defaultNetstreamDriverCertFile="{certificate.cert}"'
        f' defaultNetstreamDriverKeyFile="{certificate.key}"'
        if certificate is not None
        else ""
    )
    actions = {
        # RFC 5424 out, octet counted.
        "tcp": f'type="omfwd" target="127.0.0.1" port="{listener.port}" protocol="tcp" '
        'TCP_Framing="octet-counted" template="RSYSLOG_SyslogProtocol23Format"' + kept("tcp"),
        # omfwd's default over UDP: the traditional BSD format (RFC 3164, no year, no zone).
        "udp": f'type="omfwd" target="127.0.0.1" port="{listener.port}" protocol="udp"',
        # omrelp's default: rsyslog's forward format (3164 layout, RFC 3339 timestamp).
        "relp": f'type="omrelp" target="127.0.0.1" port="{listener.relp_port}"' + kept("relp"),
        "tls": f'type="omfwd" target="127.0.0.1" port="{listener.tls_port}" protocol="tcp" '
        'TCP_Framing="octet-counted" template="RSYSLOG_SyslogProtocol23Format" '
        'StreamDriver="gtls" StreamDriverMode="1" StreamDriverAuthMode="x509/name" '
        'StreamDriverPermittedPeers="localhost"' + kept("tls"),
    }
    lines = [
        f'global(workDirectory="{work}" defaultNetstreamDriverCAFile="{ca}"{mine})',
        'module(load="imtcp")',
        'module(load="omrelp")',
    ]
    for path, port in inputs.items():
        lines.append(f'input(type="imtcp" address="127.0.0.1" port="{port}" ruleset="{path}")')
        lines.append(f'ruleset(name="{path}") {{ action({actions[path]}) }}')
    return "\n".join(lines) + "\n"


class Rsyslog:
    def __init__(
        self,
        home: Path,
        ports: dict[str, int],
        listener: RunningSyslog,
        certificate: ServerCertificate | None = None,
    ) -> None:
        self.home = home
        self.ports = ports
        self.conf = home / "rsyslog.conf"
        self.work = home / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(config(self.work, ports, listener, certificate))
        self.log = home / "rsyslogd.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15) -> None:
        with self.log.open("wb") as out:
            self._process = subprocess.Popen(
                ["rsyslogd", "-n", "-f", str(self.conf), "-i", str(self.home / "rsyslogd.pid")],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "TZ": "UTC"},
            )
        deadline = time.monotonic() + timeout
        for port in self.ports.values():
            while True:
                assert self._process.poll() is None, self.log.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, self.log.read_text()
                    time.sleep(0.1)

    def send(self, path: str, messages: list[bytes]) -> None:
        """RFC 5424 messages into the input of ``path``, LF framed."""
        with socket.create_connection(("127.0.0.1", self.ports[path]), timeout=5) as connection:
            connection.sendall(b"".join(message + b"\n" for message in messages))

    def wait_for_output(self, text: str, timeout: float = 15) -> None:
        """Until rsyslogd has said ``text``."""
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            assert time.monotonic() < deadline, f"rsyslogd never said {text!r}"
            time.sleep(0.05)

    def stop(self) -> str:
        """Stopped (TERM, then KILL); its output."""
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        return self.log.read_text(errors="replace")
