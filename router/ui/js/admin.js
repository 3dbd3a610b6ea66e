// The admin view: shards with their health, day tables per owner, the compaction of an
// owner's days (or the failed ones), retention policies (view, edit, remove) and runs, with a
// dry run that shows what a run would drop.

import { call, get } from "./api.js";
import { $, el, formatBytes, formatNumber, hideError, showError, withProgress } from "./dom.js";
import { navigate } from "./state.js";

const cells = (...values) => values.map((value) => el("td", {}, value ?? ""));
const empty = (columns, text) => el("tr", {}, el("td", { colspan: columns, className: "hint" }, text));

export class AdminView {
  constructor(route) {
    this.route = route;
    this.tablesForm = $("#tables-form");
    this.policyForm = $("#policy-form");
    this.tablesForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const params = new URLSearchParams({ view: "admin" });
      const { kind, owner } = this.tablesForm.elements;
      params.set("kind", kind.value);
      if (owner.value.trim()) params.set("owner", owner.value.trim());
      if (navigate(params)) this.route();
      else Promise.all([this.loadTables(params), this.loadCompaction(params)]);
    });
    this.policyForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.savePolicy();
    });
    $("#retention-dry-run").addEventListener("click", () => this.dryRun());
  }

  async show(params) {
    hideError();
    this.tablesForm.elements.kind.value = params.get("kind") === "flow" ? "flow" : "audit";
    this.tablesForm.elements.owner.value = params.get("owner") || "";
    await Promise.all([
      this.loadShards(),
      this.loadPolicies(),
      this.loadRuns(),
      this.loadTables(params),
      this.loadCompaction(params),
    ]);
  }

  // An audit owner's owner-days with where their compaction stands; with no audit owner
  // named, the owner-days whose last compaction step failed.
  async loadCompaction(params) {
    const body = $("#admin-compaction tbody");
    const owner = params.get("kind") === "flow" ? null : params.get("owner");
    $("#compaction-scope").textContent = owner
      ? `The audit days of ${owner}: open (not closed yet), copy, switch or clear (the next step), wait (switched, its heap cleared soon), done, or failed.`
      : "Audit owner-days and shared shard-days whose last compaction step failed (name an audit owner above to see all of its days).";
    try {
      const answer = await get("/v1/admin/compaction", owner ? { owner, limit: 500 } : { failed: "true", limit: 500 });
      // Shard-days of small owners' shared rows, compacted as one (listed with no owner named).
      const shared = (answer.shard_days || []).map((day) => ({ ...day, owner: "small owners (shared)" }));
      const rows = [...answer.owner_days, ...shared].map((day) =>
        el(
          "tr",
          { className: day.state === "failed" ? "bad" : "" },
          ...cells(
            day.state,
            day.owner,
            day.day,
            day.shard,
            formatNumber(day.rows),
            day.heap_bytes ? formatBytes(day.heap_bytes) : "",
            day.packed_bytes ? formatBytes(day.packed_bytes) : "",
            day.failures ? `${day.failures} (${day.failed_step})` : "",
            day.error,
          ),
        ),
      );
      body.replaceChildren(...(rows.length ? rows : [empty(9, owner ? "No audit day tables." : "No failed compactions.")]));
      const skipped = [
        ...Object.entries(answer.unreachable || {}).map(([shard, why]) => `${shard} (${why})`),
        ...(answer.without_codec || []).map((shard) => `${shard} (no shardlog_segments extension)`),
      ];
      if (skipped.length) showError(new Error(`Compaction not read on: ${skipped.join(", ")}`));
    } catch (error) {
      showError(error);
    }
  }

  async loadShards() {
    const body = $("#admin-shards tbody");
    try {
      const [groups, shards, ready] = await Promise.all([
        get("/v1/admin/groups"),
        get("/v1/admin/shards"),
        fetch("/health/ready").then((response) => response.json()),
      ]);
      const synchronous = (value) => (value === null ? "audit yes, flows no (default)" : value ? "yes" : "no");
      $("#admin-groups tbody").replaceChildren(
        ...groups.map((group) => el("tr", {}, ...cells(group.name, group.placement, synchronous(group.synchronous), group.shards.length))),
      );
      const health = new Map((ready.shards || []).map((shard) => [shard.name, shard]));
      body.replaceChildren(
        ...shards.map((shard) => {
          const probe = health.get(shard.name);
          const reachable = !probe || probe.reachable === null ? "not probed" : probe.reachable ? "yes" : `no: ${probe.error || ""}`;
          const latency = probe && probe.latency_ms !== null && probe.reachable ? `${probe.latency_ms.toFixed(1)} ms` : "";
          return el("tr", { className: probe && probe.reachable === false ? "bad" : "" }, ...cells(shard.name, shard.group, shard.state, reachable, latency));
        }),
      );
    } catch (error) {
      showError(error);
    }
  }

  async loadTables(params) {
    const body = $("#admin-tables tbody");
    const owner = params.get("owner");
    if (!owner) {
      body.replaceChildren(empty(6, "Name an owner or switch to list its day tables."));
      return;
    }
    try {
      const answer = await withProgress("Reading day tables from the shards", (signal) =>
        get("/v1/admin/tables", { kind: params.get("kind") || "audit", owner }, signal),
      );
      const rows = answer.tables.map((table) =>
        el("tr", {}, ...cells(table.kind, table.owner, table.day, table.shard, formatNumber(table.rows), formatBytes(table.bytes))),
      );
      body.replaceChildren(...(rows.length ? rows : [empty(6, "No day tables.")]));
      const unreachable = Object.entries(answer.unreachable || {});
      if (unreachable.length) showError(new Error(`Not read: ${unreachable.map(([shard, why]) => `${shard} (${why})`).join(", ")}`));
    } catch (error) {
      showError(error, this.tablesForm);
    }
  }

  async loadPolicies() {
    const body = $("#admin-policies tbody");
    try {
      const policies = await get("/v1/admin/retention/policies");
      const rows = policies.map((policy) =>
        el(
          "tr",
          {},
          ...cells(policy.kind, policy.group, policy.owner ?? "(whole group)", policy.keep_days, policy.archive ? "yes" : "no"),
          el(
            "td",
            {},
            el("button", { type: "button", onclick: () => this.editPolicy(policy) }, "Edit"),
            " ",
            el("button", { type: "button", onclick: () => this.removePolicy(policy) }, "Remove"),
          ),
        ),
      );
      body.replaceChildren(...(rows.length ? rows : [empty(6, "No retention policies: every day table is kept.")]));
    } catch (error) {
      showError(error);
    }
  }

  editPolicy(policy) {
    const { kind, group, owner, keep_days: keepDays, archive } = this.policyForm.elements;
    kind.value = policy.kind;
    group.value = policy.group;
    owner.value = policy.owner ?? "";
    keepDays.value = policy.keep_days;
    archive.checked = policy.archive;
    keepDays.focus();
  }

  async savePolicy() {
    hideError();
    const { kind, group, owner, keep_days: keepDays, archive } = this.policyForm.elements;
    const body = {
      kind: kind.value,
      group: group.value.trim(),
      owner: owner.value.trim() || null,
      keep_days: Number(keepDays.value),
      archive: archive.checked,
    };
    try {
      await call("PUT", "/v1/admin/retention/policies", { body });
      await this.loadPolicies();
    } catch (error) {
      showError(error, this.policyForm);
    }
  }

  async removePolicy(policy) {
    if (!confirm(`Remove the ${policy.kind} policy of ${policy.group}${policy.owner ? ` / ${policy.owner}` : ""}?`)) return;
    try {
      await call("DELETE", `/v1/admin/retention/policies/${policy.id}`);
      await this.loadPolicies();
    } catch (error) {
      showError(error);
    }
  }

  async loadRuns() {
    const body = $("#retention-runs tbody");
    try {
      const runs = await get("/v1/admin/retention/runs", { limit: 20 });
      const rows = runs.map((run) =>
        el(
          "tr",
          {},
          ...cells(
            `#${run.id}${run.dry_run ? " (dry run)" : ""}`,
            run.status,
            run.as_of,
            formatNumber(run.tables_total),
            formatNumber(run.tables_dropped),
            formatNumber(run.rows_dropped),
            run.message,
          ),
        ),
      );
      body.replaceChildren(...(rows.length ? rows : [empty(7, "No runs yet.")]));
    } catch (error) {
      showError(error);
    }
  }

  async dryRun() {
    hideError();
    const box = $("#retention-plan");
    try {
      const report = await withProgress("Planning a retention run (dry run)", (signal) =>
        call("POST", "/v1/admin/retention/run", { body: { dry_run: true }, signal }),
      );
      const summary = el(
        "p",
        { className: "summary" },
        `${report.status}: ${formatNumber(report.drops.length)} day tables would be dropped, ` +
          `${formatNumber(report.drops.reduce((sum, drop) => sum + drop.rows, 0))} rows, ` +
          `${formatBytes(report.drops.reduce((sum, drop) => sum + drop.bytes, 0))}` +
          (report.message ? ` (${report.message})` : ""),
      );
      const head = el("tr", {}, ...["Kind", "Owner", "Day", "Shard", "Keep days", "Rows", "Bytes", "Archive"].map((name) => el("th", { scope: "col" }, name)));
      const rows = report.drops.map((drop) =>
        el("tr", {}, ...cells(drop.kind, drop.owner, drop.day, drop.shard, drop.keep_days, formatNumber(drop.rows), formatBytes(drop.bytes), drop.archive ? "yes" : "no")),
      );
      const body = el("tbody", {}, ...(rows.length ? rows : [empty(8, "Nothing to drop.")]));
      box.replaceChildren(summary, el("table", { className: "results" }, el("thead", {}, head), body));
      await this.loadRuns();
    } catch (error) {
      showError(error);
    }
  }
}
