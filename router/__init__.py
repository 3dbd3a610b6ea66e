"""shardlog router: maps owners and switches to shard groups and serves the HTTP API."""
