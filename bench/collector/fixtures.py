"""Real datagrams for the decoder's tests: softflowd's exports of one small capture, recorded by
a plain UDP socket, as pcaps of UDP packets under tests/data/flowtruth/, each with the totals it
must decode to and a README listing the templates it carries (decoded by bench.collector.templates).

    python -m bench.collector.fixtures [DIR]    records them again (softflowd, nfdump installed)

Recording again changes a few bytes only: IPFIX's options record carries softflowd's PID
(meteringProcessId) and the v9/IPFIX headers' unix seconds are the capture's last packet.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.collector.pcaps import generate, read_pcap, udp_payload, write_datagrams
from bench.collector.templates import templates
from services.flowtools import Version, receive, softflowd_replay, udp_socket

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "flowtruth"
BASE = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
CONVERSATIONS, SEED = 12, 5


@dataclass(frozen=True)
class Fixture:
    name: str
    version: Version
    sample_rate: int = 0

    @property
    def command(self) -> str:
        sampling = f" -s {self.sample_rate}" if self.sample_rate else ""
        return f"softflowd -d -a -r capture.pcap -v {self.version}{sampling}"


FIXTURE_SET = (
    Fixture("v5", 5),
    Fixture("v9", 9),
    Fixture("ipfix", 10),
    Fixture("v9-sampled10", 9, 10),
    Fixture("ipfix-sampled10", 10, 10),
)


def record(out: Path = FIXTURES) -> None:
    out.mkdir(parents=True, exist_ok=True)
    capture = generate(CONVERSATIONS, base=BASE, seed=SEED)
    with tempfile.TemporaryDirectory(prefix="flowtruth-") as scratch:
        pcap = capture.write(Path(scratch) / "capture.pcap")
        for fixture in FIXTURE_SET:
            with udp_socket() as sock:
                log = Path(scratch) / f"{fixture.name}.log"
                stats = softflowd_replay(
                    pcap, [sock.getsockname()], fixture.version, log,
                    sample_rate=fixture.sample_rate,
                )  # fmt: skip
                datagrams = receive(sock, stats.datagrams)
            write_datagrams(out / f"{fixture.name}.pcap", datagrams, capture.packets[-1].ts_us)
            expected = capture.expected(
                sample_rate=fixture.sample_rate, track_v6=fixture.version != 5
            )
            rows = [
                {**vars(key), "flows": t.flows, "packets": t.packets, "bytes": t.bytes}
                for key, t in expected.items()
            ]
            (out / f"{fixture.name}.expected.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "README.md").write_text(readme(out))


def datagrams(path: Path) -> list[bytes]:
    """The exported datagrams a fixture holds, in the order they were sent."""
    return [udp_payload(frame) for _, frame in read_pcap(path)]


def readme(directory: Path = FIXTURES) -> str:
    lines = [README_HEAD]
    for fixture in FIXTURE_SET:
        sent = datagrams(directory / f"{fixture.name}.pcap")
        size = sum(len(d) for d in sent)
        lines += [
            f"## {fixture.name}.pcap",
            "",
            f"`{fixture.command}`: {len(sent)} datagram(s), {size} bytes of NetFlow "
            f"v{fixture.version if fixture.version != 10 else '10 (IPFIX)'}.",
            "",
        ]
        if fixture.version == 5:
            lines += [V5_NOTE, ""]
        seen: set[int] = set()
        for template in (t for d in sent for t in templates(d)):
            if template.template_id in seen:
                continue
            seen.add(template.template_id)
            kind = "options template" if template.options else "template"
            lines.append(f"- {kind} {template.template_id}:")
            if template.scope:
                scope = ", ".join(f"{f.name} ({f.length})" for f in template.scope)
                lines.append(f"  scope {scope};")
            fields = ", ".join(f"{f.element} {f.name} ({f.length})" for f in template.fields)
            lines.append(f"  {fields}")
        lines.append("")
    return "\n".join(lines)


README_HEAD = f"""# softflowd 1.1.0's datagrams, recorded

Written by `python -m bench.collector.fixtures` (checked by tests/flowtruth/test_fixtures.py):
one capture of {CONVERSATIONS} TCP/UDP conversations over IPv4 and IPv6 (seed {SEED}, from
{BASE.isoformat()}), exported by softflowd to a plain UDP socket. Each `NAME.pcap` holds the
datagrams as UDP packets from 127.0.0.1:40000 to 127.0.0.1:2055 (Wireshark decodes them; the
tests read them with `bench.collector.fixtures.datagrams(path)`); `NAME.expected.json` holds what
they must decode to, one row per directional 5-tuple (flows, packets, bytes as exported: sampled
counts are not scaled).

What softflowd does in all of them:
- One record per direction of a conversation (it tracks both directions as one flow).
- Times are relative to the exporter's boot (flowStartSysUpTime/flowEndSysUpTime, 22/21, in ms);
  with `-a` boot is the capture's first packet and the header's time its last packet. v9: the
  header's sysUptime and unix seconds anchor them; IPFIX: the options record's
  systemInitTimeMilliseconds (160). (`-A milli` would send absolute times instead; not recorded.)
- Templates: 1024 IPv4, 1025 IPv4 ICMP, 2048 IPv6, 2049 IPv6 ICMP; 256 the options template
  (sampling interval; IPFIX: also systemInitTimeMilliseconds). Templates come in the first
  datagram, before the data sets.
- Bytes are octetDeltaCount: the frame's length less the Ethernet header, i.e. the IP length.
- Data sets end with padding shorter than a record, and v9's set lengths need not be multiples
  of 4 (a set of one 42-byte IPv4 record is 49 bytes long in v9, 48 in IPFIX).
- The options record's interfaceName (82) is the first 16 bytes of the capture's path.
- IPFIX headers' sequence numbers count the records sent *including* this message's (RFC 7011
  wants those sent before it): nfcapd 1.7.1 reports sequence errors for them.
- Sampled (`-s 10`): counts are of the packets kept (every 10th); the options data record says
  samplingInterval 10 (v9: 34, algorithm 35 = 1 deterministic) or samplingPacketInterval 1 and
  samplingPacketSpace 9 (IPFIX: 305/306, selectorAlgorithm 304).
"""

V5_NOTE = (
    "v5 has no templates: 24-byte header (sampling_interval at bytes 22-23: mode in the top two "
    "bits, the interval below: 0 here, 0x400a with -s 10, which nfcapd applies), 48-byte "
    "records, IPv4 only (softflowd drops IPv6 without -6)."
)


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES)
