-- shardlog_segments 1.1 (an unpack bounded by a ts range) where the server has it: readers of a
-- compacted owner-day pass their window into the unpack (router/compaction/layout.py).
DO $codec$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'shardlog_segments') THEN
        ALTER EXTENSION shardlog_segments UPDATE;
    ELSIF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'shardlog_segments') THEN
        CREATE EXTENSION shardlog_segments;
    END IF;
END
$codec$;
