"""Log shippers' wire formats (syslog, Elasticsearch _bulk, Loki push, OTLP logs): bytes in,
the ingest service's audit rows out (router/protocols/shipped.py), nothing more."""
