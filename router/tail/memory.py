"""Gives the memory of closed tail streams back to the system. Their rows and frames are
freed when the streams end, but glibc's allocator keeps freed pages for reuse: after 1,000
streams the router stayed 160 MB above where it began. ``malloc_trim`` returns them; where
there is no glibc it is a no-op."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
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
    """Returns the allocator's free pages to the system; False where it cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
