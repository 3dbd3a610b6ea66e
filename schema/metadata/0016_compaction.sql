-- Compacted days (router/compaction, docs/architecture.md "Compacted days"): the layout of
-- each registered day table. 'heap': its rows are in the day table alone. 'compacted': its
-- shard packed them into the day's segment table (the shard's compacted_days says under which
-- snapshot); readers take the segments and the heap rows that snapshot did not see.
-- `layout_at`: when the layout last changed (the heap is cleared only well after the switch).
ALTER TABLE day_tables
    ADD COLUMN layout text NOT NULL DEFAULT 'heap' CHECK (layout IN ('heap', 'compacted')),
    ADD COLUMN layout_at timestamptz;
