"""bench/crud: flows inserted, updated, searched and deleted in batches of 100 to 100,000
rows through the API (python -m bench.crud)."""
