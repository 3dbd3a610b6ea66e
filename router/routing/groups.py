"""The stable rule that gives an unmapped owner its shard group.

Rendezvous (highest random weight) hashing over the writable groups: the choice depends only
on the owner and the set of groups, and adding a group moves only the owners that the new group
wins. The choice is recorded in the catalog on first write, so later catalog changes never move
an owner that already has data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def _weight(kind: str, key: str, group: str) -> bytes:
    return hashlib.blake2b(f"{kind}\x00{key}\x00{group}".encode(), digest_size=16).digest()


def choose_group(kind: str, key: str, groups: Iterable[str]) -> str:
    candidates = sorted(set(groups))
    if not candidates:
        raise ValueError("no writable shard group")
    return max(candidates, key=lambda group: _weight(kind, key, group))
