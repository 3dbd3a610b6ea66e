"""Ingest benchmark: REST writes vs raw binary COPY vs the seed's per-row plpgsql inserts."""
