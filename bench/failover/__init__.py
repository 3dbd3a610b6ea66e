"""bench/failover: fault recovery and HA ingest cost (python -m bench.failover)."""
