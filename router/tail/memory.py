"""Gives the memory of closed tail streams back to the system. A stream's connection, task
and generator form reference cycles that only the cyclic collector frees, and glibc's
allocator keeps freed pages for reuse: after 1,000 streams the router stayed 160 MB above
where it began. A full collection, then ``malloc_trim`` (a no-op without glibc), return it."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


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
    """Frees what only cycles hold and returns the allocator's free pages to the system;
    False where it cannot return them."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
