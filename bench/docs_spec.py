"""Which figures of bench/results/*.json docs/benchmarks.md shows: per generated block, its
tables (which JSON paths become which columns), its targets and the founding reports beside it.
Rendered by bench/docs_page.py."""

from __future__ import annotations

from typing import Any

from bench.docs_page import Column as C
from bench.docs_page import Part, Reference, Table, Verdicts
from bench.owners.sizes import PARTS as OWNER_DAY_PARTS


def mib(value: Any) -> str:
    return f"{value / 2**20:,.1f} MiB"


def kib(value: Any) -> str:
    return f"{value / 2**10:,.0f} KiB"


def ms(seconds: Any) -> str:
    return f"{seconds * 1000:,.1f} ms"


LATENCY = (C("p50 ms", "p50"), C("p95 ms", "p95"), C("p99 ms", "p99"), C("windows", "n"))
PROBES = (
    C("p50 ms", "p50_ms"),
    C("p99 ms", "p99_ms"),
    C("max ms", "max_ms"),
    C("probes", "probes"),
)
VALUE = (C("figure", "@key"), C("value", ""))
RATE = (
    C("rows/request", "params.batch"),
    C("clients", "params.clients"),
    C("rows/s (median)", "rows_per_s"),
    C("MB/s", "mb_per_s"),
    C("median s", "median_s"),
)


def small(kind: str) -> tuple[C, ...]:
    return tuple(
        C(header, f"{kind}.{path}")
        for header, path in (
            ("req/s", "requests_per_s"),
            ("p50 ms", "p50_ms"),
            ("p95 ms", "p95_ms"),
            ("router CPU µs/req", "router_cpu_us_per_request"),
            ("PostgreSQL CPU µs/req", "postgres_cpu_us_per_request"),
        )
    )


STORAGE = (
    C("variant", "@key"),
    C("bytes/row (heap + index + TOAST)", "bytes_per_row.total"),
    C("content as stored", "bytes_per_row.content_stored"),
    C("COPY rows/s", "copy_rows_per_s"),
    C("10-row page ms", "page10_ms"),
    C("1,000-row page ms", "page1000_ms"),
)
MERGE = tuple(
    C(f"{variant}: {keys} keys µs/row", f"{variant}.{keys}_keys.merge_us_per_row")
    for variant in ("now", "no-order", "presorted", "fillfactor-90")
    for keys in ("new", "existing")
)
YCSB_PHASE = (
    C("phase", "@key"),
    C("ops/s", "throughput_ops_s"),
    C("operations", "operations"),
    C("run time ms", "runtime_ms"),
    C("failed", "failed"),
)
YCSB_OPERATION = (
    C("phase / operation", "@key"),
    C("count", "operations"),
    C("avg µs", "average_us"),
    C("p95 µs", "p95th_us"),
    C("p99 µs", "p99th_us"),
    C("max µs", "max_us"),
)


def _ingest() -> dict[str, tuple[Part, ...]]:
    return {
        "ingest.throughput": (
            Table("ingest", (C("path", "name"), *RATE), rows="rest"),
            Table(
                "ingest",
                (C("path", "@key"), *RATE),
                entries=(
                    ("best REST audit", "best.audit"),
                    ("raw binary COPY audit (the limit)", "raw_copy.audit"),
                    ("seed's per-row plpgsql", "seed"),
                    ("best REST flows", "best.flow"),
                    ("raw COPY of int-encoded flows (the limit)", "raw_copy.flow"),
                ),
            ),
            Table(
                "ingest",
                (
                    C("head to head", "@key"),
                    C("rows/request", "config.batch"),
                    C("clients", "config.clients"),
                    C("median of the pairs' ratios", "median_ratio", ".3f"),
                    C("each pair's ratio", "ratios"),
                ),
                rows="head_to_head",
            ),
            Table(
                "ingest",
                (C("day tables", "@key"), C("bytes per live row", "")),
                rows="bytes_per_row",
            ),
            Verdicts("ingest"),
        ),
        "ingest.reference": (Reference("ingest"),),
        "ingest-cpu.figures": (
            Table(
                "ingest-cpu",
                (
                    C("kind", "@key"),
                    C("router µs/row", "this.median.router_us"),
                    C("baseline router µs/row", "baseline.median.router_us"),
                    C("router kernel µs/row", "this.median.router_kernel_us"),
                    C("PostgreSQL and the rest µs/row", "this.median.rest_us"),
                    C("client µs/row", "this.median.client_us"),
                    C("rows/s", "this.median.rows_per_s", ",.0f"),
                    C("baseline rows/s", "baseline.median.rows_per_s", ",.0f"),
                ),
                rows="kinds",
            ),
            Verdicts("ingest-cpu"),
        ),
        "ingest-merge.figures": (
            Table("ingest-merge", (C("rows per part", "@key"), *MERGE), rows="results"),
            Verdicts("ingest-merge"),
        ),
        "ingest-small.figures": (
            *(
                Table(
                    "ingest-small",
                    (C("configuration", "@key"), *small(kind)),
                    rows="results",
                    caption=caption,
                )
                for kind, caption in (
                    ("audit-1-record", "one-record audit requests"),
                    ("flows-100-rows", "100-row flow requests"),
                )
            ),
            Table(
                "ingest-small",
                VALUE,
                entries=(
                    (
                        "context: one-record audit req/s, after ÷ the baseline commit's router",
                        "baseline.audit_1_record_after_vs_it",
                    ),
                    ("baseline commit", "baseline.commit"),
                ),
            ),
            Verdicts("ingest-small"),
        ),
        "ingest-storage.figures": (
            *(
                Table("ingest-storage", STORAGE, rows=f"results.{text}", caption=f"text: {text}")
                for text in ("synthetic", "templated", "templated-long")
            ),
            Verdicts("ingest-storage"),
        ),
        "storage.figures": (
            *(
                Table(
                    "storage",
                    (
                        C("layout", "@key"),
                        C("bytes/row on disk, everything counted", "bytes_per_row"),
                        C("of which zstd blocks", "block_bytes_per_row"),
                        C("of which trigram filters", "grams_bytes_per_row"),
                        C("lz4: of which ids, ts, xids", "integers_bytes_per_row"),
                        C("lz4: of which text", "contents_bytes_per_row"),
                    ),
                    rows=f"layouts.{data}",
                    caption=f"rows: {data}",
                )
                for data in ("real", "synthetic")
            ),
            Table(
                "storage",
                (
                    C("search", "@key"),
                    C("answer (rows or count)", "answer"),
                    C("same answer everywhere", "equal"),
                    C("heap ms", "median_ms.heap"),
                    C("zstd segments ms", "median_ms.zstd_segments"),
                    C("VictoriaLogs ms", "median_ms.victorialogs"),
                ),
                rows="searches",
            ),
            Table(
                "storage",
                (
                    C("rows", "@key"),
                    C("VictoriaLogs rows per CPU-second", "victorialogs_rows_per_cpu_s", ",.0f"),
                    C(
                        "heap COPY, PostgreSQL rows per CPU-second",
                        "heap_copy_postgres_rows_per_cpu_s",
                        ",.0f",
                    ),
                    C(
                        "shardlog REST rows per CPU-second (router + PostgreSQL)",
                        "shardlog_rest_rows_per_cpu_s",
                        ",.0f",
                    ),
                    C("router µs/row", "shardlog_rest_router_us_per_row"),
                    C("PostgreSQL µs/row", "shardlog_rest_postgres_us_per_row"),
                ),
                rows="ingest",
            ),
            Verdicts("storage"),
        ),
        "compaction.figures": (
            Table(
                "compaction",
                VALUE,
                entries=(
                    ("rows of each day", "rates.rows"),
                    ("owners of each day (one shard)", "rates.owners"),
                    ("REST ingest rows/s (median)", "rates.ingest_rows_per_s"),
                    ("compaction rows/s (median)", "rates.compaction_rows_per_s"),
                    ("compaction ÷ ingest, rows/s", "rates.compaction_vs_ingest"),
                    (
                        "compaction ÷ ingest, rows per CPU-second",
                        "rates.compaction_vs_ingest_per_cpu_s",
                    ),
                    ("machine load average (1, 5, 15 min) before the run", "load_average.before"),
                    ("after it", "load_average.after"),
                ),
            ),
            Table(
                "compaction",
                (
                    C("day", "day"),
                    C("ingest rows/s", "ingest.rows_per_s", ",.0f"),
                    C("ingest rows/CPU-s", "ingest.rows_per_cpu_s", ",.0f"),
                    C("router µs/row", "ingest.driver_us_per_row"),
                    C("PostgreSQL µs/row", "ingest.postgres_us_per_row"),
                    C("compaction rows/s", "compaction.rows_per_s", ",.0f"),
                    C("compaction rows/CPU-s", "compaction.rows_per_cpu_s", ",.0f"),
                    C("compacting process µs/row", "compaction.driver_us_per_row"),
                    C("PostgreSQL µs/row", "compaction.postgres_us_per_row"),
                    C("copy s", "step_seconds.copy"),
                    C("switch s", "step_seconds.switch"),
                    C("clear s", "step_seconds.clear"),
                ),
                rows="rates.runs",
                caption="each measured day: ingest, then compaction",
            ),
            Table(
                "compaction",
                VALUE,
                rows="beside.copy_profile_s",
                caption="the copy's statements over one day's owner-days, seconds (rolled "
                "back); floor_*: the ordered read and the codec alone over the same segments' "
                "arrays",
            ),
            Table(
                "compaction",
                (
                    C("alone rows/s", "alone.rows_per_s", ",.0f"),
                    C("alone s", "alone.seconds"),
                    C("beside rows/s", "beside.rows_per_s", ",.0f"),
                    C("beside s", "beside.seconds"),
                    C("beside ÷ alone", "beside_ratio"),
                    C("beside throttled rows/s", "throttled.rows_per_s", ",.0f"),
                    C("beside throttled s", "throttled.seconds"),
                    C("throttled ÷ alone", "throttled_ratio"),
                    C("rows compacted beside, each", "beside.compacted_rows"),
                ),
                rows="beside.runs",
                caption="today's writes: alone, beside `shardlog compact`, beside it throttled",
            ),
            Table(
                "compaction",
                (
                    C("1,000-row page", "@key"),
                    C("compacted p50 ms", "compacted"),
                    C("heap p50 ms", "heap"),
                ),
                rows="pages.p50_ms",
            ),
            Verdicts("compaction"),
        ),
        "placement.figures": (
            Table(
                "placement",
                (
                    C("owner", "owner"),
                    C("spread", "spread"),
                    C("requests", "requests"),
                    C("rows", "rows"),
                    C("worst shard share before", "worst_share_before"),
                    C("after", "worst_share_after"),
                    C("deviation before", "deviation_before"),
                    C("after", "deviation_after"),
                    C("bound", "bound"),
                ),
                rows="owners",
            ),
            Table(
                "placement",
                VALUE,
                entries=(
                    ("worst deviation after", "worst_deviation_after"),
                    ("worst deviation before (the old dealing)", "worst_deviation_before"),
                    ("largest bound", "largest_bound"),
                ),
            ),
            Verdicts("placement"),
        ),
    }


def _search() -> dict[str, tuple[Part, ...]]:
    pages = (
        ("first page, range only, limit 100", "first_page_range_limit100"),
        ("first page, range + 1 pattern, limit 100", "first_page_1_pattern_limit100"),
        ("first page, range + 2 patterns, limit 100", "first_page_2_patterns_limit100"),
        ("first page, range only, limit 1000", "first_page_range_limit1000"),
        ("first page, range + 1 pattern, limit 1000", "first_page_1_pattern_limit1000"),
        ("first page, range + 2 patterns, limit 1000", "first_page_2_patterns_limit1000"),
        ("fan-out backend (2 patterns, limit 100)", "backend_fanout"),
        ("fdw backend (same queries)", "backend_fdw"),
        ("one instance holding all rows, SQL only", "single_instance_sql"),
        ("page 1 (limit 100)", "page_1"),
        ("page 1000 of the same windows", "page_1000"),
    )
    return {
        "search.pages": (
            Table(
                "search",
                (C("query", "@key"), *LATENCY),
                entries=tuple((label, f"results.{key}") for label, key in pages),
            ),
            Table(
                "search",
                (C("count mode", "@key"), *LATENCY),
                entries=(
                    ("count=estimate ms", "results.count_estimate_ms"),
                    ("count=exact ms", "results.count_exact_ms"),
                ),
            ),
            Verdicts("search"),
        ),
        "search.estimates": (
            Table(
                "search",
                (
                    C("kind", "kind"),
                    C("condition", "set"),
                    C("window", "window"),
                    C("exact", "exact"),
                    C("estimate error %", "error_pct"),
                    C("method", "method"),
                    C("planner's error %", "planner_error_pct"),
                    C("estimate ms", "estimate_ms"),
                    C("exact ms", "exact_ms"),
                    C("estimate ÷ exact time", "time_share"),
                ),
                rows="results.estimates",
            ),
        ),
        "search.reference": (Reference("search"),),
        "search_compacted.figures": (
            Table(
                "search_compacted",
                (
                    C("layout", "layout"),
                    C("condition", "set"),
                    C("window", "window"),
                    C("exact", "exact"),
                    C("estimate", "estimate"),
                    C("method", "method"),
                    C("bounds", "bounds"),
                    C("error %", "error_pct"),
                    C("estimate ms", "estimate_ms"),
                    C("exact ms", "exact_ms"),
                    C("estimate ÷ exact time", "time_share"),
                ),
                rows="results",
            ),
            Verdicts("search_compacted"),
        ),
        "search_rate.figures": (
            Table(
                "search_rate",
                (
                    C("owners", "@key"),
                    C("shards asked", "/shards_asked.{key}"),
                    C("requests/s", "requests_per_s"),
                    C("router CPU ms/request", "router_cpu_ms_per_request"),
                    C("PostgreSQL CPU ms/request", "postgres_cpu_ms_per_request"),
                    C("machine CPU ms/request", "machine_cpu_ms_per_request"),
                    C("p50 ms", "p50_ms"),
                    C("errors", "errors"),
                ),
                rows="medians",
            ),
            Table(
                "search_rate",
                VALUE,
                entries=(
                    (
                        "spread 2 ÷ whole group, same router (the target)",
                        "ratio_spread_vs_whole_group_same_router",
                    ),
                    ("each repeat", "same_router_ratios_by_repeat"),
                    (
                        "context: spread 2 ÷ the baseline commit's router on whole-group owners",
                        "baseline.ratio_spread_vs_its_whole_group",
                    ),
                    ("each repeat", "baseline.ratios_by_repeat"),
                    ("baseline commit", "baseline.commit"),
                    ("CPU per request, whole group ÷ spread 2", "cpu_ratio_whole_group_vs_spread"),
                ),
            ),
            Verdicts("search_rate"),
        ),
        "search_export.figures": (
            Table(
                "search_export",
                (
                    C("path", "@key"),
                    C("rows/s", ""),
                    C("÷ the floor", "/vs_floor.{key}"),
                    C("seconds, each round", "/seconds.{key}"),
                ),
                rows="rows_per_s",
            ),
            Verdicts("search_export"),
        ),
        "search_mixed.figures": (
            Table(
                "search_mixed",
                (
                    C("round", "@key"),
                    C("paced writes rows/s alone", "paced_solo.rows_per_s"),
                    C("beside 2 pagers", "paced_mixed.rows_per_s"),
                    C("kept", "kept"),
                    C("10-row write p50 ms alone", "small_solo.write_latency.p50_ms"),
                    C("beside 1 pager", "small_mixed.write_latency.p50_ms"),
                    C("ratio", "small_p50_ratio"),
                    C("pages p50 ms (2 pagers)", "paced_mixed.search_latency.p50_ms"),
                    C("pages p50 ms (1 pager)", "small_mixed.search_latency.p50_ms"),
                ),
                rows="rounds",
            ),
            Table(
                "search_mixed",
                VALUE,
                entries=(
                    ("best rate, 1,000-row writes, rows/s", "best.rows_per_s"),
                    ("paced writes kept (median of the rounds)", "kept_median"),
                    ("10-row write p50 beside ÷ alone (median)", "small_p50_ratio_median"),
                ),
            ),
            Verdicts("search_mixed"),
        ),
    }


def _operations() -> dict[str, tuple[Part, ...]]:
    return {
        "retention.figures": (
            Table(
                "retention",
                (
                    C("rows in the day", "@key"),
                    C("bytes", "bytes_released", mib),
                    C("retention DROP (median)", "median_s", ms),
                    C("each", "seconds"),
                    C("WAL", "wal_bytes", kib),
                    C("kernel releasing the same bytes", "plain_file_release_s", ms),
                    C("DELETE + VACUUM s", "/results.delete_vacuum.{key}.median_s"),
                    C("its WAL", "/results.delete_vacuum.{key}.wal_bytes", mib),
                    C(
                        "drop beyond the file release ms",
                        "/targets.drop_beyond_file_release_ms.{key}",
                    ),
                ),
                rows="results.drop",
            ),
            Verdicts("retention"),
        ),
        "owners.figures": (
            Table(
                "owners",
                (
                    C("layout", "layout"),
                    C("owners", "owners", ",.0f"),
                    C("bytes on disk per owner-day", "disk.bytes_per_owner_day", ",.0f"),
                    C("of which the rows' payload", "disk.payload_bytes_per_owner_day", ",.0f"),
                    C("overhead", "disk.overhead_bytes_per_owner_day", ",.0f"),
                    C("relations per shard", "relations_per_shard.after", ",.0f"),
                    C("catalog bytes per owner", "catalog.bytes_per_owner", ",.0f"),
                    C("of which system catalog", "catalog.system_catalog_bytes_per_owner", ",.0f"),
                    C("first pass owners/s", "first_pass_owners_per_s", ",.0f"),
                ),
                rows="runs",
                caption="what N small owners (3 rows on each of 3 days) cost",
            ),
            Table(
                "owners",
                (
                    C("layout", "layout"),
                    C("owners", "owners", ",.0f"),
                    *(
                        C(part, f"disk.by_part_per_owner_day.{part}", ",.0f")
                        for part in OWNER_DAY_PARTS
                    ),
                ),
                rows="runs",
                caption="where each owner-day's bytes went, summed over the shards",
            ),
            Table(
                "owners",
                (
                    C("layout", "layout"),
                    C("owners", "owners", ",.0f"),
                    C("first write p50 ms", "first_write.p50_ms"),
                    C("p95 ms", "first_write.p95_ms"),
                    C("1-hour search p50 ms", "search_1h.p50_ms"),
                    C("p95 ms", "search_1h.p95_ms"),
                    C("retention dry run s", "retention.dry_run.seconds"),
                    C("run dropping one day s", "retention.run.seconds"),
                    C("router RSS MB, first pass", "router_rss_mb.first_pass"),
                    C("second pass", "router_rss_mb.second_pass"),
                ),
                rows="runs",
                caption="writes, searches, retention and the router's memory",
            ),
            Table(
                "owners",
                (
                    C("layout", "layout"),
                    C("owners", "owners", ",.0f"),
                    C("no owner: first page ms", "many_owner_pages.all.first_page_ms"),
                    C("pages p50 ms", "many_owner_pages.all.pages.p50_ms"),
                    C("p95 ms", "many_owner_pages.all.pages.p95_ms"),
                    C("prefix ~10 %: owners", "many_owner_pages.prefix_10pct.owners", ",.0f"),
                    C("pages p50 ms", "many_owner_pages.prefix_10pct.pages.p50_ms"),
                    C("prefix ~1 %: owners", "many_owner_pages.prefix_1pct.owners", ",.0f"),
                    C("pages p50 ms", "many_owner_pages.prefix_1pct.pages.p50_ms"),
                ),
                rows="runs",
                caption="pages of 100 rows of one day over many owners (first and following)",
            ),
            Verdicts("owners"),
        ),
        "owners-big.figures": (
            Table(
                "owners-big",
                (
                    C("layout", "@key"),
                    C("rows written", "rows_written", ",.0f"),
                    C("ingest rows/s (median)", "ingest_rows_per_s_median", ",.0f"),
                    C("each repeat", "ingest_rows_per_s"),
                    C("spread", "ingest_spread"),
                    C("1-hour search p50 ms (median)", "search_p50_ms_median"),
                    C("spread", "search_spread"),
                    C("p95 ms (all)", "search_all.p95_ms"),
                ),
                rows="layouts",
                caption="big owners with the shared tables of small owners on and off",
            ),
            Verdicts("owners-big"),
        ),
        "failover.figures": (
            Table(
                "failover",
                (
                    C("fault", "fault"),
                    C("synchronous", "synchronous"),
                    C("recovery s (median)", "recovery_s_median"),
                    C("audit: longest wait s", "longest_stall_s_median"),
                    C("flows: longest wait s", "flow_longest_stall_s_median"),
                    C("client errors", "client_errors"),
                    C("rows lost", "rows_lost"),
                    C("rows twice", "rows_duplicated"),
                    C("flow client errors", "flow_client_errors"),
                    C("flows lost", "flows_lost"),
                    C("flows twice", "flows_duplicated"),
                ),
                rows="faults",
            ),
            Table(
                "failover",
                (
                    C("ingest", "@key"),
                    C("rows", "rows"),
                    C("rows/s (median)", "rows_per_s"),
                    C("÷ plain", "vs_plain"),
                ),
                rows="throughput",
            ),
            Verdicts("failover"),
        ),
        "hostile.figures": (
            Table(
                "hostile",
                (
                    C("body MiB", "mib"),
                    C("unending line: 413 after s", "refusal_s"),
                    C("NDJSON wall s", "ndjson_s"),
                    C("NDJSON router CPU s", "ndjson_router_cpu_s"),
                    C("JSON array wall s", "array_s"),
                    C("JSON array router CPU s", "array_router_cpu_s"),
                ),
                rows="parse",
            ),
            Table(
                "hostile",
                (C("/health/live", "@key"), *PROBES),
                entries=(
                    ("idle", "liveness.idle"),
                    ("while two 64 MiB arrays are parsed", "liveness.two_64mib_arrays"),
                ),
            ),
            Table("hostile", VALUE, rows="linearity"),
            Verdicts("hostile"),
        ),
        "hostile-decoders.figures": (
            Table(
                "hostile-decoders",
                VALUE,
                entries=(
                    ("body MiB", "decoders.body_mib"),
                    ("rounds", "decoders.rounds"),
                    ("router RSS idle MiB", "decoders.rss_idle_mib"),
                    ("router RSS peak growth MiB", "decoders.rss_peak_growth_mib"),
                    ("router RSS kept afterwards MiB", "decoders.rss_kept_mib"),
                    ("idle syslog connections opened", "syslog.opened"),
                    ("still open after 5 s", "syslog.still_open_after_5s"),
                    ("closed by the caps", "syslog.refused_by_the_caps"),
                    ("listener RSS growth MiB", "syslog.listener_rss_growth_mib"),
                ),
            ),
            Table(
                "hostile-decoders",
                (C("/health", "@key"), *PROBES),
                entries=(
                    ("router, idle", "decoders.health_idle"),
                    ("router, four amplified bodies", "decoders.health_loaded"),
                    ("router, idle connections held", "syslog.health_loaded.router"),
                    ("listener, idle connections held", "syslog.health_loaded.listener"),
                ),
            ),
            Verdicts("hostile-decoders"),
        ),
        "auth.figures": (
            Table(
                "auth",
                (
                    C("workload", "@key"),
                    C("router CPU µs/request", "router_cpu_us_per_request"),
                    C("one process: CPU tokens ÷ open", "one_process.router_cpu_ratio"),
                    C("wall", "one_process.wall_ratio"),
                    C("separate routers: CPU", "separate_routers.router_cpu_ratio"),
                    C("wall", "separate_routers.wall_ratio"),
                    C("open ÷ open CPU", "separate_routers.open_b/open cpu"),
                    C("tokens ÷ tokens CPU", "separate_routers.tokens_b/tokens cpu"),
                    C("token check share %", "token_check_share_pct"),
                ),
                rows="workloads",
            ),
            Table("auth", VALUE, entries=(("token check µs per request", "token_check_us"),)),
            Verdicts("auth"),
        ),
        "report.figures": (
            Table(
                "report",
                (
                    C("report", "@key"),
                    C("shardlog s", "shardlog_s"),
                    C("floor s", "floor_s"),
                    C("fdw s", "fdw_s"),
                ),
                entries=tuple(
                    (f"{size} {name}", f"results.{size}:{name}")
                    for size in ("1x", "10x")
                    for name in ("top20_src_by_bytes", "rows_per_hour_7d", "distinct_dst_per_port")
                ),
            ),
            Table(
                "report",
                VALUE,
                entries=(
                    ("router RSS after 1x MB", "results.rss_after_1x_mb"),
                    ("router RSS after 10x MB", "results.rss_after_10x_mb"),
                ),
            ),
            Verdicts("report"),
        ),
        "tail.figures": (
            Table(
                "tail",
                (
                    C("ingest", "@key"),
                    C("rows", "rows"),
                    C("s", "seconds"),
                    C("rows/s", "rows_per_s"),
                ),
                entries=(
                    ("solo", "solo"),
                    ("paced at half, no subscribers", "paced_alone"),
                    ("paced at half, with the subscribers", "paced_with_subscribers"),
                ),
            ),
            Table(
                "tail",
                (C("latency", "@key"), C("p50 s", "p50_s"), C("p99 s", "p99_s")),
                entries=(
                    ("client ts to arrival (judged)", "latency_client_ts_to_arrival"),
                    ("commit to delivery (router's histogram)", "latency_router"),
                ),
            ),
            Table(
                "tail",
                VALUE,
                entries=(
                    ("ingest kept", "ingest_kept"),
                    ("rows delivered", "rows_delivered"),
                    ("router RSS before MB", "router_rss_mb.before"),
                    ("router RSS subscribed MB", "router_rss_mb.subscribed"),
                    ("router RSS under load MB", "router_rss_mb.under_load"),
                    ("router RSS per subscriber KB", "router_rss_mb.per_subscriber_kb"),
                ),
            ),
            Table(
                "tail",
                (C("cores busy, with subscribers", "@key"), C("cores", "")),
                rows="cpu_cores_busy.paced_with_subscribers",
            ),
            Verdicts("tail"),
        ),
        "tail-writes.figures": (
            Table(
                "tail-writes",
                (
                    C("writes", "@key"),
                    C("p50 s", "p50_s"),
                    C("p99 s", "p99_s"),
                    C("max s", "max_s"),
                    C("writes", "writes"),
                ),
                entries=(
                    ("no stream", "writes_alone"),
                    ("1,000 streams of the owner", "writes_with_subscribers"),
                ),
            ),
            Table(
                "tail-writes",
                VALUE,
                entries=(
                    ("write p99 ratio, each round", "write_p99_ratio_each_round"),
                    ("received 3 s after the last write", "delivered_3s_after_last_write"),
                    ("streams cut (overflow)", "streams_cut_overflow"),
                    ("router RSS before MB", "router_rss_mb.before"),
                    ("router RSS subscribed MB", "router_rss_mb.subscribed"),
                    ("router RSS under writes MB", "router_rss_mb.under_writes"),
                    ("router RSS after close MB", "router_rss_mb.closed"),
                ),
            ),
            Verdicts("tail-writes"),
        ),
        "pgbadger.figures": (
            Table("pgbadger", VALUE, rows="counts"),
            Table(
                "pgbadger",
                (
                    C("shard", "@key"),
                    C("entries", ""),
                    C("after folding", "/folded_entries_by_shard.{key}"),
                ),
                rows="distinct_entries_by_shard",
            ),
            Table(
                "pgbadger",
                (
                    C("role", "role"),
                    C("statement (folded)", "query"),
                    C("calls", "calls"),
                    C("total ms", "total_ms"),
                    C("mean ms", "mean_ms"),
                ),
                rows="top_by_calls",
            ),
            Verdicts("pgbadger"),
        ),
    }


def _comparisons() -> dict[str, tuple[Part, ...]]:
    return {
        "grid.figures": (
            Table(
                "grid",
                (
                    C("clients", "clients"),
                    C("rows/request", "rows_per_request"),
                    C("tps", "tps"),
                    C("rows/s", "rows_per_s"),
                    C("avg ms", "avg_ms"),
                    C("p90 ms", "p90_ms"),
                    C("max ms", "max_ms"),
                    C("requests", "requests"),
                ),
                rows="cells",
            ),
            Table(
                "grid",
                (
                    C("time index", "@key"),
                    C("rows", "rows"),
                    C("COPY s", "copy_s"),
                    C("rows/s", "rows_per_s"),
                    C("index MB", "index_mb"),
                ),
                rows="time_index",
            ),
            Table(
                "grid",
                VALUE,
                entries=(
                    ("mixed: paced write rate asked, rows/s", "mixed.target_rows_per_s"),
                    ("mixed: write rate kept, rows/s", "mixed.rows_per_s"),
                    ("mixed: kept", "mixed.kept"),
                    ("mixed: searches avg ms", "mixed.search_latency.avg_ms"),
                    ("mixed: searches p90 ms", "mixed.search_latency.p90_ms"),
                    ("mixed: searches max ms", "mixed.search_latency.max_ms"),
                    ("mixed: searches", "mixed.search_latency.requests"),
                ),
            ),
            Verdicts("grid"),
        ),
        "grid.reference": (Reference("grid"),),
        "collector.figures": (
            Table(
                "collector",
                (
                    C("target", "@key"),
                    C("highest 0-drop flows/s (median)", "best_flows_per_s"),
                    C("runs", "best_runs"),
                    C("packets/s", "best_packets_per_s"),
                    C("CPU µs per flow", "cpu_us_per_flow"),
                    C("at the ladder's top", "at_max_rate"),
                ),
                entries=(
                    ("shardlog's collector", "summary.shardlog"),
                    ("nfcapd", "summary.nfcapd"),
                ),
            ),
            Table(
                "collector",
                VALUE,
                entries=(
                    ("shardlog ÷ nfcapd", "summary.ratio"),
                    (
                        "database alone, inserting, flows/s",
                        "summary.database_ceiling.insert_flows_per_s",
                    ),
                    (
                        "database alone, merging, flows/s",
                        "summary.database_ceiling.merge_flows_per_s",
                    ),
                    ("each merging pass", "summary.database_ceiling.merge_flows_per_s_runs"),
                    (
                        "shardlog ÷ the database alone",
                        "summary.database_ceiling.shardlog_over_ceiling",
                    ),
                    ("the database alone ÷ nfcapd", "summary.database_ceiling.ceiling_over_nfcapd"),
                ),
            ),
            Verdicts("collector"),
        ),
        "protocols.figures": (
            Table(
                "protocols",
                (
                    C("way in", "@key"),
                    C("rows/s (median)", "rows_per_s"),
                    C("runs", "rows_per_s_runs"),
                    C("÷ NDJSON (median)", "ratio_to_ndjson"),
                    C("per repeat", "ratios_to_ndjson"),
                ),
                rows="summary",
            ),
            Verdicts("protocols"),
        ),
        "ycsb.figures": (
            Table("ycsb", YCSB_PHASE, rows="phases"),
            Table("ycsb", YCSB_OPERATION, rows="phases", within="by_operation"),
            Verdicts("ycsb"),
        ),
        "ycsb.reference": (Reference("ycsb"),),
        "crud.figures": (
            Table(
                "crud",
                (
                    C("operation", "operation"),
                    C("rows/request", "batch"),
                    C("rows", "rows"),
                    C("requests", "requests"),
                    C("s per 1M rows", "seconds_per_1m_rows"),
                    C("rows/s", "rows_per_s", ",.0f"),
                ),
                rows="cells",
                group_by="shared_buffers",
            ),
            Verdicts("crud"),
        ),
        "crud.reference": (Reference("crud"),),
        "console.figures": (
            Table(
                "console",
                VALUE,
                entries=(
                    ("console files, gzip -9, bytes", "assets.gzip_bytes"),
                    ("as the router sends them, bytes", "assets.sent_bytes"),
                ),
            ),
            Table(
                "console",
                (
                    C("first page", "@key"),
                    C("median ms", "median_ms"),
                    C("API alone ms", "api_median_ms"),
                    C("rows shown", "rows_shown"),
                    C("count shown", "count_shown"),
                ),
                rows="first_page",
            ),
            Verdicts("console"),
        ),
    }


BLOCKS: dict[str, tuple[Part, ...]] = {
    **_ingest(),
    **_search(),
    **_operations(),
    **_comparisons(),
}
