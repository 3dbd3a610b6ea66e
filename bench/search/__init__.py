"""Search benchmark: fan-out vs the postgres_fdw path vs one instance holding every row."""
