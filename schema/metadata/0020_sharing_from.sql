-- The first day whose owner-days may be written into shared tables (docs/architecture.md,
-- "Placement: shared or own"): after every day that has a day table now, and after today (a
-- router of the previous version may still make today's tables during the upgrade); any day
-- in a catalog that has no day table yet. A day table made from this migration on draws even
-- ids (router/db/ddl.py), a shared table odd ones, so an owner-day's rows never share an id
-- whichever table holds them; the tables of earlier days, which may hold any id, never get
-- shared rows.
CREATE TABLE sharing (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    sharing_from date NOT NULL
);
INSERT INTO sharing (sharing_from)
SELECT CASE WHEN max(day) IS NULL THEN DATE '0001-01-01'
            ELSE greatest(current_date + 1, max(day) + 1) END
FROM day_tables;
GRANT SELECT ON sharing TO shardlog_catalog;
