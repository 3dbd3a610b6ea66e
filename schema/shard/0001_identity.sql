-- Each shard database records which catalog shard it is, so that two catalog entries can never
-- point at the same database (rows would be placed twice) and a DSN that reaches the wrong
-- server is caught before anything is written.

CREATE TABLE shard_identity (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    shard_name    text NOT NULL,
    group_name    text NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now()
);
