"""The local cluster's defaults that the router's settings and the launcher (services/) both
read: kept here so that the router's settings do not import the launcher."""

from __future__ import annotations

from pathlib import Path

DEFAULT_BIN_DIR = Path("/usr/lib/postgresql/15/bin")
# The bootstrap superuser and the database of every instance the launcher makes.
SUPERUSER = "shardlog"
DATABASE = "shardlog"
DEFAULT_SHARDS = 12
DEFAULT_GROUPS = 2
# Below Linux's ephemeral port range (32768-60999), so outgoing connections never hold it.
DEFAULT_BASE_PORT = 25432
