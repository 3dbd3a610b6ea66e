"""First-write group assignment: stable rule, recorded once, safe for any key."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from router.catalog import store
from router.routing.groups import choose_group
from router.settings import Settings


@pytest.fixture
async def metadata(settings: Settings, cluster):
    pool = await asyncpg.create_pool(settings.metadata_dsn(), min_size=1, max_size=10)
    yield pool
    await pool.close()


HOSTILE_KEYS = [
    "robert'); DROP TABLE owners;--",
    'quote"double',
    "ünïcødé 🚀 ключ",
    "x" * 256,
    "a" * 255 + "1",
    "a" * 255 + "2",
    "spaces and\\backslashes",
]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
async def test_unmapped_owner_gets_the_rule_group_and_it_is_recorded(metadata, key) -> None:
    snapshot = await store.load_snapshot(metadata)
    key = f"{key[:240]}{uuid.uuid4().hex[:8]}" if len(key) < 240 else key
    await metadata.execute("DELETE FROM owners WHERE kind = 'audit' AND key = $1", key)
    mapping = await store.resolve_owner(metadata, snapshot, "audit", key, "default")
    assert mapping.key == key
    assert mapping.assigned_by == "rule"
    assert mapping.tenant == "default"
    assert mapping.group == choose_group("audit", key, snapshot.writable_groups())
    again = await store.resolve_owner(metadata, snapshot, "audit", key, "default")
    assert again == mapping


async def test_concurrent_first_writes_agree(metadata) -> None:
    snapshot = await store.load_snapshot(metadata)
    key = f"race-{uuid.uuid4()}"
    results = await asyncio.gather(
        *(store.resolve_owner(metadata, snapshot, "flow", key, "default") for _ in range(20))
    )
    assert len({r.group for r in results}) == 1
    count = await metadata.fetchval(
        "SELECT count(*) FROM owners WHERE kind = 'flow' AND key = $1", key
    )
    assert count == 1


async def test_recorded_mapping_survives_catalog_changes(metadata) -> None:
    snapshot = await store.load_snapshot(metadata)
    key = f"sticky-{uuid.uuid4()}"
    first = await store.resolve_owner(metadata, snapshot, "audit", key, "default")
    changed = snapshot.__class__(
        version=snapshot.version,
        groups=snapshot.groups,
        shards={n: s for n, s in snapshot.shards.items() if s.group != first.group},
    )
    assert await store.resolve_owner(metadata, changed, "audit", key, "default") == first


@pytest.mark.parametrize(
    ("key", "reason"), [("", "empty"), ("x" * 257, "limit"), ("tab\there", "control")]
)
async def test_bad_owner_keys_are_refused(metadata, key, reason) -> None:
    snapshot = await store.load_snapshot(metadata)
    with pytest.raises(Exception, match=reason) as caught:
        await store.resolve_owner(metadata, snapshot, "audit", key, "default")
    assert getattr(caught.value, "field", None) == "owner"


async def test_two_tenants_racing_for_a_key_agree_on_one(metadata) -> None:
    snapshot = await store.load_snapshot(metadata)
    await metadata.execute(
        "INSERT INTO tenants (name) VALUES ('race-a'), ('race-b') ON CONFLICT DO NOTHING"
    )
    key = f"contested-{uuid.uuid4()}"
    results = await asyncio.gather(
        *(
            store.resolve_owners(metadata, snapshot, "audit", [key], tenant)
            for tenant in ["race-a", "race-b"] * 10
        )
    )
    assert len({r[key].tenant for r in results}) == 1


async def test_a_foreign_key_stops_every_claim_of_the_request(metadata) -> None:
    """A write naming a key of another tenant claims none of its new keys (the caller refuses
    the whole request)."""
    snapshot = await store.load_snapshot(metadata)
    await metadata.execute("INSERT INTO tenants (name) VALUES ('claim-a') ON CONFLICT DO NOTHING")
    foreign = f"foreign-{uuid.uuid4()}"
    fresh = f"fresh-{uuid.uuid4()}"
    await store.resolve_owner(metadata, snapshot, "audit", foreign, "default")
    found = await store.resolve_owners(metadata, snapshot, "audit", [foreign, fresh], "claim-a")
    assert set(found) == {foreign} and found[foreign].tenant == "default"
    assert await store.get_owner(metadata, "audit", fresh) is None
    claimed = await store.resolve_owners(
        metadata, snapshot, "audit", [foreign, fresh], "claim-a", exclusive=False
    )
    assert claimed[fresh].tenant == "claim-a" and claimed[foreign].tenant == "default"
