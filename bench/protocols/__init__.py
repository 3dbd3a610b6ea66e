"""bench/protocols: the same audit rows through every way in (issue 19)."""
