"""The metadata catalog: a typed snapshot, its only writer (store), and the router's cache."""
