"""Typed settings, read once from the environment (prefix ``SHARDLOG_``, sections joined by
``__``, e.g. ``SHARDLOG_POOLS__MAX_SIZE=20``). Unknown keys are rejected. Each component is
handed only its own section."""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from router.cluster_defaults import (
    DEFAULT_BASE_PORT,
    DEFAULT_BIN_DIR,
    DEFAULT_GROUPS,
    DEFAULT_SHARDS,
    SUPERUSER,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    access_log: bool = Field(
        True,
        description="One line per request on the router's log: client address, method, path "
        "(never the query string: it carries search patterns and keys), status, milliseconds.",
    )
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Router processes sharing the port; each has its own pools, caches, "
        "in-flight budget and /metrics.",
    )
    admin_token: str | None = Field(
        None,
        description="Replaced by API tokens (SHARDLOG_AUTH__*, `shardlog tokens`): a router "
        "started with it set refuses to start and says how to move to an admin token.",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="From a connection's start, or the first byte of its next request, until "
        "the request's headers are complete; late: 408 and close.",
    )
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, description="Request line and headers; more: 431 and close."
    )
    body_idle_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Longest wait for the next bytes of a request body; longer: 408 and close.",
    )
    body_min_bytes_per_s: int = Field(
        500,
        ge=0,
        description="Slowest average pace of a request body after a head start of "
        "body_idle_timeout_s; slower: 408 and close. 0: no pace, only the idle timeout.",
    )
    keep_alive_timeout_s: int = Field(
        5, ge=1, description="How long an idle connection is kept open between requests."
    )
    max_connections: int = Field(
        2048,
        ge=1,
        description="Open client connections per router process (lowered to fit the open-files "
        "limit); more are answered 503 and closed.",
    )
    health_connections: int = Field(
        16,
        ge=0,
        description="Connections over max_connections kept for GET /health/live and "
        "/health/ready (answered, then closed); other requests on them get 503.",
    )
    tls_cert_file: Path | None = Field(
        None,
        description="PEM certificate (chain) the router serves HTTPS with (TLS 1.2 or newer); "
        "set together with tls_key_file. Unset: plain HTTP.",
    )
    tls_key_file: Path | None = Field(
        None, description="PEM private key of tls_cert_file, readable by the router only."
    )

    @model_validator(mode="after")
    def _tls_pair(self) -> ServerSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file are set together, or neither")
        return self


class MetadataSettings(Section):
    dsn: str | None = Field(
        None,
        description="libpq DSN of the metadata database, naming its bootstrap superuser (the "
        "owner of the catalog: migrations and role set-up); default: the local cluster's.",
    )
    login: Literal["catalog", "dsn"] = Field(
        "catalog",
        description="Who the router and the CLI's catalog commands log in to the metadata "
        "database as. catalog: the role shardlog_catalog at the DSN's hosts (least privilege; "
        "`shardlog migrate` creates it, its password is in the password file); dsn: the DSN's "
        "user. Migrations always use the DSN's user.",
    )
    allow_superuser: bool = Field(
        False,
        description="Let the router start when its catalog login is a superuser; without it "
        "the router refuses to start then.",
    )
    connect_timeout_s: float = Field(5.0, gt=0)
    pool_size: int = Field(4, ge=1)
    application_name: str = "shardlog"
    reset_query: bool = Field(
        False,
        description="Run asyncpg's reset query whenever a catalog connection goes back to the "
        "router's metadata pool; off: only an open transaction is rolled back. Catalog "
        "statements change no session state (the one session lock, retention's, is released "
        "or ends with its connection), and the reset was a round trip for every search's "
        "day-table look-up.",
    )


class PoolSettings(Section):
    min_size: int = Field(0, ge=0)
    max_size: int = Field(10, ge=1)
    connect_timeout_s: float = Field(5.0, gt=0)
    statement_timeout_ms: int = Field(30_000, ge=0)
    application_name: str = "shardlog-router"
    writer_reset_query: bool = Field(
        False,
        description="Run asyncpg's reset query (advisory unlock, CLOSE ALL, UNLISTEN, RESET "
        "ALL: one round trip) whenever a writer-pool connection goes back to the pool; off: "
        "only an open transaction is rolled back (writers change no session state).",
    )
    reader_reset_query: bool = Field(
        False,
        description="The same for reader-pool connections (searches, exports, the tail, "
        "inventories): they too change no session state outside a transaction, and the reset "
        "was a round trip per shard asked by every search.",
    )
    multi_host_target: Literal["read-write", "primary", "any", "prefer-standby"] = Field(
        "read-write",
        description="target_session_attrs for multi-host DSNs that do not name one.",
    )
    search_target: Literal["read-write", "prefer-standby"] = Field(
        "read-write",
        description="Where searches of a multi-host (Patroni) shard run: on the primary, or "
        "on a standby when one is up (its own pool; may lag the primary by replication delay).",
    )
    passfile: Path | None = Field(
        None,
        description="libpq password file (host:port:database:user:password lines, mode 0600) "
        "of every PostgreSQL connection of the router and the CLI: the shard roles and the "
        "users of the DSNs; default: the one `shardlog up` writes, "
        "<cluster data_dir>/secrets/pgpass.",
    )
    tls_mode: Literal["disable", "require", "verify-ca", "verify-full"] | None = Field(
        None,
        description="sslmode of every PostgreSQL connection of the router and the CLI (shards, "
        "standbys, the metadata database, and the postgres_fdw coordinator's connections to "
        "the shards) whose DSN names no sslmode itself; unset: libpq's default (prefer). "
        "verify-full checks the server's certificate against tls_ca_file and its name "
        "against the host connected to.",
    )
    tls_ca_file: Path | None = Field(
        None,
        description="PEM file of the CA(s) that signed the PostgreSQL servers' certificates "
        "(sslrootcert), for the same connections; with the fdw path it must be readable at "
        "this path on the metadata instance's host, by its server user.",
    )


class CatalogSettings(Section):
    poll_interval_s: float = Field(
        5.0, gt=0, description="Fallback check of the catalog version when NOTIFY is missed."
    )


class HealthSettings(Section):
    probe_timeout_s: float = Field(2.0, gt=0)


class IngestSettings(Section):
    max_body_bytes: int = Field(256 * 2**20, ge=1024, description="Larger bodies get 413.")
    max_records: int = Field(200_000, ge=1, description="Records per request; more get 413.")
    max_content_bytes: int = Field(64 * 1024, ge=1, description="UTF-8 bytes of one content.")
    max_attrs_bytes: int = Field(16 * 1024, ge=2, description="JSON bytes of one attrs.")
    max_attrs_depth: int = Field(
        32, ge=1, le=200, description="Levels of nested objects and arrays in one attrs."
    )
    max_record_bytes: int = Field(
        2**20,
        ge=1024,
        description="Bytes of one NDJSON or CSV line; a longer one is refused (413) as soon as "
        "that many bytes of it arrived, without waiting for its end. The default is about twice "
        "the longest JSON text a record within the other limits can have.",
    )
    max_owner_chars: int = Field(256, ge=1, le=256)
    future_skew_s: float = Field(300.0, ge=0, description="How far ahead of now a ts may be.")
    default_keep_days: int = Field(
        30, ge=1, description="Oldest day accepted when no retention policy applies."
    )
    inflight_budget_bytes: int = Field(
        512 * 2**20, ge=1024, description="Request bytes held at once; past it 429."
    )
    retry_after_s: int = Field(1, ge=1, description="Retry-After of 429 and 503 answers.")
    failover_wait_s: float = Field(
        45.0,
        ge=0,
        description="How long a write to a shard with several hosts (Patroni) keeps retrying "
        "while the shard fails over; ttl 20 s + promotion fit in the default.",
    )
    batch_rows: int = Field(20_000, ge=1, description="Rows per COPY into one day table.")
    spread_min_shards: int = Field(
        2,
        ge=0,
        description="How many shards of its group a new audit owner's rows go to (its spread "
        "width; searches of it ask only those); 0: the whole group. Owners mapped before keep "
        "the whole group.",
    )
    spread_rows_per_shard: int = Field(
        250_000,
        ge=1,
        description="Rows of one owner-day per shard of its spread before the spread doubles "
        "(counted by each router since it started); at the group's size it becomes the whole "
        "group, also for shards added later.",
    )
    audit_index: Literal["btree", "brin"] = "btree"
    flow_index: Literal["btree", "brin"] = "brin"
    idempotency_lease_s: float = Field(
        120.0, gt=0, description="How long an attempt holds its Idempotency-Key."
    )
    idempotency_keep_hours: float = Field(48.0, gt=0, description="How long keys are kept.")
    one_statement_rows: int = Field(
        1_000,
        ge=0,
        description="A part of at most this many rows is written by one INSERT that also claims "
        "its ingest_ledger row and adds its tail-log line (one round trip), not by COPY; 0: "
        "always COPY (a round trip each for the settings, the ledger, the COPY).",
    )
    group_commit: bool = Field(
        True,
        description="Concurrent parts of at most one_statement_rows rows bound for one shard "
        "(of one request or of several) share one transaction, each acknowledged only after "
        "that commit; a part that fails in it is written again alone.",
    )
    group_commit_wait_ms: float = Field(
        0.0,
        ge=0,
        le=1_000,
        description="How long a group waits for more parts before it commits; 0: a group is "
        "whatever queued for the shard while its previous commit ran.",
    )
    group_commit_max_rows: int = Field(
        10_000, ge=1, description="Most rows of one shared transaction (a part is never split)."
    )


class SearchSettings(Section):
    default_limit: int = Field(100, ge=1)
    max_limit: int = Field(10_000, ge=1)
    max_range_days: int = Field(31, ge=1, description="Widest from..to range, in days.")
    max_patterns: int = Field(8, ge=1)
    max_pattern_chars: int = Field(256, ge=1)
    max_owners: int = Field(
        100,
        ge=1,
        description="Most owner (audit) or switch (flows) values one search names; also the "
        "most owners or switches a backend=fdw search covers.",
    )
    max_matched_owners: int = Field(
        10_000,
        ge=1,
        description="Most owners or switches with day tables of their own in the window that "
        "a search by prefix, or without any named, may cover (small audit owners in shared "
        "tables do not count; backend=fdw and flows count every key with rows in the window).",
    )
    shard_timeout_s: float = Field(
        5.0,
        gt=0,
        description="Deadline of one shard's part of a search; past it the shard "
        "counts as failed (partial answer) or the search is a 504.",
    )
    cursor_secret: str | None = Field(
        None, description="Key that signs cursors; default: one shared through the catalog."
    )
    cursor_ttl_s: float = Field(
        86_400.0, gt=0, description="How long a cursor is taken after it was issued; older: 400."
    )
    export_page_rows: int = Field(
        2_000,
        ge=1,
        description="Rows an export reads from each shard's cursor per step (the router "
        "holds about 2 x shards x this many: each shard's next batch is read ahead).",
    )
    estimate_sample_fraction: float = Field(
        0.003,
        gt=0,
        le=1,
        description="count=estimate of audit patterns: the share of each day table's pages "
        "the first sample reads (0.3 %: from 1M matching rows on, 3,000 matches or more).",
    )
    estimate_target_error: float = Field(
        0.0167,
        gt=0,
        description="count=estimate: the relative standard error at which a sample is the "
        "answer (1.67 %: 99.7 % of such estimates are within 5 %); above it, one larger sample "
        "aims at it.",
    )
    estimate_max_sample_rows: int = Field(
        200_000,
        ge=1,
        description="count=estimate: most rows the larger sample may read over all shards.",
    )
    estimate_count_below_rows: int = Field(
        50_000,
        ge=0,
        description="count=estimate: a range holding no more rows than this (by the first "
        "sample) is counted exactly instead of sampled again.",
    )
    estimate_segment_count_below_rows: int = Field(
        200_000,
        ge=0,
        description="count=estimate over compacted owner-days: when a shard's candidate "
        "segments (in the window, not ruled out by a pattern's trigrams) hold no more rows "
        "than this, they are all opened and counted (exact).",
    )
    estimate_segment_sample_rows: int = Field(
        50_000,
        ge=1,
        description="count=estimate over compacted owner-days: otherwise, about this many "
        "rows of the shard's candidate segments are opened (evenly spaced, at least one per "
        "owner-day) and their matches extrapolated over the others.",
    )


class ReportSettings(Section):
    max_range_days: int = Field(
        400, ge=1, description="Widest from..to range of a report, in days."
    )
    max_buckets: int = Field(
        100_000, ge=1, description="Most time buckets a report may group by (window / bucket)."
    )
    max_keys: int = Field(
        64,
        ge=1,
        description="Most owner or switch values one report names; also the most owners or "
        "switches a backend=fdw report covers.",
    )
    max_matched_keys: int = Field(
        200,
        ge=1,
        description="Most owners or switches with day tables of their own in the window that "
        "a report by prefix, or without any named, may cover (each shard reads all of their day "
        "tables in range in one statement; small audit owners in shared tables do not count).",
    )
    shard_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Deadline of one shard's partial aggregate (until its first rows); past it "
        "the shard counts as failed (partial answer) or the report is a 504.",
    )
    fetch_rows: int = Field(
        1_000,
        ge=1,
        description="Partial groups read from a shard per step of the merge: the router holds "
        "up to shards x this many at once (5,000 grew the peak RSS by 66 MB in bench/report).",
    )
    memory_budget_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1,
        description="Memory for sorting merged groups by a metric without a limit; past it "
        "sorted runs spill to temporary files and are merged from disk.",
    )
    spill_dir: Path | None = Field(
        None, description="Where spilled runs go; default: the system's temporary directory."
    )


class TailSettings(Section):
    watermark_s: float = Field(
        1.0,
        ge=0,
        description="How long a live row waits (after its ts, or after the router read it when "
        "its ts lies ahead) so rows committed late on other shards still come in order.",
    )
    poll_interval_s: float = Field(
        1.0,
        gt=0,
        description="How often the router reads each shard's tail log when no NOTIFY woke it "
        "(a lost notification delays rows by at most this much, never loses them).",
    )
    read_interval_s: float = Field(
        0.05,
        ge=0,
        description="The shortest pause between two reads of one shard's tail log: the "
        "commits of that pause are read at once (adds up to this much to a row's delivery).",
    )
    max_subscriptions: int = Field(
        2000, ge=1, description="Open tail streams per router; more get 429."
    )
    max_buffered_events: int = Field(
        10_000,
        ge=1,
        description="Rows a subscriber may have waiting; past it the stream ends with an "
        "overflow event carrying the resume cursor.",
    )
    heartbeat_s: float = Field(15.0, gt=0, description="Seconds between keep-alive comments.")
    log_keep_s: float = Field(
        900.0,
        gt=0,
        description="How long the shards keep their tail log: the oldest resume cursor a "
        "stream can continue from.",
    )
    stall_timeout_s: float = Field(
        60.0,
        gt=0,
        description="A stream whose client takes longer than this to accept one write is "
        "closed (its rows wait in the shards, for a resume).",
    )


class CollectorSettings(Section):
    """The NetFlow/IPFIX collector (`shardlog collector`, router/collector)."""

    host: str = Field(
        "127.0.0.1", description="Address the collector's sockets bind to (0.0.0.0: all)."
    )
    netflow_port: int = Field(
        2055, ge=0, le=65535, description="UDP port for NetFlow v5, v9 and IPFIX (by version)."
    )
    ipfix_port: int = Field(
        4739, ge=0, le=65535, description="UDP and TCP port for IPFIX (RFC 7011)."
    )
    metrics_port: int = Field(
        9740, ge=0, le=65535, description="HTTP port of the collector's /metrics and /health."
    )
    queue_flows: int = Field(
        200_000,
        ge=1,
        description="Decoded flows waiting for the database; past it new flows are dropped "
        "and counted (UDP cannot push back).",
    )
    batch_flows: int = Field(20_000, ge=1, description="Flows written in one batch at most.")
    flush_interval_s: float = Field(
        1.0, gt=0, description="The longest a decoded flow waits before its batch is written."
    )
    template_ttl_s: float = Field(
        1800.0, gt=0, description="A template not refreshed for this long is forgotten."
    )
    unmapped_templates: int = Field(
        4096,
        ge=0,
        description="Templates all unmapped exporters hold together; past it the one holding "
        "the most loses its oldest (mapped exporters keep up to 1024 each, apart).",
    )
    hold_s: float = Field(
        5.0,
        ge=0,
        description="How long data sets of a template not yet seen are held before they are "
        "counted as dropped.",
    )
    state_file: Path | None = Field(
        None,
        description="Where templates are kept across restarts (default: collector/templates.json "
        "in the cluster's data directory).",
    )
    unknown_exporters: Literal["name", "refuse"] = Field(
        "name",
        description="An exporter with no mapping: its flows go to switch exporter-<address> "
        "(name), or are dropped and counted (refuse).",
    )
    unknown_tenant: str = Field(
        "system", description="The tenant of the switches named after unknown exporters."
    )
    allowed_networks: tuple[str, ...] = Field(
        (),
        description="Exporter networks (CIDR) whose datagrams are read; empty: any. Others are "
        "dropped and counted.",
    )
    exporter_labels: int = Field(
        256,
        ge=0,
        description="Unmapped exporter addresses named in metric labels; later ones are counted "
        'under exporter="other" (mapped exporters are always named).',
    )
    max_sequence_gap: int = Field(
        100_000,
        ge=1,
        description="The largest sequence number gap counted as lost flows (v9: packets); a "
        "larger one is counted as a sequence reset or jump.",
    )


class SyslogSettings(Section):
    """The syslog listener (`shardlog syslog`, router/syslogd)."""

    host: str = Field("127.0.0.1", description="Address the syslog sockets bind to (0.0.0.0: all).")
    udp_port: int = Field(5514, ge=0, le=65535, description="UDP port (RFC 5426).")
    tcp_port: int = Field(
        5514, ge=0, le=65535, description="TCP port, octet-counted or LF-framed (RFC 6587)."
    )
    tls_port: int = Field(
        6514, ge=0, le=65535, description="TLS port (RFC 5425), only with a certificate."
    )
    tls_cert_file: Path | None = Field(None, description="PEM certificate: TLS listens with it.")
    tls_key_file: Path | None = Field(None, description="PEM key of the certificate.")
    tls_client_ca_file: Path | None = Field(
        None,
        description="PEM CA certificates: the TLS port then requires a client certificate "
        "they signed (mutual TLS), and its subject common name is the sender's identity.",
    )
    relp_port: int | None = Field(None, ge=0, le=65535, description="RELP port; None: no RELP.")
    metrics_port: int = Field(
        9741, ge=0, le=65535, description="HTTP port of the listener's /metrics and /health."
    )
    owner_rule: str = Field(
        "sd:shardlog@32473:owner,app_name,hostname",
        pattern=r"^\s*(hostname|app_name|sd:[^,]+:[^,:]+)\s*(,\s*(hostname|app_name|sd:[^,]+:[^,:]+)\s*)*$",
        description="Where a message's owner comes from, the first rule with a value wins.",
    )
    quarantine_tenant: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9_-]{0,62}$",
        description="The tenant messages of unknown senders (no syslog-senders mapping) are "
        "written as; None: they are refused and counted.",
    )
    zone_3164: str = Field("UTC", description="The zone of RFC 3164 timestamps (IANA name).")
    batch_rows: int = Field(5000, ge=1, description="Messages written in one batch at most.")
    flush_interval_s: float = Field(
        0.2, gt=0, description="The longest a message waits before its batch is written."
    )
    queue_rows: int = Field(
        100_000, ge=1, description="Messages waiting for the database; past it UDP drops."
    )
    max_message_bytes: int = Field(
        65536, ge=480, description="Longest message (frame); longer ones are dropped."
    )
    allowed_networks: tuple[str, ...] = Field(
        (), description="Sender networks (CIDR) read; empty: any."
    )
    max_connections: int = Field(
        4096,
        ge=1,
        description="Open TCP, TLS and RELP connections in all (lowered to fit the open-files "
        "limit); more are closed at once.",
    )
    max_connections_per_source: int = Field(
        256, ge=1, description="Open TCP, TLS and RELP connections from one address."
    )
    idle_timeout_s: float = Field(
        300.0,
        gt=0,
        description="A connection that sends nothing for so long (a TLS handshake that does "
        "not finish) is closed.",
    )
    accept_retry_s: float = Field(
        0.05,
        gt=0,
        description="First pause of accepting when the process is out of files or memory; "
        "it doubles up to accept_retry_max_s.",
    )
    accept_retry_max_s: float = Field(
        2.0, gt=0, description="Longest pause of accepting when out of files or memory."
    )

    @field_validator("quarantine_tenant")
    @classmethod
    def _not_the_platform(cls, value: str | None) -> str | None:
        if value == "system":
            raise ValueError("the system tenant holds the platform's own keys: no quarantine")
        return value

    @field_validator("zone_3164")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone name") from None
        return value


class RetentionSettings(Section):
    enabled: bool = Field(True, description="Run the retention job in the router.")
    interval_s: float = Field(3600.0, gt=0, description="Seconds between the router's runs.")
    lock_timeout_ms: int = Field(
        500, ge=1, description="How long one DROP waits for its table's lock per attempt."
    )
    drop_attempts: int = Field(5, ge=1, description="Attempts per table before it is reported.")
    parallel_shards: int = Field(
        16,
        ge=1,
        description="Shards dropping at the same time in one run (each drops its tables in turn).",
    )
    retry_backoff_s: float = Field(0.2, ge=0, description="First pause between attempts.")
    max_drop_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="A run that would drop more than this share of all day tables refuses "
        "without --force.",
    )
    archive_dir: Path = Field(
        Path("var/archive"), description="Where days of archiving policies are written."
    )
    archive_compression: int = Field(1, ge=1, le=9, description="gzip level of archives.")
    restore_hold_days: int = Field(
        7, ge=0, description="Days a restored day is kept whatever its policy says."
    )
    lock_wait_s: float = Field(
        60.0, ge=0, description="How long the CLI waits for a run of another process to end."
    )


class CompactionSettings(Section):
    """Closed days packed into compressed segments (router/compaction, docs/architecture.md
    "Compacted days")."""

    enabled: bool = Field(
        True,
        description="Run the compaction job in the router. Shards without the "
        "shardlog_segments extension are skipped (logged, and counted in "
        "shardlog_compaction_shards_without_codec); the router serves them as before.",
    )
    interval_s: float = Field(600.0, gt=0, description="Seconds between the router's runs.")
    closed_after_s: float = Field(
        6 * 3600.0,
        ge=0,
        description="Seconds after a UTC day ends before it may be compacted (late writes are "
        "still taken after it, into the heap).",
    )
    clear_after_s: float = Field(
        120.0,
        ge=0,
        description="Seconds between an owner-day's switch to the compacted layout and the "
        "removal of its heap rows (a search planned before the switch must be done with them).",
    )
    segment_rows: int = Field(1000, ge=16, le=65536, description="Most rows per segment.")
    segment_bytes: int = Field(
        256 * 1024, ge=4096, le=64 * 1024 * 1024, description="Most bytes of content per segment."
    )
    lock_timeout_ms: int = Field(
        500, ge=1, description="How long a compaction statement waits for a lock per attempt."
    )
    attempts: int = Field(5, ge=1, description="Attempts per step before an owner-day fails.")
    retry_backoff_s: float = Field(0.2, ge=0, description="First pause between attempts.")
    zstd_level: int = Field(3, ge=1, le=19, description="zstd level of the segments.")
    batch_owner_days: int = Field(
        16,
        ge=1,
        le=1000,
        description="Audit owner-days of one shard and day copied in one transaction (then "
        "switched in one, and cleared in one): a step's fixed cost (its commit and round trips) "
        "paid once a batch. A failed batch is retried owner-day by owner-day; 1: no batches.",
    )
    max_rows_per_s: float = Field(
        0.0,
        ge=0,
        description="Most rows a run copies per second, waiting after each owner-day's copy "
        "(0: no limit, the default: a run is one sequential job per shard, so it takes at most "
        "one core of a shard; a limit is for shards without a core to spare).",
    )


class SharedSettings(Section):
    """Shared tables for small owners (router/sharing, docs/architecture.md "Shared tables for
    small owners")."""

    enabled: bool = Field(
        False,
        description="Write small owner-days of audit rows into the shard's shared table of "
        "their day instead of a table of their own, and make the shared tables ahead of their "
        "days in the router. Readers read both layouts whatever it says. Off until the "
        "design's step 6 (the promotion of owner-days that outgrow their share comes with "
        "step 4).",
    )
    own_table_rows: int = Field(
        10_000,
        ge=1,
        description="The rows an owner-day may send its shard's shared table through one "
        "router: a part that would take it past this goes to the owner-day's own table, and "
        "so do its later parts; the promotion job moves owner-days with more shared rows than "
        "this (or with both an own table and shared rows) to their own tables.",
    )
    promote_interval_s: float = Field(
        30.0,
        gt=0,
        description="Seconds between the router's runs of the promotion job (owner-days of "
        "today and yesterday with more than OWN_TABLE_ROWS rows in a shared table moved to "
        "tables of their own).",
    )
    promote_lock_timeout_ms: int = Field(
        2000,
        ge=1,
        description="How long a promotion's move waits for the writes in flight of its "
        "owner-day; past it the owner-day is left to the next run.",
    )
    promote_settle_s: float = Field(
        65.0,
        ge=0,
        description="Seconds a promotion run waits between recording the own tables of the "
        "owner-days it found and moving their rows: longer than a reader's plan lives before "
        "its statements read (two report shard deadlines, SHARDLOG_REPORT__SHARD_TIMEOUT_S, "
        "and a margin), so none reads the shared table alone after the move.",
    )
    placement_cache: int = Field(
        200_000,
        ge=1,
        description="Owner-days (per shard) and owners' shards each router remembers as "
        "written shared and recorded, least recently used forgotten first; a forgotten one "
        "costs its next write one idempotent round trip to the shard and one to the catalog.",
    )
    delete_batch_rows: int = Field(
        5_000,
        ge=1,
        description="Rows of one owner an erase deletes from a shared table per transaction "
        "(the shared table is every small owner's: it cannot be dropped for one).",
    )
    delete_max_rows_per_s: int = Field(
        50_000,
        ge=0,
        description="Most rows per second an erase deletes from shared tables (0: no limit).",
    )
    days_ahead: int = Field(
        2, ge=0, le=30, description="Days after today whose shared tables are made ahead."
    )
    ahead_interval_s: float = Field(
        600.0, gt=0, description="Seconds between the router's runs of the ahead job."
    )
    known_tables: int = Field(
        50_000,
        ge=1,
        description="Day tables each router remembers to exist (per shard), least recently "
        "written forgotten first; a forgotten one costs its next write the table's ensure "
        "round trips.",
    )


class AuthSettings(Section):
    """Who may call /v1 (router/auth). Limits are per token and per router process; a token
    may carry its own."""

    mode: Literal["tokens", "open"] = Field(
        "tokens",
        description="tokens: every /v1 request needs 'Authorization: Bearer <token>' with the "
        "scope it needs; open: no authentication at all (everyone is an admin of every tenant; "
        "the router warns loudly at start).",
    )
    rate_per_s: float = Field(
        1000.0, ge=0, description="Requests per second per token (default); 0: no limit."
    )
    rate_burst_s: float = Field(
        2.0, gt=0, description="Seconds of rate a token may spend at once (the bucket's size)."
    )
    ingest_bytes_per_s: int = Field(
        256 * 2**20,
        ge=0,
        description="Write body bytes per second per token (default); past it 429 until the "
        "debt is paid; 0: no limit.",
    )
    max_searches: int = Field(
        32, ge=1, description="Searches and exports per token running at once (default)."
    )
    last_used_flush_s: float = Field(
        5.0, gt=0, description="How often a router writes its tokens' last-used times."
    )
    audit_keep_days: int = Field(
        365,
        ge=1,
        le=36_500,
        description="Retention of the platform's own audit rows (owner shardlog.admin), set "
        "as that owner's policy on its first row unless an admin set one.",
    )


class LokiSettings(Section):
    """Loki's push API (POST /loki/api/v1/push, router/protocols/loki.py)."""

    owner_labels: tuple[str, ...] = Field(
        ("owner", "service_name", "job"),
        min_length=1,
        description="Stream labels whose value is the owner, the first one a stream has "
        "(a JSON list); a stream with none of them is refused.",
    )


class OtlpSettings(Section):
    """OTLP/HTTP logs (POST /v1/logs, router/protocols/otlp.py)."""

    owner_attributes: tuple[str, ...] = Field(
        ("service.name",),
        min_length=1,
        description="Attributes whose string value is the owner, the first one found (a JSON "
        "list): the resource's, else the log record's; a record with none is rejected.",
    )


class EsBulkSettings(Section):
    """Elasticsearch's bulk API for log shippers (router/api/es_bulk.py)."""

    owner_rule: str = Field(
        "field:owner, index | strip-date",
        min_length=1,
        description="Where an item's owner comes from: alternatives separated by commas, the "
        "first that yields one wins: field:<path> (a string field of the document, dotted "
        "for nested), index (the item's index) with steps | strip-date, | data-stream, "
        "| strip-prefix:<text>, | strip-suffix:<text>, or const:<owner>.",
    )
    version: str = Field(
        "8.19.0",
        pattern=r"^8\.[0-9]{1,3}\.[0-9]{1,3}$",
        description="The Elasticsearch version GET / claims (Beats refuse a server older "
        "than themselves).",
    )
    cluster_name: str = Field("shardlog", min_length=1, description="cluster_name of GET /.")
    idempotent: bool = Field(
        True,
        description="A retried identical bulk body (same path, same bytes once decoded, same "
        "tenant) stores nothing twice within SHARDLOG_INGEST__IDEMPOTENCY_KEEP_HOURS.",
    )


class ClusterSettings(Section):
    data_dir: Path = Path("var")
    shards: int = Field(DEFAULT_SHARDS, ge=1)
    groups: int = Field(DEFAULT_GROUPS, ge=1)
    base_port: int = Field(DEFAULT_BASE_PORT, ge=1024, le=65000)
    host: str = "127.0.0.1"
    bin_dir: Path = DEFAULT_BIN_DIR
    server_user: str = Field("postgres", description="OS user servers run as when started by root.")
    ha: bool = Field(
        False,
        description="Local cluster as Patroni-managed primary + replicas per shard, with etcd "
        "and HAProxy (make up HA=1).",
    )
    ha_shards: int = Field(4, ge=1, le=99, description="Shards of the HA topology.")
    ha_nodes: int = Field(2, ge=1, le=9, description="PostgreSQL nodes per HA shard.")
    tls: bool = Field(
        False,
        description="Local cluster with TLS (make up TLS=1): a CA and certificates under "
        "<data_dir>/tls, PostgreSQL accepting TLS connections only, the router on HTTPS and "
        "verifying the servers (verify-full); kept until `make clean`.",
    )
    start_timeout_s: float = Field(60.0, gt=0)


class ClockSettings(Section):
    """Test only: what every shardlog process calls now (router/clock.py). A process started
    with either set logs a warning and reports the drift as shardlog_clock_drift_seconds."""

    offset_s: float = Field(
        0.0,
        description="Test only: the wall clock shifted by this many seconds, still running "
        "(a test sets 23:59:50 UTC and crosses midnight). 0 in production.",
    )
    frozen_at: datetime | None = Field(
        None,
        description="Test only: the clock stopped at this instant (RFC 3339 with a zone); "
        "wins over offset_s. Unset in production.",
    )

    @field_validator("frozen_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("must name its time zone (e.g. 2026-10-31T23:59:50Z)")
        return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SHARDLOG_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    server: ServerSettings = ServerSettings()
    metadata: MetadataSettings = MetadataSettings()
    pools: PoolSettings = PoolSettings()
    catalog: CatalogSettings = CatalogSettings()
    health: HealthSettings = HealthSettings()
    ingest: IngestSettings = IngestSettings()
    search: SearchSettings = SearchSettings()
    report: ReportSettings = ReportSettings()
    tail: TailSettings = TailSettings()
    retention: RetentionSettings = RetentionSettings()
    compaction: CompactionSettings = CompactionSettings()
    shared: SharedSettings = SharedSettings()
    collector: CollectorSettings = CollectorSettings()
    syslog: SyslogSettings = SyslogSettings()
    auth: AuthSettings = AuthSettings()
    loki: LokiSettings = LokiSettings()
    otlp: OtlpSettings = OtlpSettings()
    es_bulk: EsBulkSettings = EsBulkSettings()
    cluster: ClusterSettings = ClusterSettings()
    clock: ClockSettings = ClockSettings()
    schema_dir: Path = REPO_ROOT / "schema"

    @model_validator(mode="after")
    def _compaction_after_the_tail(self) -> Settings:
        """A tail resumes by reading the heap rows its log names: a day must not be compacted
        (and its heap cleared) while the tail's log may still name them."""
        if self.compaction.closed_after_s < self.tail.log_keep_s:
            raise ValueError(
                f"compaction.closed_after_s ({self.compaction.closed_after_s:g}) must be at least "
                f"tail.log_keep_s ({self.tail.log_keep_s:g}): a tail resume reads the rows its "
                "log names from the heap"
            )
        return self

    @model_validator(mode="after")
    def _default_passfile(self) -> Settings:
        """The password file defaults to the local cluster's, wherever its data directory is."""
        if self.pools.passfile is None:
            passfile = (self.cluster.data_dir / "secrets" / "pgpass").absolute()
            object.__setattr__(self, "pools", self.pools.model_copy(update={"passfile": passfile}))
        return self

    def metadata_dsn(self) -> str:
        """The configured or the local metadata DSN; one that names no password or password
        file gets the pools' password file."""
        if self.metadata.dsn:
            dsn = self.metadata.dsn
        else:
            dsn = f"postgresql://{SUPERUSER}@{self.cluster.host}:{self.cluster.base_port}/shardlog"
        return with_tls(with_passfile(dsn, self.pools.passfile), self.pools)


def with_tls(dsn: str, pools: PoolSettings) -> str:
    """``dsn`` with the pools' sslmode and sslrootcert, unless it names an sslmode itself."""
    params: dict[str, str] = {}
    if pools.tls_mode is not None:
        params["sslmode"] = pools.tls_mode
        if pools.tls_ca_file is not None and pools.tls_mode != "disable":
            params["sslrootcert"] = str(pools.tls_ca_file.absolute())
    return with_params(dsn, params, unless=("sslmode", "requiressl"))


def with_params(dsn: str, params: dict[str, str], unless: tuple[str, ...]) -> str:
    """``dsn`` (URI or keyword form) with ``params`` added, unless it names one of ``unless``."""
    names = "|".join(re.escape(name) for name in unless)
    if not params or re.search(rf"(^|[?&\s])({names})\s*=", dsn):
        return dsn
    if "://" in dsn:
        query = "&".join(f"{key}={quote(value, safe='/')}" for key, value in params.items())
        return f"{dsn}{'&' if '?' in dsn else '?'}{query}"
    pairs = " ".join(f"{key}='{_escaped(value)}'" for key, value in params.items())
    return f"{dsn} {pairs}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def with_passfile(dsn: str, passfile: Path | None) -> str:
    """``dsn`` with ``passfile`` as its password file, unless it names a password or one."""
    if passfile is None:
        return dsn
    if "://" in dsn and re.match(r"[a-z]+://[^/@]*:[^/@]*@", dsn, re.IGNORECASE):
        return dsn  # user:password@ in the URI
    return with_params(dsn, {"passfile": str(passfile)}, unless=("password", "passfile"))
