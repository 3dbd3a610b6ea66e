"""The router's LRU: never more than its capacity, the least recently used entry goes first,
reads and writes refresh an entry, ``in`` does not; and the same answers as a plain list model
over any sequence of operations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.lru import LRU


def test_holds_at_most_its_capacity_and_drops_the_oldest_first() -> None:
    cache: LRU[int, str] = LRU(3)
    for number in range(10):
        cache.put(number, str(number))
        assert len(cache) <= 3
    assert cache.keys() == [7, 8, 9]
    assert cache.get(6) is None
    assert cache.get(7) == "7"


def test_a_read_makes_an_entry_the_most_recent() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]


def test_a_write_of_a_held_key_refreshes_it_without_growing() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    assert len(cache) == 2
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.get("a") == 10


def test_membership_leaves_the_order_alone() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert "a" in cache and "z" not in cache
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]


def test_pop_and_clear() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    assert cache.pop("a") == 1
    assert cache.pop("a") is None
    cache.put("b", 2)
    cache.clear()
    assert len(cache) == 0 and cache.get("b") is None


def test_a_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        LRU(0)


OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["put", "get", "pop", "in"]), st.integers(0, 7)), max_size=80
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 5), operations=OPERATIONS)
def test_agrees_with_a_list_model(capacity: int, operations: list[tuple[str, int]]) -> None:
    """The model: a list of (key, value), least recent first, cut from the front."""
    cache: LRU[int, int] = LRU(capacity)
    model: list[tuple[int, int]] = []
    for step, (operation, key) in enumerate(operations):
        held = dict(model)
        if operation == "put":
            cache.put(key, step)
            model = [(k, v) for k, v in model if k != key] + [(key, step)]
            model = model[-capacity:]
        elif operation == "get":
            assert cache.get(key) == held.get(key)
            if key in held:
                model = [(k, v) for k, v in model if k != key] + [(key, held[key])]
        elif operation == "pop":
            assert cache.pop(key) == held.get(key)
            model = [(k, v) for k, v in model if k != key]
        else:
            assert (key in cache) == (key in held)
        assert cache.keys() == [k for k, _ in model]
        assert len(cache) <= capacity
