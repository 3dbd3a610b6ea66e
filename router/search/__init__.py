"""The read path: plan the (shard, day table) targets, query the shards in parallel, merge."""
