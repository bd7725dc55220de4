// The overview's charts, drawn as SVG by this script (no chart library): runs per minute as
// lines, dead letters per minute as bars stacked by reason (each reason links to its dead
// letters), and horizontal bars for counts. Presentation attributes only: the CSP refuses
// style attributes. Loaded after timeline.js (svgEl, clockTime) and before console.js.
"use strict";

const SERIES = [
  ["started", "#2563eb"], ["succeeded", "#16a34a"], ["dead", "#dc2626"], ["retried", "#ea580c"],
];
const REASON_COLOURS = ["#dc2626", "#7c3aed", "#0891b2", "#ca8a04", "#db2777", "#475569"];
const CHART = { width: 560, height: 200, left: 36, right: 10, top: 10, bottom: 24 };

// A y axis that ends on a round number at or above the largest value, whose middle tick is a
// whole number too: 4, 6, 8, 10, 20, 30, 40, 60, 80, 100, 200, 300...
function niceMax(value) {
  for (let scale = 1; ; scale *= 10) {
    for (const m of scale === 1 ? [4, 6, 8, 10] : [2, 3, 4, 6, 8, 10]) if (m * scale >= value) return m * scale;
  }
}

// The frame both charts share: the y ticks and grid, and a clock time every ten minutes.
function chartFrame(svg, minutes, until, max) {
  const { width, height, left, right, top, bottom } = CHART;
  const y = (v) => top + (1 - v / max) * (height - top - bottom);
  for (const v of [0, max / 2, max]) {
    svg.append(svgEl("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), stroke: "#d0d7de" }),
      svgEl("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end", fill: "#656d76" }, String(Math.round(v))));
  }
  const slot = (width - left - right) / minutes;
  const step = minutes > 20 ? 10 : minutes > 5 ? 5 : 1;
  for (let i = 0; i < minutes; i += step) {
    const at = until - (minutes - i) * 60;
    svg.append(svgEl("text", { x: left + i * slot, y: height - 6, fill: "#656d76" }, clockTime(at).slice(0, 5)));
  }
  return { y, slot };
}

function chartSvg(id) {
  const { width, height } = CHART;
  return svgEl("svg", { id, width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "font-size": 11, "font-family": "system-ui, sans-serif" });
}

// Runs started, succeeded, dead-lettered and retried per minute, one line each; hovering a
// minute shows its four counts.
function runsChart(activity) {
  const { minutes, until } = activity;
  const max = niceMax(Math.max(0, ...SERIES.flatMap(([name]) => activity[name])));
  const svg = chartSvg("chart-runs");
  const { y, slot } = chartFrame(svg, minutes, until, max);
  const x = (i) => CHART.left + (i + 0.5) * slot;
  for (const [name, colour] of SERIES) {
    const values = activity[name];
    const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    svg.append(svgEl("g", { class: "series", "data-series": name, "data-total": values.reduce((a, b) => a + b, 0) },
      svgEl("polyline", { points, fill: "none", stroke: colour, "stroke-width": 2, "stroke-linejoin": "round" })));
  }
  for (let i = 0; i < minutes; i++) {  // a column per minute, transparent, for its hover text
    const at = until - (minutes - i) * 60;
    const counts = SERIES.map(([name]) => `${name} ${activity[name][i]}`).join(", ");
    svg.append(svgEl("rect", { class: "minute", x: CHART.left + i * slot, y: CHART.top, width: slot, height: CHART.height - CHART.top - CHART.bottom, fill: "transparent" },
      svgEl("title", {}, `${clockTime(at).slice(0, 5)}: ${counts}`)));
  }
  return svg;
}

function legend(entries) {  // [[label, colour, href?]]
  return h("ul", { class: "legend" }, entries.map(([label, colour, href]) => h("li", {},
    svgEl("svg", { width: 10, height: 10, class: "swatch" }, svgEl("rect", { width: 10, height: 10, rx: 2, fill: colour })), href ? h("a", { href, "data-reason": label }, label) : label)));
}

// Dead letters per minute, stacked by reason; each reason's bars link to its dead letters.
function deadChart(activity) {
  const { minutes, until, dead_by_reason: byReason } = activity;
  const reasons = Object.keys(byReason);
  const totals = Array.from({ length: minutes }, (_, i) => reasons.reduce((n, r) => n + byReason[r][i], 0));
  const svg = chartSvg("chart-dead");
  const { y, slot } = chartFrame(svg, minutes, until, niceMax(Math.max(0, ...totals)));
  const below = new Array(minutes).fill(0);
  reasons.forEach((reason, k) => {
    const link = svgEl("a", { href: `#/dead/${encodeURIComponent(reason)}`, class: "reason", "data-reason": reason });
    byReason[reason].forEach((n, i) => {
      if (!n) return;
      const top = y(below[i] + n), bottom = y(below[i]);
      below[i] += n;
      link.append(svgEl("rect", { x: CHART.left + i * slot + 1, y: top, width: Math.max(1, slot - 2), height: Math.max(1, bottom - top), fill: REASON_COLOURS[k % REASON_COLOURS.length] },
        svgEl("title", {}, `${clockTime(until - (minutes - i) * 60).slice(0, 5)}: ${n} dead (${reason})`)));
    });
    svg.append(link);
  });
  return { svg, legend: legend(reasons.map((r, k) => [r, REASON_COLOURS[k % REASON_COLOURS.length], `#/dead/${encodeURIComponent(r)}`])) };
}

// Counts as horizontal bars: [[label, count, colour, href?]].
function barList(id, rows) {
  const max = Math.max(1, ...rows.map(([, n]) => n));
  const width = 360, row = 22, left = 90;
  const svg = svgEl("svg", { id, width, height: rows.length * row + 4, role: "img", "font-size": 12, "font-family": "system-ui, sans-serif" });
  rows.forEach(([label, n, colour, href], i) => {
    const g = svgEl("g", { class: "bar", "data-label": label, "data-count": n },
      svgEl("text", { x: 0, y: i * row + 15, fill: "#1f2328" }, label),
      svgEl("rect", { x: left, y: i * row + 4, width: Math.max(n ? 2 : 0, ((width - left - 40) * n) / max), height: row - 8, rx: 2, fill: colour }),
      svgEl("text", { x: left + ((width - left - 40) * n) / max + 6, y: i * row + 15, fill: "#656d76" }, String(n)));
    svg.append(href ? svgEl("a", { href }, g) : g);
  });
  return svg;
}
