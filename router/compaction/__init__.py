"""Compacted days (docs/architecture.md, "Compacted days")."""
