// The console's state is its URL: the view and the query (?view=audit&owner=a&range=1h…).
// Forms are filled from it and write it back, so a link shares a search and Back undoes one.

export const RANGES = { "15m": 15 * 60, "1h": 3600, "24h": 86400, "7d": 7 * 86400 };
// Inputs whose text lists several values: keys separated by commas, patterns one per line.
const LISTS = { owner: /\s*,\s*/, switch: /\s*,\s*/, q: /\n/ };
// Only the console's own parameters and the API's: nothing else is carried along.
const UI_ONLY = new Set(["view", "range", "row", "tail"]);
// The search forms' defaults (index.html): newest first, 50 rows.
const FORM_DEFAULTS = { order: "desc", limit: "50" };

export function current() {
  return new URLSearchParams(location.search);
}

export function view() {
  return current().get("view") || "";
}

export function navigate(params, { replace = false } = {}) {
  const url = `${location.pathname}?${params}`;
  if (url === `${location.pathname}${location.search}`) return false;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  return true;
}

export function rfc3339(date) {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

// The window a relative range means now. `to` is a minute ahead: rows stamped by clocks a
// little ahead of this one still show.
export function windowOf(range) {
  const now = Date.now();
  return {
    from: rfc3339(new Date(now - RANGES[range] * 1000)),
    to: rfc3339(new Date(now + 60 * 1000)),
  };
}

// The URL parameters of a form as the user filled it in.
export function fromForm(form, viewName) {
  const params = new URLSearchParams({ view: viewName });
  for (const element of form.elements) {
    if (!element.name || element.disabled) continue;
    if (element.type === "checkbox") {
      if (element.checked) params.append(element.name, "true");
      continue;
    }
    const text = element.value.trim();
    if (!text) continue;
    const separator = LISTS[element.name];
    for (const value of separator ? text.split(separator) : [text]) {
      if (value.trim()) params.append(element.name, value.trim());
    }
  }
  if (params.get("range") !== "custom") {
    params.delete("from");
    params.delete("to");
  }
  return params;
}

// Fills a form from URL parameters (inputs the URL does not name get their default).
export function fillForm(form, params) {
  for (const element of form.elements) {
    if (!element.name) continue;
    const values = params.getAll(element.name);
    if (element.type === "checkbox") element.checked = values.includes("true");
    else if (element.tagName === "SELECT") {
      const wanted = values[0];
      const option = [...element.options].find((o) => o.value === wanted);
      element.value = option ? wanted : (element.querySelector("option[selected]") || element.options[0]).value;
    } else if (values.length) {
      element.value = values.join(element.name === "q" ? "\n" : ", ");
    } else element.value = element.defaultValue;
  }
  syncRange(form);
}

// From and To are typed only for an absolute window.
export function syncRange(form) {
  const custom = form.elements.range.value === "custom";
  form.elements.from.disabled = !custom;
  form.elements.to.disabled = !custom;
}

// The API's parameters for a URL's query: the window resolved (a cursor keeps the window it
// was issued for, carried in the URL as from/to), the console's own parameters dropped.
export function apiParams(params) {
  const out = {};
  for (const [name, value] of params) {
    if (UI_ONLY.has(name)) continue;
    (out[name] = out[name] || []).push(value);
  }
  // What the form shows when the URL does not say (a shared link may name only the owner and
  // the window): the API's own defaults differ (oldest first, 100 rows).
  for (const [name, value] of Object.entries(FORM_DEFAULTS)) if (!out[name]) out[name] = [value];
  const range = params.get("range") || "24h";
  if (range !== "custom" && !(params.get("cursor") && params.get("from"))) {
    Object.assign(out, windowOf(range));
  }
  return out;
}
