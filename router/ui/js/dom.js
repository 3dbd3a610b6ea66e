// Small DOM helpers: elements, the error banner, the progress line, result cells.

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "className") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clearInvalid() {
  for (const input of $$("[aria-invalid=true]")) input.removeAttribute("aria-invalid");
}

export function hideError() {
  const banner = $("#error");
  banner.hidden = true;
  banner.textContent = "";
  clearInvalid();
}

// Shows an API error; the input named by its field (within form) is marked and focused.
export function showError(error, form = null) {
  if (error && error.name === "AbortError") return;
  clearInvalid();
  const banner = $("#error");
  const field = error && error.field;
  banner.textContent = field ? `${error.message} (${field})` : String((error && error.message) || error);
  banner.hidden = false;
  if (field && form) {
    const name = field.replace(/\[.*$/, "");
    const input = form.elements.namedItem(name) || form.elements.namedItem(field);
    if (input && input.setAttribute) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  }
}

// One long operation at a time shows in #progress with a Cancel button: run(signal, say)
// gets an AbortSignal and a function to update the text.
let current = null;

export async function withProgress(label, run) {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  const box = $("#progress");
  const text = $("#progress-text");
  const started = performance.now();
  let detail = "";
  const render = () => {
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    text.textContent = `${label}${detail ? `: ${detail}` : ""} (${seconds} s)`;
  };
  const timer = setInterval(render, 250);
  render();
  box.hidden = false;
  $("#cancel").onclick = () => controller.abort();
  try {
    return await run(controller.signal, (value) => {
      detail = value;
      render();
    });
  } finally {
    clearInterval(timer);
    if (current === controller) {
      current = null;
      box.hidden = true;
    }
  }
}

export function formatBytes(bytes) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = Number(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

export const formatNumber = (value) => Number(value).toLocaleString("en-US");

export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
