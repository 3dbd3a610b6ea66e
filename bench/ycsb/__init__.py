"""bench/ycsb: a YCSB-compatible client for shardlog (see __main__)."""
