"""NetFlow v5, v9 and IPFIX: datagrams -> templates -> flow records.

The modules here are pure (no sockets, no asyncio, no database): a collector process feeds
them datagrams and hands the flow records to the ingest service."""
