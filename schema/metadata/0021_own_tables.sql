-- Owners that write into day tables of their own from now on (docs/architecture.md,
-- "Placement: shared or own"): set by the first promotion of one of their owner-days out of a
-- shared table (router/sharing/promote.py), so their next days never start shared.
ALTER TABLE owners ADD COLUMN own_tables boolean NOT NULL DEFAULT false;

-- A promotion must not make every router drop its caches: the catalog version moves on
-- changes of what routers cache of an owner, not on own_tables (a router that still thinks an
-- owner small writes its next day shared, which the promotion job corrects).
DROP TRIGGER owners_changed ON owners;
CREATE TRIGGER owners_changed
    AFTER UPDATE OF kind, key, group_name, assigned_by, tenant, spread OR DELETE OR TRUNCATE
    ON owners
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
