// A run's events made readable, and drawn as a Gantt chart: one row per attempt.
// The rules are the CLI's `history` (reflexr_graph/cli/history.py): the same field texts, the
// same step durations, so the console and the terminal tell a run's story the same way.
// Times are UTC, as the CLI shows them, or local time (the header's switch). Loaded before
// console.js, which uses what it defines.
"use strict";

const MS_EPOCH_FLOOR = 1e11;  // an `*_at` value above this is epoch ms (1973 in ms); below, epoch s
const LIMIT_PREFIX = "limit:";
// What a run waits for, other than a signal, as a wait's `signal` field says it (history.WAITS_FOR).
const WAITS_FOR = [[LIMIT_PREFIX, (v) => `limit ${v}`], ["child:", (v) => `child ${v}`], ["children:", (v) => `${v} children`], ["version:", (v) => `version ${v}`]];

function waitText(name) {  // '' is a durable sleep's timer
  const found = WAITS_FOR.find(([prefix]) => name.startsWith(prefix));
  return found ? found[1](name.slice(found[0].length)) : name ? `signal ${name}` : "timer";
}
const SVG_NS = "http://www.w3.org/2000/svg";

function duration(seconds) {  // 850ms, 3.2s, 4m05s, 2h03m (as history.duration)
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(s * 1000)}ms`;
  if (s < 60) return `${s.toFixed(1)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

// Times show in UTC, as the CLI shows them, unless the header's switch chose local time; the
// choice is remembered in localStorage (console.js, the switch).
const ZONE_KEY = "reflexr-time-zone";

function localZone() { return localStorage.getItem(ZONE_KEY) === "local"; }

function zoneLabel() {  // UTC, or the local offset: UTC+01:00
  if (!localZone()) return "UTC";
  const offset = -new Date().getTimezoneOffset(), abs = Math.abs(offset);
  return `UTC${offset >= 0 ? "+" : "-"}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}

function clockTime(epochS, withDate = false) {  // 18:20:01.123, or 2026-12-01 18:20:01.123
  const d = new Date(epochS * 1000);
  if (!localZone()) {
    const iso = d.toISOString();  // 2026-12-01T18:20:01.123Z
    return withDate ? `${iso.slice(0, 10)} ${iso.slice(11, 23)}` : iso.slice(11, 23);
  }
  const p = (n, width = 2) => String(n).padStart(width, "0");
  const time = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
  return withDate ? `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${time}` : time;
}

function epochS(raw) {
  if (!/^[0-9]+$/.test(raw)) return null;
  const value = Number(raw);
  return value > MS_EPOCH_FLOOR ? value / 1000 : value;
}

function fieldText(key, value, eventAt) {
  const moment = key.endsWith("_at") ? epochS(value) : null;
  if (moment !== null) {
    const delta = moment - eventAt;
    return `${key.slice(0, -3)} ${clockTime(moment)} (${delta >= 0 ? `in ${duration(delta)}` : `${duration(delta)} before`})`;
  }
  if (key === "until" && epochS(value) !== null) return fieldText("until_at", value, eventAt);
  if (key === "seq") return `checkpoint #${value}`;
  if (key === "from_run") return `forked from ${value}`;
  if (key === "state_edited") return value === "1" ? "state replaced" : "state as saved";
  if (key === "dropped") return `${value} later checkpoint(s) dropped`;
  if (key === "next_node") return `next ${value}`;
  if (key === "size" && /^[0-9]+$/.test(value)) return `${value} B`;
  if (key === "waited_ms" && /^[0-9]+$/.test(value)) return `waited ${duration(Number(value) / 1000)}`;
  if (key === "signal" && WAITS_FOR.some(([prefix]) => value.startsWith(prefix))) return waitText(value);
  return `${key}=${value}`;
}

// The event's fields in the order they were written, empty ones left out (history.details).
function eventDetails(event) {
  return Object.entries(event.fields).filter(([, v]) => v !== "").map(([k, v]) => fieldText(k, v, event.at)).join(", ");
}

const WITHIN_A_STEP = new Set(["limit_waited", "boundaries_skipped", "work_reused", "cancel_requested", "call_retried"]);
const ENDING_A_STEP = new Set(["run_progressed", "attempt_failed", "run_succeeded"]);

// How long the step(s) an event ends took, per event (null where it ends none): history.rows.
function stepDurations(events) {
  let began = null;
  return events.map((e) => {
    let took = null;
    if (e.type === "attempt_started") began = e.at;
    else if (ENDING_A_STEP.has(e.type) && began !== null) {
      took = e.at - began;
      began = e.type === "run_progressed" ? e.at : null;
    } else if (e.type !== "run_progressed" && !WITHIN_A_STEP.has(e.type)) began = null;
    return took;
  });
}

// -- the Gantt chart ------------------------------------------------------------------------

// What the chart draws, from the events alone: per attempt, its steps (bars), its waits
// (hatched), the backoff before the next attempt, and how it ended (a failure, a lapsed lease).
// `first` is the graph's first node; `now` closes what is still going on.
function ganttModel(events, first, now) {
  const rows = [];  // {attempt, spans: [{kind, label, from, to, seq?, note}], marks: [{kind, at, label}]}
  let row = null, stepFrom = null, node = first, waitFrom = null, waitNote = "";
  const lastRow = () => row || rows[rows.length - 1];
  const closeWait = (at) => {
    if (waitFrom !== null && lastRow()) lastRow().spans.push({ kind: "wait", label: waitNote, from: waitFrom, to: at });
    waitFrom = null;
  };
  for (const e of events) {
    const f = e.fields;
    if (e.type === "attempt_started") {
      closeWait(e.at);
      // `number` counts on across replays, whose attempts the store numbers afresh (`attempt`).
      row = { attempt: f.attempt || String(rows.length + 1), number: rows.length + 1, worker: f.worker || "", startedAt: e.at, spans: [], marks: [], lanes: [], tracks: [] };
      rows.push(row);
      stepFrom = e.at;
    } else if (e.type === "run_replayed" && f.from_start === "1") {
      node = first;
    } else if (e.type === "run_progressed" && row && stepFrom !== null) {
      row.spans.push({ kind: "step", label: node || "step", from: stepFrom, to: e.at, seq: f.seq });
      node = f.next_node || null;
      stepFrom = node ? e.at : null;  // no next node: the graph's end was saved, no step follows
    } else if (e.type === "limit_waited" && row && /^[0-9]+$/.test(f.waited_ms || "")) {
      row.spans.push({ kind: "wait", label: `limit ${f.key || ""}`.trim(), from: e.at - Number(f.waited_ms) / 1000, to: e.at });
    } else if (e.type === "run_succeeded" && row) {
      // Its seq, when it carries the finished checkpoint (no run_progressed told that one).
      if (stepFrom !== null) row.spans.push({ kind: "step", label: node || "step", from: stepFrom, to: e.at, seq: f.seq });
      row.marks.push({ kind: "succeeded", at: e.at, label: "succeeded" });
      row = null; stepFrom = null;
    } else if (e.type === "attempt_failed" && row) {
      const lapsed = f.reason === "abandoned";
      // A lost worker's attempt ends at its last heartbeat; the time until the reaper found the
      // lease lapsed is drawn apart: nothing ran in it.
      const beat = lapsed ? epochS(f.last_beat_at || "") : null;
      const end = beat !== null && stepFrom !== null ? Math.min(e.at, Math.max(stepFrom, beat)) : e.at;
      if (stepFrom !== null) row.spans.push({ kind: "failed", label: node || "step", from: stepFrom, to: end, note: f.reason });
      if (end < e.at) row.spans.push({ kind: "lapse", label: "no heartbeat", from: end, to: e.at });
      row.marks.push({ kind: lapsed ? "lapsed" : "failed", at: e.at, label: lapsed ? "lease lapsed (worker lost)" : `failed: ${f.reason || "?"}` });
      row = null; stepFrom = null;
    } else if (e.type === "run_retrying" && lastRow()) {
      const due = epochS(f.due_at || "");
      if (due !== null) lastRow().spans.push({ kind: "backoff", label: "backoff", from: e.at, to: due });
    } else if (e.type === "run_waiting" && row) {
      if (stepFrom !== null) row.spans.push({ kind: "step", label: node || "step", from: stepFrom, to: e.at });
      waitFrom = e.at;
      waitNote = waitText(f.signal || "");
      row = null; stepFrom = null;
    } else if (e.type === "waiting_for_worker" || e.type === "waiting_for_version") {
      const note = e.type === "waiting_for_worker" ? "a worker" : `version ${f.version || "?"}`;
      if (waitNote !== note) closeWait(e.at);  // a wait for something else ended here
      if (waitFrom === null) waitFrom = e.at;  // held again while it waited: one wait, from its start
      waitNote = note;
    } else if (["run_dead_lettered", "run_cancelled"].includes(e.type) && lastRow()) {
      if (row && stepFrom !== null) row.spans.push({ kind: "step", label: node || "step", from: stepFrom, to: e.at });
      closeWait(e.at);  // a run cancelled (or dead-lettered) while it waited waits no more
      lastRow().marks.push({ kind: "ended", at: e.at, label: e.type === "run_cancelled" ? "cancelled" : "dead-lettered" });
      row = null; stepFrom = null;
    }
  }
  if (row && stepFrom !== null) row.spans.push({ kind: "step", label: node || "step", from: stepFrom, to: now, open: true });
  if (waitFrom !== null && lastRow()) lastRow().spans.push({ kind: "wait", label: waitNote, from: waitFrom, to: now, open: true });
  return rows;
}

// Each branch of a map (GET /api/runs/<id>/branches) under the attempt that ran it: the last row
// of that number begun by then (a replay numbers its attempts afresh; a second of slack for the
// workers' clocks), on as few tracks as keep branches that overlap side by side. A branch opens
// the checkpoint that took in its result: the first saved once it ended.
const MAX_TRACKS = 16;
const CLOCK_SLACK_S = 1;

function attachLanes(rows, lanes) {
  const saved = rows.flatMap((r) => r.spans).filter((s) => s.seq).sort((a, b) => a.to - b.to);
  for (const lane of lanes) {
    const row = rows.filter((r) => r.attempt === String(lane.attempt) && r.startedAt <= lane.started_at + CLOCK_SLACK_S).pop();
    if (!row) continue;
    const holder = saved.find((s) => s.to >= lane.ended_at - CLOCK_SLACK_S);
    row.lanes.push({ ...lane, seq: holder ? holder.seq : undefined });
  }
  for (const r of rows) {
    const ends = [];  // per track, when its last branch ended
    r.tracks = r.lanes.map((l) => {
      let t = ends.findIndex((end) => end <= l.started_at);
      if (t < 0) t = Math.min(ends.length, MAX_TRACKS - 1);
      ends[t] = Math.max(ends[t] || 0, l.ended_at);
      return t;
    });
  }
  return rows;
}

function branchText(path) {  // map:7 -> 7; nested forks a:2/b:1 -> 2/1
  return path.split("/").map((part) => part.slice(part.lastIndexOf(":") + 1)).join("/");
}

function svgEl(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const FILLS = { step: "#60a5fa", failed: "#f87171", wait: "url(#gantt-hatch)", backoff: "#fdba74", lapse: "#f3f4f6" };
const LEGEND = [["step", "step"], ["failed", "failed step"], ["wait", "waiting"], ["backoff", "retry backoff"],
  ["lapse", "worker lost: last heartbeat to lapse found"]];
const MARK_COLOURS = { failed: "#dc2626", lapsed: "#7c3aed", succeeded: "#16a34a", ended: "#475569" };

// The chart as an SVG element; `onStep(seq)` is called when a step with a checkpoint is clicked.
// Presentation attributes only (the CSP refuses style attributes).
function ganttSvg(rows, onStep, width = 1100) {
  const LEFT = 110, ROW = 34, BAR = 20, TOP = 24, LANE = 15;
  const spans = rows.flatMap((r) => r.spans), marks = rows.flatMap((r) => r.marks), lanes = rows.flatMap((r) => r.lanes);
  const times = spans.flatMap((s) => [s.from, s.to]).concat(marks.map((m) => m.at), lanes.flatMap((l) => [l.started_at, l.ended_at]));
  const t0 = Math.min(...times), t1 = Math.max(t0 + 0.001, ...times);
  const x = (t) => LEFT + ((t - t0) / (t1 - t0)) * (width - LEFT - 20);
  const rowHeight = (r) => ROW + (r.tracks.length ? (Math.max(...r.tracks) + 1) * LANE + 2 : 0);
  const tops = rows.reduce((at, r) => [...at, at[at.length - 1] + rowHeight(r)], [TOP]);
  const LEGEND_ROW = 22, height = tops[rows.length] + 8 + LEGEND_ROW;
  const svg = svgEl("svg", { id: "gantt", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "font-size": 12, "font-family": "system-ui, sans-serif" },
    svgEl("defs", {}, svgEl("pattern", { id: "gantt-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      svgEl("rect", { width: 6, height: 6, fill: "#fef9c3" }), svgEl("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#ca8a04", "stroke-width": 2 }))));
  svg.append(svgEl("text", { x: LEFT, y: 14, fill: "#656d76" }, `${clockTime(t0, true)} ${zoneLabel()}`),
    svgEl("text", { x: width - 20, y: 14, fill: "#656d76", "text-anchor": "end" }, `+${duration(t1 - t0)}`));
  rows.forEach((r, i) => {
    const y = tops[i];
    const g = svgEl("g", { class: "gantt-row", "data-attempt": r.attempt });
    g.setAttribute("data-number", r.number);
    g.append(svgEl("text", { x: 4, y: y + BAR / 2 + 4, fill: "#1f2328" }, `attempt ${r.number}`),
      svgEl("line", { x1: LEFT, x2: width - 20, y1: tops[i + 1] - 4, y2: tops[i + 1] - 4, stroke: "#d0d7de" }));
    if (r.lanes.length) g.append(svgEl("text", { x: 14, y: y + BAR + LANE - 2, fill: "#656d76", "font-size": 11 }, `${r.lanes.length} branch${r.lanes.length > 1 ? "es" : ""}`));
    r.lanes.forEach((l, k) => {
      const took = duration(l.ended_at - l.started_at), at = y + BAR + 3 + r.tracks[k] * LANE;
      const w = Math.max(3, x(l.ended_at) - x(l.started_at));
      const lane = svgEl("g", { class: "gantt-lane", "data-node": l.node, "data-branch": l.branch, "data-attempt": l.attempt, ...(l.seq ? { "data-seq": l.seq, cursor: "pointer" } : {}) },
        svgEl("title", {}, `step ${l.node}, branch ${branchText(l.branch)}, attempt ${l.attempt}: ${took}`),
        svgEl("rect", { x: x(l.started_at), y: at, width: w, height: LANE - 3, rx: 2, fill: "#bfdbfe", stroke: "#2563eb", "stroke-width": 0.5 }));
      if (w > 40) lane.append(svgEl("text", { x: x(l.started_at) + 3, y: at + LANE - 6, fill: "#0b1b33", "font-size": 10 }, `${l.node} [${branchText(l.branch)}] ${took}`.slice(0, Math.floor(w / 5.5))));
      if (l.seq && onStep) lane.addEventListener("click", () => onStep(Number(l.seq)));
      g.append(lane);
    });
    for (const s of r.spans) {
      const w = Math.max(3, x(s.to) - x(s.from));
      const took = duration(s.to - s.from) + (s.open ? " so far" : "");
      const what = s.kind === "step" ? `step ${s.label}` : s.kind === "failed" ? `step ${s.label}, failed (${s.note || "?"})`
        : s.kind === "wait" ? `waiting for ${s.label}` : s.kind === "lapse" ? "no heartbeat until the lease was found lapsed" : "retry backoff";
      const bar = svgEl("g", { class: `gantt-span gantt-${s.kind}`, "data-kind": s.kind, "data-label": s.label, ...(s.seq ? { "data-seq": s.seq, cursor: "pointer" } : {}) },
        svgEl("title", {}, `${what}, attempt ${r.number}: ${took}`),
        svgEl("rect", { x: x(s.from), y: y + (s.kind === "backoff" ? 6 : 0), width: w, height: s.kind === "backoff" ? BAR - 12 : BAR, rx: 3,
          fill: FILLS[s.kind], ...spanStroke(s.kind) }));
      if (w > 40 && s.kind !== "backoff" && s.kind !== "lapse") {
        bar.append(svgEl("text", { x: x(s.from) + 4, y: y + BAR / 2 + 4, fill: s.kind === "wait" ? "#713f12" : "#0b1b33" }, `${s.label} ${took}`.slice(0, Math.floor(w / 7))));
      }
      if (s.seq && onStep) bar.addEventListener("click", () => onStep(Number(s.seq)));
      g.append(bar);
    }
    for (const m of r.marks) {
      const cx = x(m.at), cy = y + BAR / 2, c = MARK_COLOURS[m.kind];
      const shape = m.kind === "failed" || m.kind === "lapsed"
        ? svgEl("path", { d: `M${cx - 5} ${cy - 5} L${cx + 5} ${cy + 5} M${cx + 5} ${cy - 5} L${cx - 5} ${cy + 5}`, stroke: c, "stroke-width": 3 })
        : svgEl("circle", { cx, cy, r: 5, fill: c });
      g.append(svgEl("g", { class: `gantt-mark`, "data-kind": m.kind }, svgEl("title", {}, `${m.label}, attempt ${r.number}`), shape));
    }
    svg.append(g);
  });
  svg.append(ganttLegend(LEFT, height - LEGEND_ROW + 6));
  return svg;
}

function spanStroke(kind) {  // a wait's border, and a lapse's dashed one: time in which nothing ran
  if (kind === "wait") return { stroke: "#ca8a04" };
  if (kind === "lapse") return { stroke: "#7c3aed", "stroke-dasharray": "4 3" };
  return { stroke: "none" };
}

// What each kind of bar means, under the rows.
function ganttLegend(left, y) {
  const legend = svgEl("g", { id: "gantt-legend" });
  let at = left;
  for (const [kind, text] of LEGEND) {
    legend.append(svgEl("g", { "data-kind": kind }, svgEl("rect", { x: at, y, width: 14, height: 10, rx: 2, fill: FILLS[kind], ...spanStroke(kind) }),
      svgEl("text", { x: at + 18, y: y + 9, fill: "#656d76", "font-size": 11 }, text)));
    at += 30 + text.length * 6;
  }
  return legend;
}
