"""Which databases may become a shard. Pure: db/probe reads the facts, this module gives the
verdict (an error naming ``dsn``, or nothing) before anything is written to the database.

Never, whatever ``force`` says: the catalog's own database, a database holding a shardlog
catalog, the database of a registered shard (same server system identifier and database oid,
however the DSN is spelled: a primary and its standbys count as one), a database stamped as
another shard, a template database, a standby.
Only with ``force``: the maintenance database ``postgres``, a database holding objects shardlog
did not create, and a new shard while a registered shard whose database was never recorded
cannot be reached to compare."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from router.db.probe import Candidate, DatabaseIdentity
from router.errors import Conflict, Invalid

MAINTENANCE_DATABASES = frozenset({"postgres"})
TEMPLATE_DATABASES = frozenset({"template0", "template1"})
FORCE_HINT = "pass force (CLI: --force) to use it anyway"


@dataclass(frozen=True)
class KnownShard:
    """A registered shard's database: recorded in the catalog or probed now; ``unreachable``
    says why neither worked."""

    name: str
    identity: DatabaseIdentity | None
    unreachable: str | None = None


def check_candidate(
    candidate: Candidate,
    name: str,
    catalog: DatabaseIdentity,
    shards: Sequence[KnownShard],
    *,
    force: bool = False,
) -> None:
    check_not_taken(candidate, name, catalog, shards)
    check_usable(candidate)
    if not force:
        check_unforced(candidate, shards)


def check_not_taken(
    candidate: Candidate, name: str, catalog: DatabaseIdentity, shards: Sequence[KnownShard]
) -> None:
    """The database belongs to the catalog or to another shard."""
    identity = candidate.identity
    if identity.same_database(catalog):
        raise Conflict(
            f"the dsn reaches the catalog's own database ({identity.describe()}); a shard "
            "needs a database of its own",
            "dsn",
        )
    if candidate.holds_catalog:
        raise Conflict(
            f"database {identity.database!r} holds a shardlog catalog (metadata tables); a "
            "shard needs a database of its own",
            "dsn",
        )
    for shard in shards:
        if shard.name != name and shard.identity and identity.same_database(shard.identity):
            raise Conflict(
                f"the dsn reaches the database of shard {shard.name!r} ({identity.describe()}); "
                "two shards cannot share a database",
                "dsn",
            )
    if candidate.stamped_as is not None and candidate.stamped_as != name:
        raise Conflict(
            f"this database is already registered as shard {candidate.stamped_as!r}", "dsn"
        )


def check_usable(candidate: Candidate) -> None:
    database = candidate.identity.database
    if candidate.is_template or database in TEMPLATE_DATABASES:
        raise Invalid(
            f"database {database!r} is a template: every database created from it would copy "
            "the shard's tables",
            "dsn",
        )
    if candidate.in_recovery:
        raise Invalid(
            "the dsn reaches a standby (read-only); name the primary, or add "
            "target_session_attrs=read-write to a multi-host dsn",
            "dsn",
        )


def check_unforced(candidate: Candidate, shards: Sequence[KnownShard]) -> None:
    """What ``force`` lets through."""
    unknown = [s for s in shards if s.identity is None]
    if unknown:
        detail = "; ".join(f"{s.name}: {s.unreachable}" for s in unknown)
        raise Conflict(
            "cannot rule out that the dsn reaches the database of a registered shard: its "
            f"database was never recorded and it does not answer ({detail}); bring it back "
            f"(`shardlog migrate` then records it), or {FORCE_HINT}",
            "dsn",
        )
    database = candidate.identity.database
    if database in MAINTENANCE_DATABASES:
        raise Conflict(
            f"database {database!r} is the server's maintenance database, which tools and "
            f"other applications use; create a database for the shard, or {FORCE_HINT}",
            "dsn",
        )
    if candidate.foreign_count:
        listed = ", ".join(candidate.foreign_objects)
        more = candidate.foreign_count - len(candidate.foreign_objects)
        raise Conflict(
            f"database {database!r} holds {candidate.foreign_count} objects that shardlog did "
            f"not create ({listed}{f' and {more} more' if more > 0 else ''}); a shard needs a "
            f"database of its own: {FORCE_HINT}",
            "dsn",
        )
