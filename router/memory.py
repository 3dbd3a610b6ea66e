"""Memory handed back to the system: the C allocator told to give large blocks back as soon as
they are freed, and what closed streams held given back when the last one ends.

glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after one
large request body the next ones of that size come from the heap, whose freed pages it keeps:
four inflated 24 MiB bodies left the router ~30 MiB larger for good, and the bodies of the
issue (240 MiB lines) ~2 GB. A fixed threshold keeps every block of LARGE_BLOCK_BYTES or more
mapped, returned whole when freed. Another C library (musl) has no mallopt: nothing to do."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import logging
from collections.abc import Callable

log = logging.getLogger("router.memory")

# mallopt's parameter number of M_MMAP_THRESHOLD (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
LARGE_BLOCK_BYTES = 2**20


def hand_back_large_blocks() -> bool:
    """Whether the allocator took the fixed threshold (False: not glibc)."""
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    taken = bool(mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES))
    if not taken:
        log.warning("the C allocator refused a fixed mmap threshold; freed bodies may stay held")
    return taken


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    with contextlib.suppress(OSError, AttributeError):
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
        return trim
    return None


def give_back() -> bool:
    """Frees what only reference cycles hold (a tail stream's connection, task and generator
    are such cycles), then returns the allocator's free pages to the system (glibc keeps them
    for reuse: after 1,000 tail streams the router stayed 160 MB above where it began); False
    where it cannot return them (no glibc)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


# The cyclic collector's thresholds (Python's defaults: 700, 10, 10). A live tail holds a row
# object per row and stream until its watermark passes, so 1,000 streams of one owner make
# 50,000 objects of a 50-row write, promoted through the generations within a second: with the
# defaults that started a full pass (86-95 ms over every stream's objects, the event loop held)
# every few writes, and a write's p99 went to 14.8x its time with no stream (bench/tail.writes,
# three rounds' median); with these 2.07x. Fewer young passes cost less CPU too; cyclic
# garbage (a closed stream's connection, task and generator) waits longer for a full pass,
# and give_back() runs one when the last stream ends.
COLLECTOR_THRESHOLDS = (2000, 20, 1000)


def collect_less_often() -> None:
    """The cyclic collector's thresholds set to COLLECTOR_THRESHOLDS."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
