"""The syslog listener (`shardlog syslog`): UDP, TCP, TLS and RELP sockets -> parsed and checked
messages (router/protocols/syslog.py) -> a bounded queue -> batched commits through the
shippers' write path (router/protocols/shipped.py). Its own process, like the collector."""
