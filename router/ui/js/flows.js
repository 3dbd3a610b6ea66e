// The flows view: a search view with two charts from the report API over the same query, the
// top sources by bytes (a click filters the search to that source) and bytes over time (a
// click zooms the window to that bucket).

import { get } from "./api.js";
import { horizontalBars, timeBars } from "./charts.js";
import { $, showError } from "./dom.js";
import { current, rfc3339 } from "./state.js";
import { SearchView } from "./search.js";

const BUCKETS = [
  ["1m", 60],
  ["5m", 300],
  ["15m", 900],
  ["1h", 3600],
  ["1d", 86400],
];
const MAX_BARS = 120;
// Search parameters a report does not take.
const NOT_FOR_REPORT = ["order", "limit", "cursor", "count", "consistent"];

function bucketFor(from, to) {
  const seconds = (Date.parse(to) - Date.parse(from)) / 1000;
  return BUCKETS.find(([, size]) => seconds / size <= MAX_BARS) || BUCKETS[BUCKETS.length - 1];
}

export class FlowsView extends SearchView {
  constructor(route) {
    super("flows", route);
    this.chartsKey = null;
  }

  allow(identity) {
    super.allow(identity);
    this.reports = identity.scopes.includes("reports");
  }

  clear() {
    super.clear();
    $("#flow-charts").hidden = true;
    this.chartsKey = null;
  }

  async afterPage(params, api, firstPage) {
    if (!firstPage) return;
    const note = $("#flow-charts-note");
    if (!this.reports) {
      $("#flow-charts").hidden = true;
      note.hidden = false;
      note.textContent = "Charts need a token with the reports scope.";
      return;
    }
    note.hidden = true;
    const query = { ...api };
    for (const name of NOT_FOR_REPORT) delete query[name];
    const [bucket, size] = bucketFor(this.window.from, this.window.to);
    try {
      const [talkers, histogram] = await Promise.all([
        get("/v1/flows/report", { ...query, group_by: "src_ip", metrics: "bytes", order_by: "bytes", limit: 10 }),
        get("/v1/flows/report", { ...query, group_by: "bucket", bucket, metrics: "bytes" }),
      ]);
      $("#flow-charts").hidden = false;
      horizontalBars(
        $("#top-talkers .chart"),
        talkers.groups.map((group) => ({ key: group.src_ip, value: group.bytes })),
        (source) => this.filterSource(source),
      );
      timeBars(
        $("#flow-histogram .chart"),
        histogram.groups.map((group) => ({ key: group.bucket, value: group.bytes })),
        (start) => this.zoom(start, size),
      );
    } catch (error) {
      showError(error, this.form);
    }
  }

  filterSource(source) {
    const params = current();
    for (const name of ["cursor", "row"]) params.delete(name);
    params.set("src_ip", source);
    this.go(params);
  }

  zoom(start, seconds) {
    const params = current();
    for (const name of ["cursor", "row"]) params.delete(name);
    const from = new Date(Date.parse(start));
    params.set("range", "custom");
    params.set("from", rfc3339(from));
    params.set("to", rfc3339(new Date(from.getTime() + seconds * 1000)));
    this.go(params);
  }
}
