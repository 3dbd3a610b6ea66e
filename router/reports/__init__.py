"""Reports: roll-ups over a window, computed as partial aggregates per shard and merged."""
