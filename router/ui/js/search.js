// One search view (audit or flows): the form, the page table paged by the API's cursors, the
// count, exports, a row's detail and the live tail. The URL holds the query; show() renders
// whatever the URL says.

import { ApiError, download, get, stream } from "./api.js";
import { $, el, formatBytes, formatNumber, hideError, saveBlob, showError, withProgress } from "./dom.js";
import { apiParams, current, fillForm, fromForm, navigate, syncRange } from "./state.js";

const MAX_TABLE_ROWS = 1000;
// Parameters a tail does not take (it has no window, order or page).
const NOT_FOR_TAIL = ["from", "to", "order", "limit", "cursor", "count"];

const time = (value) => (value ? value.replace("T", " ").replace(/(\.\d{3})\d*/, "$1").replace("+00:00", "") : "");
const endpoint = (host, port) => (port === null || port === undefined ? host : host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

export const KINDS = {
  audit: {
    title: "audit",
    cells: (row) => [time(row.ts), row.owner, row.shard, row.content.length > 300 ? `${row.content.slice(0, 300)}…` : row.content],
  },
  flows: {
    title: "flows",
    cells: (row) => [
      time(row.first_seen),
      row.switch,
      endpoint(row.src_ip, row.src_port),
      endpoint(row.dst_ip, row.dst_port),
      row.proto,
      formatBytes(row.bytes),
      formatNumber(row.packets),
      time(row.last_seen),
    ],
  },
};

const first = (value) => (Array.isArray(value) ? value[0] : value);
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

export class SearchView {
  constructor(kind, route) {
    this.kind = kind;
    this.route = route;
    this.shape = KINDS[kind];
    this.form = $(`#${kind}-form`);
    this.tbody = $(`#${kind}-table tbody`);
    this.queryKey = null;
    this.window = null;
    this.cursors = { older: null, newer: null };
    this.tail = null;
    this.tailKey = null;
    this.identity = null;

    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.go(fromForm(this.form, kind));
    });
    this.form.elements.range.addEventListener("change", () => syncRange(this.form));
    $(`#${kind}-older`).addEventListener("click", () => this.page("older"));
    $(`#${kind}-newer`).addEventListener("click", () => this.page("newer"));
    $(`#${kind}-count-exact`).addEventListener("click", () => this.countExactly());
    $(`#${kind}-export-ndjson`).addEventListener("click", () => this.export("ndjson"));
    $(`#${kind}-export-csv`).addEventListener("click", () => this.export("csv"));
    $(`#${kind}-tail`).addEventListener("change", (event) => {
      const params = current();
      if (event.target.checked) params.set("tail", "true");
      else params.delete("tail");
      this.go(params);
    });
    this.tbody.addEventListener("click", (event) => this.pick(event.target.closest("tr.row")));
    this.tbody.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.pick(event.target.closest("tr.row"));
    });
  }

  go(params, options) {
    if (navigate(params, options)) this.route();
  }

  allow(identity) {
    this.identity = identity;
    const tail = $(`#${this.kind}-tail`);
    tail.closest("label").hidden = !identity.scopes.includes("tail");
  }

  // Renders the URL: the form, the page (searched again only when the query changed), the
  // row detail and the tail.
  async show(params) {
    fillForm(this.form, params);
    const searched = params.has("range") || params.has("from");
    const key = new URLSearchParams(params);
    key.delete("row");
    key.delete("tail");
    if (searched && key.toString() !== this.queryKey) {
      this.queryKey = key.toString();
      await this.search(params);
    }
    if (!searched) this.clear();
    this.syncTail(searched ? params : null);
    await this.showRow(params.get("row"));
  }

  clear() {
    this.queryKey = null;
    this.tbody.replaceChildren(el("tr", {}, el("td", { colspan: 8, className: "hint" }, "Search to see rows.")));
    $(`#${this.kind}-count`).textContent = "";
    for (const id of ["count-exact", "export-ndjson", "export-csv"]) $(`#${this.kind}-${id}`).hidden = true;
    this.setCursors(null, null, "desc");
  }

  async search(params) {
    hideError();
    const api = apiParams(params);
    const firstPage = !params.get("cursor");
    if (firstPage) api.count = "estimate";
    let page;
    try {
      page = await withProgress(`Searching ${this.shape.title}`, (signal) => get(`/v1/${this.kind}/search`, api, signal));
    } catch (error) {
      this.queryKey = null;
      showError(error, this.form);
      return;
    }
    this.window = { from: first(api.from), to: first(api.to) };
    this.render(page.items);
    this.setCursors(page.next_cursor, page.prev_cursor, first(api.order) || "asc");
    if (firstPage) this.showCount(page.count);
    for (const id of ["count-exact", "export-ndjson", "export-csv"]) $(`#${this.kind}-${id}`).hidden = false;
    if (page.partial) showError(new Error(`Some shards did not answer: ${page.failed_shards.join(", ")}`));
    await this.afterPage(params, api, firstPage);
  }

  // Flows draw their charts here.
  async afterPage() {}

  render(items) {
    if (!items.length) {
      this.tbody.replaceChildren(el("tr", {}, el("td", { colspan: 8, className: "hint" }, "No rows match.")));
      return;
    }
    this.tbody.replaceChildren(...items.map((item) => this.row(item)));
  }

  row(item, tailed = false) {
    const cells = this.shape.cells(item).map((value) => el("td", {}, value));
    return el("tr", { className: tailed ? "row tailed" : "row", tabindex: 0, "data-ref": item.ref }, ...cells);
  }

  setCursors(next, previous, order) {
    // Pages run newest first by default: "older" is the next page then, the previous otherwise.
    this.cursors = order === "desc" ? { older: next, newer: previous } : { older: previous, newer: next };
    $(`#${this.kind}-older`).disabled = !this.cursors.older;
    $(`#${this.kind}-newer`).disabled = !this.cursors.newer;
  }

  page(direction) {
    const cursor = this.cursors[direction];
    if (!cursor) return;
    const params = current();
    params.delete("row");
    params.set("cursor", cursor);
    // A cursor is bound to its query's window: carry the window the first page resolved.
    params.set("from", this.window.from);
    params.set("to", this.window.to);
    this.go(params);
  }

  showCount(count) {
    const box = $(`#${this.kind}-count`);
    if (!count) {
      box.textContent = "";
      return;
    }
    const rows = formatNumber(count.value);
    box.textContent = count.exact ? `${rows} rows` : `≈ ${rows} rows (estimate)`;
  }

  firstPageParams() {
    const params = current();
    params.delete("cursor");
    const api = apiParams(params);
    if (params.get("range") !== "custom" && this.window) Object.assign(api, this.window);
    return api;
  }

  async countExactly() {
    hideError();
    const api = { ...this.firstPageParams(), count: "exact", limit: 1 };
    try {
      const page = await withProgress("Counting every matching row", (signal) => get(`/v1/${this.kind}/search`, api, signal));
      this.showCount(page.count);
    } catch (error) {
      showError(error, this.form);
    }
  }

  async export(format) {
    hideError();
    const api = this.firstPageParams();
    delete api.limit;
    delete api.count;
    api.format = format;
    try {
      const { blob, lines } = await withProgress(`Exporting ${format.toUpperCase()}`, (signal, say) =>
        download(`/v1/${this.kind}/export`, api, signal, (bytes, count) => say(`${formatNumber(count)} lines, ${formatBytes(bytes)}`)),
      );
      saveBlob(blob, `${this.kind}-${this.window.from.replace(/:/g, "")}.${format === "csv" ? "csv" : "ndjson"}`);
      $(`#${this.kind}-count`).title = `last export: ${formatNumber(lines)} lines`;
    } catch (error) {
      showError(error, this.form);
    }
  }

  pick(row) {
    if (!row || !row.dataset.ref) return;
    const params = current();
    params.set("row", row.dataset.ref);
    this.go(params);
  }

  async showRow(ref) {
    const box = $("#row-detail");
    if (!ref) {
      box.hidden = true;
      return;
    }
    try {
      const row = await withProgress("Reading the row", (signal) => get(`/v1/${this.kind}/rows/${encodeURIComponent(ref)}`, null, signal));
      $("#row-title").textContent = `${this.kind === "audit" ? row.owner : row.switch} · ${row.shard} · ${row.ref}`;
      $("#row-json").textContent = JSON.stringify(row, null, 2);
      box.hidden = false;
      box.focus();
    } catch (error) {
      showError(error);
    }
  }

  closeRow() {
    const params = current();
    params.delete("row");
    this.go(params);
  }

  // The tail follows the URL: on with tail=true and a query, one stream per query.
  syncTail(params) {
    const box = $(`#${this.kind}-tail`);
    const wanted = params && params.get("tail") === "true" && this.identity && this.identity.scopes.includes("tail");
    box.checked = Boolean(wanted);
    const key = wanted ? this.queryKey : null;
    if (key === this.tailKey) return;
    this.stopTail();
    if (wanted) this.startTail(params);
  }

  stopTail() {
    if (this.tail) this.tail.abort();
    this.tail = null;
    this.tailKey = null;
    $(`#${this.kind}-tail-status`).textContent = "";
  }

  async startTail(params) {
    const controller = new AbortController();
    this.tail = controller;
    this.tailKey = this.queryKey;
    const status = (text) => {
      if (this.tail === controller) $(`#${this.kind}-tail-status`).textContent = text;
    };
    const base = apiParams(params);
    for (const name of NOT_FOR_TAIL) delete base[name];
    let after = null;
    while (!controller.signal.aborted) {
      status(after ? "reconnecting…" : "connecting…");
      try {
        await stream(`/v1/${this.kind}/tail`, after ? { ...base, after } : base, controller.signal, (event) => {
          if (event.id) after = event.id;
          if (event.event === "subscribed") status("live");
          else if (event.event === "overflow") status("fell behind: resuming");
          else if (event.event === "partial") status(`live; some shards missing: ${JSON.parse(event.data).failed_shards}`);
          else if (event.event === "message") this.prepend(JSON.parse(event.data));
        });
      } catch (error) {
        if (controller.signal.aborted) break;
        if (error instanceof ApiError && error.field === "after") after = null;
        else if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 429) {
          showError(error, this.form);
          const off = current();
          off.delete("tail");
          this.stopTail();
          this.go(off, { replace: true });
          return;
        }
      }
      await sleep(1000, controller.signal);
    }
  }

  prepend(item) {
    const hint = this.tbody.querySelector("td.hint");
    if (hint) hint.parentElement.remove();
    this.tbody.prepend(this.row(item, true));
    while (this.tbody.rows.length > MAX_TABLE_ROWS) this.tbody.lastElementChild.remove();
  }
}
