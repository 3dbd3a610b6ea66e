// Bar charts drawn as SVG: no library, nothing fetched. Every bar is a focusable button
// (Enter or Space picks it) with its value in a tooltip and an aria-label.

import { formatBytes } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attributes = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

function pickable(bar, label, onPick) {
  bar.setAttribute("tabindex", "0");
  bar.setAttribute("role", "button");
  bar.setAttribute("aria-label", label);
  bar.append(svg("title"));
  bar.lastChild.textContent = label;
  bar.addEventListener("click", onPick);
  bar.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      onPick();
    }
  });
}

// Horizontal bars, one per item {key, value}, largest first as given.
export function horizontalBars(container, items, onPick) {
  container.replaceChildren();
  if (!items.length) {
    container.textContent = "No flows in this window.";
    return;
  }
  const rowHeight = 22;
  const labelWidth = 190;
  const width = 560;
  const height = items.length * rowHeight + 4;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "group" });
  const most = Math.max(...items.map((item) => item.value), 1);
  items.forEach((item, index) => {
    const y = index * rowHeight + 2;
    const label = svg("text", { x: labelWidth - 6, y: y + 15, "text-anchor": "end", class: "label" });
    label.textContent = item.key;
    const barWidth = Math.max(2, ((width - labelWidth - 90) * item.value) / most);
    const bar = svg("rect", { x: labelWidth, y, width: barWidth, height: rowHeight - 5, class: "bar", "data-key": item.key });
    pickable(bar, `${item.key}: ${formatBytes(item.value)}`, () => onPick(item.key));
    const value = svg("text", { x: labelWidth + barWidth + 6, y: y + 15, class: "value" });
    value.textContent = formatBytes(item.value);
    chart.append(label, bar, value);
  });
  container.append(chart);
}

// Vertical bars over time, one per bucket {key (RFC 3339 start), value}, in time order.
export function timeBars(container, items, onPick) {
  container.replaceChildren();
  if (!items.length) {
    container.textContent = "No flows in this window.";
    return;
  }
  const width = 560;
  const height = 160;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 20}`, width, height: height + 20, role: "group" });
  const most = Math.max(...items.map((item) => item.value), 1);
  const step = width / items.length;
  items.forEach((item, index) => {
    const barHeight = Math.max(1, (height * item.value) / most);
    const bar = svg("rect", {
      x: index * step + 1,
      y: height - barHeight,
      width: Math.max(1, step - 2),
      height: barHeight,
      class: "bar",
      "data-key": item.key,
    });
    pickable(bar, `${item.key}: ${formatBytes(item.value)}`, () => onPick(item.key));
    chart.append(bar);
  });
  const first = svg("text", { x: 0, y: height + 15, class: "label" });
  first.textContent = items[0].key.replace("T", " ").slice(0, 16);
  const last = svg("text", { x: width, y: height + 15, "text-anchor": "end", class: "label" });
  last.textContent = items[items.length - 1].key.replace("T", " ").slice(0, 16);
  chart.append(first, last);
  container.append(chart);
}
