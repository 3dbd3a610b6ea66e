-- Which database each shard is, whatever its DSN looks like: the server's system identifier
-- (shared by a primary and its standbys) and the database's oid and name, read when the shard
-- was registered. A new shard whose database is already a shard's is refused by comparing
-- these. NULL: registered before this migration; `shardlog migrate` fills it in when it
-- reaches the shard.
ALTER TABLE shards
    ADD COLUMN system_identifier bigint,
    ADD COLUMN database_oid bigint,
    ADD COLUMN database_name text,
    ADD CONSTRAINT shards_database_complete CHECK (
        (system_identifier IS NULL) = (database_oid IS NULL)
        AND (database_oid IS NULL) = (database_name IS NULL)
    ),
    ADD CONSTRAINT shards_database_key UNIQUE (system_identifier, database_oid);
