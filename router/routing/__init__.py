"""Pure routing decisions: which group and shard a key goes to. No I/O here."""
