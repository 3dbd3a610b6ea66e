"""bench/report: reports against the fdw parent and the parallel-partials floor."""
