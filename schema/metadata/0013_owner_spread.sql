-- An audit owner's spread width (router/routing/placement.py): its new rows go to the first
-- `spread` shards of its group in its own rendezvous order, so that a search of a small owner
-- asks only those shards (searches are planned from day_tables, which records every shard a
-- table was made on, so a change of spread never hides rows). NULL: the whole group, what every
-- owner mapped before this migration keeps; the router gives new audit owners
-- SHARDLOG_INGEST__SPREAD_MIN_SHARDS and widens an owner as its owner-days grow. Flows are
-- placed by hash over the whole group and keep NULL. Changing it is an UPDATE of owners, which
-- bumps the catalog version: routers reload their owner mappings.

ALTER TABLE owners ADD COLUMN spread integer CHECK (spread IS NULL OR spread >= 1);
