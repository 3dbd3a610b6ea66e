"""The C allocator told to give large blocks back to the system as soon as they are freed.

glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after one
large request body the next ones of that size come from the heap, whose freed pages it keeps:
four inflated 24 MiB bodies left the router ~30 MiB larger for good, and the bodies of the
issue (240 MiB lines) ~2 GB. A fixed threshold keeps every block of LARGE_BLOCK_BYTES or more
mapped, returned whole when freed. Another C library (musl) has no mallopt: nothing to do."""

from __future__ import annotations

import ctypes
import logging

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
