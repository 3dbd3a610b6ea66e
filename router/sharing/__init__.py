"""Shared tables for small owners (docs/architecture.md, "Shared tables for small owners"):
the tables made ahead of their days; readers, ingest and promotion come in later steps."""
