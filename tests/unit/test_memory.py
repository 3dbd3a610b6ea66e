"""router/memory.py: with the fixed mmap threshold, large blocks freed are handed back to the
system at once; without it (glibc's dynamic threshold, raised by the first large block freed)
the same blocks stay held by the process. Each case in a fresh interpreter."""

from __future__ import annotations

import gc
import subprocess
import sys

from router import memory
from tests.support import REPO

PROBE = """
import sys
from router import memory

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024

if sys.argv[1] == "fixed":
    assert memory.hand_back_large_blocks()
first = bytearray(30 * 2**20)
del first  # raises glibc's dynamic threshold to 30 MiB
before = rss_mib()
blocks = [bytearray(24 * 2**20) for _ in range(4)]
pins = [bytearray(200_000) for _ in range(4)]  # allocated after them: the heap's top stays
del blocks
print(rss_mib() - before)
"""


def kept_mib(mode: str) -> int:
    probe = [sys.executable, "-c", PROBE, mode]
    return int(subprocess.run(probe, cwd=REPO, capture_output=True, text=True, check=True).stdout)


def test_large_blocks_freed_are_handed_back() -> None:
    assert kept_mib("dynamic") >= 90  # the four bodies' memory, still held
    assert kept_mib("fixed") <= 8


def test_the_collector_runs_full_passes_less_often() -> None:
    before = gc.get_threshold()
    try:
        memory.collect_less_often()
        assert gc.get_threshold() == memory.COLLECTOR_THRESHOLDS
        assert all(a >= b for a, b in zip(memory.COLLECTOR_THRESHOLDS, (700, 10, 10), strict=True))
    finally:
        gc.set_threshold(*before)
