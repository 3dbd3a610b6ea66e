// Calls to the router's /v1 API with the session's token; errors as ApiError (status, code,
// field, message: the API's one error body).

const TOKEN_KEY = "shardlog.token";

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const value = token();
  return value ? { ...extra, Authorization: `Bearer ${value}` } : extra;
}

// URLSearchParams from an object whose values may be arrays (repeated parameters); empty
// values are left out.
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined && one !== null && one !== "") search.append(name, String(one));
    }
  }
  return search;
}

async function failure(response) {
  if (response.status === 401 && token()) {
    // The token was revoked or expired while the page was open: back to signing in.
    window.dispatchEvent(new CustomEvent("shardlog:unauthorized"));
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not the error body: a proxy's page, say
  }
  const error = body && body.error;
  if (error && typeof error.message === "string") {
    return new ApiError(response.status, error.code, error.message, error.field);
  }
  return new ApiError(response.status, "http", `${response.status} ${response.statusText}`, null);
}

export async function call(method, path, { params, body, signal } = {}) {
  const url = params ? `${path}?${query(params)}` : path;
  const init = { method, headers: headers(), signal };
  if (body !== undefined) {
    init.headers = headers({ "Content-Type": "application/json" });
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  if (!response.ok) throw await failure(response);
  if (response.status === 204) return null;
  return response.json();
}

export const get = (path, params, signal) => call("GET", path, { params, signal });

// Reads a streamed answer (an export) to its end, telling onProgress the bytes and lines read
// so far; the answer as a Blob. An export whose last line is an error body failed midway.
export async function download(path, params, signal, onProgress) {
  const response = await fetch(`${path}?${query(params)}`, { headers: headers(), signal });
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const chunks = [];
  let bytes = 0;
  let lines = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    bytes += value.length;
    for (const byte of value) if (byte === 10) lines += 1;
    onProgress(bytes, lines);
  }
  const blob = new Blob(chunks, { type: response.headers.get("content-type") || "" });
  const tail = new TextDecoder().decode(chunks.length ? chunks[chunks.length - 1].slice(-2048) : new Uint8Array());
  const last = tail.trimEnd().split("\n").pop() || "";
  if (last.startsWith('{"error"')) {
    const error = JSON.parse(last).error;
    throw new ApiError(500, error.code, `export broke off: ${error.message}`, error.field);
  }
  return { blob, lines };
}

// Server-Sent Events over fetch (EventSource cannot send the token): calls onEvent(event)
// with {event, id, data} until the stream ends or signal aborts.
export async function stream(path, params, signal, onEvent) {
  const response = await fetch(`${path}?${query(params)}`, {
    headers: headers({ Accept: "text/event-stream" }),
    signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: "message", id: null, data: "" };
      const data = [];
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "event") event.event = text;
        else if (name === "id") event.id = text;
        else if (name === "data") data.push(text);
      }
      if (data.length) {
        event.data = data.join("\n");
        onEvent(event);
      }
    }
  }
}
