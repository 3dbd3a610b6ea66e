"""The write path: parse and validate request bodies, place rows, COPY them to shards."""
