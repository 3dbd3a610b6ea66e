from hypothesis import given
from hypothesis import strategies as st

from router.routing.groups import choose_group

keys = st.text(min_size=1, max_size=256)
group_sets = st.sets(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), min_size=1, max_size=8)


@given(keys, group_sets)
def test_choice_is_stable_and_independent_of_order(key: str, groups: set[str]) -> None:
    first = choose_group("audit", key, sorted(groups))
    assert first in groups
    assert choose_group("audit", key, sorted(groups, reverse=True)) == first


@given(keys, group_sets, st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True))
def test_adding_a_group_moves_owners_only_to_the_new_group(
    key: str, groups: set[str], new: str
) -> None:
    before = choose_group("flow", key, groups)
    after = choose_group("flow", key, groups | {new})
    assert after in (before, new)


def test_spreads_owners_over_groups() -> None:
    groups = ["group1", "group2", "group3"]
    counts = dict.fromkeys(groups, 0)
    for index in range(3000):
        counts[choose_group("audit", f"owner-{index}", groups)] += 1
    assert all(800 < count < 1200 for count in counts.values()), counts
