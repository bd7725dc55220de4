// The reflexr-graph console: a small script over the HTTP API, with no build step.
// Every request carries the API token as a bearer header, as any API client's would (no cookies).
// Pages: #/runs, #/run/<id>, #/dead, #/graphs, #/workers, #/approvals. Values are always set as text, never as HTML.
"use strict";

const TOKEN_KEY = "reflexr-api-token";
const POLL_MS = 1000;
const ACTIVE = ["queued", "running", "retrying", "waiting"];
const STATUSES = ["queued", "running", "retrying", "waiting", "succeeded", "dead", "cancelled"];

let stopPage = () => {};  // what the current page must stop (timers, streams) when another opens

// -- helpers ----------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) el.append(c instanceof Node ? c : String(c ?? ""));
  return el;
}

function badge(status) { return h("span", { class: `badge s-${status}`, "data-status": status }, status); }
function when(s) { return s ? clockTime(s, true).slice(0, 19) : "-"; }  // in the zone the header's switch shows
function json(v) { return JSON.stringify(v, null, 2); }
function notice(text) {
  const el = document.getElementById("notice");
  el.hidden = !text;
  el.textContent = text || "";
}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  // Sent with every request that changes something, body or not: the API refuses those without
  // it (415), which no cross-site form can send.
  if (options.body !== undefined || (options.method && options.method !== "GET")) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { ...options, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  if (res.status === 401) notice("This server needs its API token: enter it at the top right.");
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = (await res.json()).detail || detail; } catch (_) { /* not a problem document */ }
    throw new Error(`${res.status}: ${detail}`);
  }
  return options.raw ? res : res.json();
}

function confirmDialog(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

function repeat(fn, every = POLL_MS) {  // run fn now and every `every` ms until the page changes
  let timer = null, stopped = false;
  const tick = async () => {
    try { await fn(); } catch (e) { notice(e.message); }
    if (!stopped) timer = setTimeout(tick, every);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

// -- Server-Sent Events over fetch (EventSource cannot send the Authorization header) --------

// A stream that ends without its "end" event (the server stopped or restarted) is followed again
// from the last event seen, as an EventSource would, until the run ends or the page closes.
const RECONNECT_MS = 1000;
const FULL_RETRY_MS = 5000;

// ``path`` is the run's events (/api/runs/<id>/events) or its emitted items (/api/runs/<id>/stream).
async function follow(path, onEvent, signal) {
  let lastId = null;
  for (;;) {
    let ended = false, wait = RECONNECT_MS;
    try {
      lastId = await followOnce(path, (type, data) => {
        if (type === "end") ended = true;
        return onEvent(type, data);
      }, signal, lastId);
    } catch (e) {
      // The server holds as many streams as it may (429): follow again once one may be free.
      if (e.message.startsWith("429: ")) wait = FULL_RETRY_MS;
      else if (signal.aborted || /^[0-9]{3}: /.test(e.message)) throw e;  // closed, or refused: not a lost stream
    }
    if (ended || signal.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

async function followOnce(path, onEvent, signal, lastId) {
  const headers = { Accept: "text/event-stream" };
  if (lastId) headers["Last-Event-ID"] = lastId;
  const res = await api(path, { headers, signal, raw: true });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return lastId;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message", data = null;
      for (const line of frame.split("\n")) {
        if (line.startsWith("id: ")) lastId = line.slice(4);
        else if (line.startsWith("event: ")) type = line.slice(7);
        else if (line.startsWith("data: ")) data = line.slice(6);
      }
      if (data !== null) onEvent(type, JSON.parse(data));
    }
  }
}

// -- diagrams -----------------------------------------------------------------------------

let diagramCount = 0;

function edgesOf(mermaidText) {
  const edges = [];
  for (const line of mermaidText.split("\n")) {
    const m = line.trim().match(/^(\S+)\s+-->\s+([^\s:]+)/);
    if (m) edges.push([m[1], m[2]]);
  }
  return edges;
}

// Each node's mark from the run and its events: done, current, failed or waiting. A fork ran
// only from `forkStart` (the next node of the checkpoint it was forked from; null when that
// checkpoint was finished, undefined when it is no longer kept): the source run's steps before
// it are never marked done in the fork.
function nodeMarks(mermaidText, run, events, forkStart) {
  const edges = edgesOf(mermaidText);
  const preds = {}, succs = {};
  for (const [a, b] of edges) {
    (preds[b] = preds[b] || []).push(a);
    (succs[a] = succs[a] || []).push(b);
  }
  const first = (succs["[*]"] || [])[0];
  const reached = events.filter((e) => e.type === "run_progressed").map((e) => e.fields.next_node).filter(Boolean);
  const at = run.next_node || (run.status === "succeeded" ? null : first);
  const marks = {};
  const forked = Boolean(run.forked_from);
  const markBack = (node) => {  // a node with one way in was passed through that way
    if (forked && (!forkStart || node === forkStart)) return;  // the fork did not pass through what came before
    let p = preds[node];
    while (p && p.length === 1 && p[0] !== "[*]" && !marks[p[0]]) {
      marks[p[0]] = "done";
      if (forked && p[0] === forkStart) break;
      p = preds[p[0]];
    }
  };
  for (const node of reached) if (node !== at) { marks[node] = "done"; }
  for (const node of Object.keys(marks)) markBack(node);
  if (run.status === "succeeded") { for (const node of reached) marks[node] = "done"; markBack("[*]"); }
  if (at && at !== "[*]") {
    markBack(at);
    const now = { dead: "failed", waiting: "waiting", queued: "current", running: "current", retrying: "current" };
    if (now[run.status]) marks[at] = now[run.status];
  }
  delete marks["[*]"];
  return marks;
}

// The CSP lets styles come from the app only (style-src 'self'), so the <style> and style=""
// that mermaid writes into its SVG would be refused. They are carried over through the CSSOM,
// which the CSP leaves to the page's own script: the rules as a constructed style sheet, each
// style attribute as properties set one by one.
const diagramSheets = new Map();  // diagram id -> its constructed sheet, while it is on the page
const scratch = new CSSStyleSheet();  // parses style attributes; never adopted

function placeDiagram(container, id, svgText) {
  // Parsed in an inert document (mermaid's output, sanitized by it: securityLevel strict).
  const svg = new DOMParser().parseFromString(svgText, "text/html").body.querySelector("svg");
  const sheet = new CSSStyleSheet();
  sheet.replaceSync([...svg.querySelectorAll("style")].map((s) => s.textContent).join("\n"));
  svg.querySelectorAll("style").forEach((s) => s.remove());
  const styled = [...svg.querySelectorAll("[style]")].concat(svg.hasAttribute("style") ? [svg] : []).map((el) => {
    const declared = el.getAttribute("style");
    el.removeAttribute("style");
    return [el, declared];
  });
  container.replaceChildren(document.adoptNode(svg));
  for (const [el, declared] of styled) {
    scratch.replaceSync(`x{${declared}}`);
    const style = scratch.cssRules.length ? scratch.cssRules[0].style : { length: 0 };
    for (let i = 0; i < style.length; i++) {
      el.style.setProperty(style[i], style.getPropertyValue(style[i]), style.getPropertyPriority(style[i]));
    }
  }
  diagramSheets.set(id, sheet);
  for (const shown of [...diagramSheets.keys()]) if (!document.getElementById(shown)) diagramSheets.delete(shown);
  document.adoptedStyleSheets = [...diagramSheets.values()];
}

// Mermaid draws a map (<<fork>>) and a join (<<join>>) as bare bars: each becomes a box that
// says what it is, in its own colour.
function labelForksAndJoins(mermaidText) {
  const named = [];
  const text = mermaidText.replace(/^(\s*)state (\S+) <<(fork|join)>>\s*$/gm, (_, indent, id, kind) => {
    named.push(id);
    return `${indent}state "${kind === "fork" ? `${id}: map, fan out` : `${id}: join`}" as ${id}`;
  });
  if (!named.length) return text;
  return `${text}\n  classDef mapjoin fill:#ede9fe,stroke:#7c3aed,stroke-dasharray:4 2\n${named.map((id) => `  class ${id} mapjoin`).join("\n")}`;
}

async function renderDiagram(container, mermaidText, marks = {}) {
  let text = labelForksAndJoins(mermaidText);
  const lines = Object.entries(marks).map(([node, mark]) => `  class ${node} ${mark}`);
  if (lines.length) {
    text += "\n  classDef done fill:#d1fadf,stroke:#16a34a\n  classDef current fill:#dbeafe,stroke:#2563eb,stroke-width:3px";
    text += "\n  classDef failed fill:#fee2e2,stroke:#dc2626\n  classDef waiting fill:#fef9c3,stroke:#ca8a04\n" + lines.join("\n");
  }
  try {
    const id = `diagram-${++diagramCount}`;
    const { svg } = await window.mermaid.render(id, text);
    placeDiagram(container, id, svg);
  } catch (e) {
    container.replaceChildren(h("pre", {}, mermaidText));
  }
  const legend = h("ul", { class: "marks", id: "node-marks" },
    Object.entries(marks).map(([node, mark]) => h("li", { class: `m-${mark}`, "data-node": node, "data-mark": mark }, `${node}: ${mark}`)));
  container.append(legend);
}

// -- forms from JSON Schema (enqueue a run; a waiting run's signal) ------------------------

function resolve(schema, root) {
  if (schema && schema.$ref && schema.$ref.startsWith("#/$defs/")) return root.$defs[schema.$ref.slice(8)];
  return schema || {};
}

// An Optional[X] (anyOf X and null, as pydantic writes it) is X that may be left empty.
function unwrapOptional(prop, root) {
  const options = Array.isArray(prop.anyOf) ? prop.anyOf.map((o) => resolve(o, root)) : null;
  if (!options || options.length !== 2) return { prop, optional: false };
  const other = options.filter((o) => o.type !== "null");
  return other.length === 1 ? { prop: { ...other[0], default: prop.default }, optional: true } : { prop, optional: false };
}

// A form for an object schema's properties (strings, numbers, booleans; anything else as JSON),
// or one JSON field for any other schema. Each field starts at its schema's default, so what it
// shows is what is sent; read() gives the value, or throws naming the field.
function schemaForm(schema, idPrefix) {
  const root = schema;
  const obj = resolve(schema, root);
  const fields = [];
  if (obj.type === "object" && obj.properties) {
    for (const [name, raw] of Object.entries(obj.properties)) {
      const { prop, optional } = unwrapOptional(resolve(raw, root), root);
      const kind = ["string", "integer", "number", "boolean"].includes(prop.type) ? prop.type : "json";
      const id = `${idPrefix}-${name}`;
      const input = kind === "boolean" ? h("input", { type: "checkbox", id, name })
        : kind === "json" ? h("textarea", { id, name, rows: 3 })
        : h("input", { id, name, type: kind === "string" ? "text" : "number", step: kind === "integer" ? "1" : "any" });
      const fallback = "default" in raw ? raw.default : prop.default;  // a $ref'd property keeps its default beside the $ref
      if (fallback !== undefined && !(fallback === null && kind !== "json")) {  // None: the field starts empty
        if (kind === "boolean") input.checked = fallback === true;
        else input.value = kind === "json" ? JSON.stringify(fallback) : String(fallback);
        input.dataset.default = JSON.stringify(fallback);
      }
      fields.push({ name, kind, input, optional, required: (obj.required || []).includes(name) });
    }
  } else {
    fields.push({ name: null, kind: "json", input: h("textarea", { id: `${idPrefix}-json`, rows: 4 }), required: true });
  }
  // Each label on its own line above its input (a checkbox beside its label), tied by for/id.
  const el = h("div", { class: "schema-form" }, fields.map((f) => {
    const hint = f.kind === "json" && f.name ? " (JSON)" : f.optional ? " (optional)" : "";
    const label = h("label", { for: f.input.id }, f.name || "value (JSON)", f.required ? " *" : "", hint ? h("span", { class: "hint" }, hint) : "");
    return h("div", { class: `field${f.kind === "boolean" ? " check" : ""}`, "data-field": f.name || "" }, label, f.input);
  }));
  const read = () => {
    const parse = (f) => {
      const v = f.input.value;
      if (f.kind === "boolean") return f.input.checked;
      if (v === "") return undefined;
      if (f.kind === "integer" || f.kind === "number") return Number(v);
      if (f.kind === "json") {
        try { return JSON.parse(v); } catch (_) { throw new Error(`${f.name || "value"} is not valid JSON`); }
      }
      return v;
    };
    if (fields.length === 1 && fields[0].name === null) return parse(fields[0]);
    const out = {};
    for (const f of fields) { const v = parse(f); if (v !== undefined) out[f.name] = v; }
    return out;
  };
  return { el, read };
}

// -- pages ----------------------------------------------------------------------------------

// As the CLI shows them (cli/render.py): the latest attempt's number, as the timeline numbers it,
// and how many of the attempts so far count toward max attempts.
const attemptCell = (r) => `${r.attempt} (${r.attempts}/${r.max_attempts})`;
function attemptText(r) {
  const uncounted = [];
  if (r.suspensions) uncounted.push(`${r.suspensions} ended waiting`);
  if (r.interruptions) uncounted.push(`${r.interruptions} interrupted by shutdowns or Redis`);
  const more = uncounted.length ? `; ${uncounted.join(" and ")}, not counted` : "";
  return `${r.attempt} (${r.attempts}/${r.max_attempts} counted toward max attempts${more})`;
}

// How long a run took, or for one still going on, how long so far: a waiting run has not
// "taken" the time since its last update.
function runDuration(r, now = Date.now() / 1000) {
  if (["succeeded", "dead", "cancelled"].includes(r.status)) return duration(Math.max(0, r.updated_at - r.created_at));
  return `${duration(Math.max(0, now - r.created_at))} so far`;
}

const TEXT_FILTER_MS = 250;  // the list is read again once typing pauses this long

// The runs, newest first (by creation; by update within a status), filtered by status, graph,
// tags (key=value, several apart by spaces or commas: GET /api/runs?tag=, every one carried) and
// text (GET /api/runs?q=: a run id prefix or part of a graph's name). `preset` is a status the
// overview links to (#/runs/<status>).
async function runsPage(view, preset = "") {
  const status = h("select", { id: "filter-status" }, h("option", { value: "" }, "any status"), STATUSES.map((s) => h("option", { value: s, selected: s === preset }, s)));
  const graph = h("select", { id: "filter-graph" }, h("option", { value: "" }, "any graph"));
  const text = h("input", { id: "filter-text", type: "search", placeholder: "run id prefix or graph", autocomplete: "off" });
  const tags = h("input", { id: "filter-tag", type: "search", placeholder: "key=value", autocomplete: "off" });
  const body = h("tbody", { id: "runs-body" });
  const more = h("p", { class: "muted", id: "runs-more" });
  view.replaceChildren(h("h1", {}, "Runs"),
    h("div", { class: "filters" }, h("label", { for: "filter-status" }, "Status"), status, h("label", { for: "filter-graph" }, "Graph"), graph,
      h("label", { for: "filter-tag" }, "Tags"), tags, h("label", { for: "filter-text" }, "Search"), text),
    h("table", { id: "runs" }, h("thead", {}, h("tr", {}, ["run", "graph", "status", "attempt", "next node", "created", "duration"].map((t) => h("th", {}, t)))), body), more);
  api("/api/graphs").then((gs) => gs.forEach((g) => graph.append(h("option", { value: g.graph.name }, g.graph.name)))).catch(() => {});
  let asked = 0;
  const refresh = async () => {
    const q = new URLSearchParams({ limit: "100" });
    if (status.value) q.set("status", status.value);
    if (graph.value) q.set("graph", graph.value);
    if (text.value.trim()) q.set("q", text.value.trim());
    for (const tag of tags.value.split(/[\s,]+/).filter(Boolean)) q.append("tag", tag);
    const mine = ++asked;
    const page = await api(`/api/runs?${q}`);
    if (mine !== asked) return;  // a newer filter's answer is on its way
    const now = Date.now() / 1000;
    body.replaceChildren(...page.runs.map((r) => h("tr", { "data-run": r.run_id },
      h("td", { class: "mono run-id" }, h("a", { href: `#/run/${r.run_id}` }, r.run_id)),
      h("td", {}, r.graph, ...Object.entries(r.tags || {}).map(([k, v]) => h("span", { class: "tag" }, `${k}=${v}`))), h("td", {}, badge(r.status)),
      h("td", { class: "attempt" }, attemptCell(r)), h("td", {}, r.next_node || "-"), h("td", { class: "created nowrap" }, when(r.created_at)),
      h("td", { class: "duration nowrap" }, runDuration(r, now)))));
    more.textContent = page.runs.length === 0 ? "No run matches." : page.cursor && q.has("q") ? "Only the newest runs were searched: narrow the search by status or graph." : "";
    notice("");
  };
  let typing = null;
  for (const box of [text, tags]) box.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(refresh, TEXT_FILTER_MS); });
  status.addEventListener("change", refresh);
  graph.addEventListener("change", refresh);
  return repeat(refresh);
}

async function runPage(view, runId) {
  const controller = new AbortController();
  let run = await api(`/api/runs/${encodeURIComponent(runId)}`);
  const graph = await api(`/api/graphs/${encodeURIComponent(run.graph)}`).catch(() => null);
  const forkStart = run.forked_from ? await forkStartOf(run) : undefined;
  const events = [];
  let lanes = [], lanesAsked = 0;
  const summary = h("table", { class: "kv", id: "run-summary" });
  const result = h("div", { id: "run-result" });
  const timeline = h("tbody", { id: "timeline" });
  const diagram = h("div", { class: "diagram", id: "run-diagram" });
  const checkpoints = h("div", { id: "run-checkpoints" });
  const gantt = h("div", { class: "gantt", id: "run-gantt" });
  const signal = h("div", { id: "run-signal" });
  const asked = h("div", { id: "run-approvals" });
  const emitted = h("pre", { id: "run-stream", class: "stream" });
  const cancel = h("button", { id: "cancel", class: "danger" }, "Cancel");
  const replay = h("button", { id: "replay" }, "Replay");
  const fromStart = h("input", { type: "checkbox", id: "from-start" });
  view.replaceChildren(h("h1", {}, "Run ", h("span", { class: "mono run-id" }, runId)),
    h("div", { class: "actions" }, cancel, replay, h("label", {}, fromStart, " from the start")),
    h("div", { class: "grid" }, h("div", {}, summary, result, h("h2", {}, "Checkpoints"), checkpoints, signal, asked),
      h("div", {}, h("h2", {}, "Graph"), diagram)),
    h("h2", {}, "Stream"), emitted,
    h("h2", {}, "Attempts"), gantt,
    h("h2", {}, "Timeline"), h("table", { id: "timeline-table" }, h("thead", {}, h("tr", {}, [`time (${zoneLabel()})`, "took", "event", "details"].map((t) => h("th", {}, t)))), timeline));

  const render = async () => {
    summary.replaceChildren(...[
      ["status", badge(run.status)], ["graph", run.graph], ["version", h("span", { class: "mono", id: "run-version" }, run.version || "-")], ["attempt", attemptText(run)],
      ["created", when(run.created_at)], ["updated", when(run.updated_at)],
      [["succeeded", "dead", "cancelled"].includes(run.status) ? "took" : "age", runDuration(run)], ["next node", run.next_node || "-"], ["reason", run.reason || "-"],
      ...(run.last_failure ? [["last failure", h("span", { id: "run-last-failure" }, `attempt ${run.last_failure.attempt} at ${when(run.last_failure.time)}: ${run.last_failure.reason}${run.last_failure.error ? `, ${run.last_failure.error}` : ""}`)]] : []),
      ...(run.forked_from ? [["forked from", [h("a", { href: `#/run/${run.forked_from}`, class: "mono run-id", id: "forked-from" }, run.forked_from), ` at checkpoint #${run.forked_at_seq}`]]] : []),
      ...(run.parent_run_id ? [["parent", h("a", { href: `#/run/${run.parent_run_id}`, class: "mono run-id", id: "run-parent" }, run.parent_run_id)]] : []),
      ...((run.children || []).length ? [["children", h("ul", { id: "run-children", class: "plain" }, ...run.children.map((c) => h("li", {}, h("a", { href: `#/run/${c}`, class: "mono run-id" }, c))))]] : []),
      ...(run.upgrade_to ? [["upgrade", h("span", { id: "run-upgrade" }, `moves to version ${run.upgrade_to} when its attempt ends; it ${run.upgrade_resumes ? "resumes from its checkpoint if the new graph reads it, else starts over" : "starts over from its first step"}`)]] : []),
      ...(run.status === "waiting" ? [["waiting for", run.waiting_for || "a timer"], ["wakes", run.wake_at ? when(run.wake_at) : "when signalled"]] : []),
    ].map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v))));
    const parts = [];  // built first and swapped in at once, so nothing flickers away meanwhile
    if (run.status === "succeeded") parts.push(h("h2", {}, "Output"), h("pre", { id: "run-output" }, json(run.output)));
    if (run.error) parts.push(h("h2", {}, "Error"), h("pre", { id: "run-error" }, run.error));
    if (run.status === "dead") {
      const dead = await api(`/api/dead-letters/${encodeURIComponent(runId)}`).catch(() => null);
      if (dead && dead.traceback) parts.push(h("h2", {}, "Traceback of the last failed attempt"), h("pre", { id: "run-traceback" }, dead.traceback));
    }
    result.replaceChildren(...parts);
    cancel.disabled = !["queued", "running", "retrying", "waiting"].includes(run.status);
    replay.disabled = !["dead", "cancelled"].includes(run.status);
    renderSignalForm(signal, run, graph);
    renderEventWaits(asked, run).catch((e) => notice(e.message));
    renderCheckpoints(checkpoints, run).catch((e) => notice(e.message));  // its own read; nothing waits on it
    renderGantt(gantt, run, graph, events, lanes);
    readLanes();
    if (graph) await renderDiagram(diagram, graph.graph.mermaid, nodeMarks(graph.graph.mermaid, run, events, forkStart));
  };
  // A map's branches (GET /api/runs/<id>/branches), which no event announces: read again with each
  // event and each second while the run is on, and drawn as lanes under their attempt's row.
  const readLanes = async () => {
    const mine = ++lanesAsked;
    const found = await api(`/api/runs/${encodeURIComponent(runId)}/branches`).catch(() => null);
    if (mine !== lanesAsked) return;  // a newer read's answer is on its way
    if (found) lanes = found;
    renderGantt(gantt, run, graph, events, lanes);
  };
  const act = async (what, question, body) => {
    if (!(await confirmDialog(question))) return;
    try { run = await api(`/api/runs/${encodeURIComponent(runId)}/${what}`, { method: "POST", body }); notice(""); await render(); stream(); }
    catch (e) { notice(e.message); }
  };
  cancel.addEventListener("click", () => act("cancel", `Cancel run ${runId}? A running attempt stops at its next step boundary.`));
  replay.addEventListener("click", () => act("replay", fromStart.checked
    ? `Replay run ${runId} from the start, discarding its checkpoint?` : `Replay run ${runId} from its last checkpoint?`, { from_start: fromStart.checked }));

  let streaming = false;
  const stream = () => {
    if (streaming) return;
    streaming = true;
    events.length = 0;
    timeline.replaceChildren();
    follow(`/api/runs/${encodeURIComponent(runId)}/events`, async (type, data) => {
      if (type === "end") { run = data; await render(); return; }
      events.push(data);
      timeline.append(timelineRow(events));
      run = await api(`/api/runs/${encodeURIComponent(runId)}`);
      await render();
    }, controller.signal).catch((e) => { if (!controller.signal.aborted) notice(e.message); }).finally(() => { streaming = false; });
  };
  await render();
  stream();
  followItems(emitted, runId, controller.signal);
  // The step under way grows between events, and a map's branches end: drawn again each second while the run is on.
  const ticker = setInterval(() => { if (ACTIVE.includes(run.status)) readLanes(); }, POLL_MS);
  return () => { controller.abort(); clearInterval(ticker); };
}

// Where a fork began: the next node of its copy of the checkpoint it was forked from.
async function forkStartOf(run) {
  const kept = await api(`/api/runs/${encodeURIComponent(run.run_id)}/checkpoints`).catch(() => []);
  const seed = kept.find((c) => c.seq === run.forked_at_seq);
  return seed ? (seed.finished ? null : seed.next_node) : undefined;
}

// What the run's steps emit (GET /api/runs/{id}/stream), appended as it comes: text runs on as a
// chat shows it, other values as JSON lines. A restart item strikes through what that node, branch
// and durable call emitted from its void_from offset on, and says on a line of its own that it runs again.
function followItems(box, runId, signal) {
  box.replaceChildren(h("span", { class: "muted", id: "stream-empty" }, "Nothing emitted yet."));
  const spans = [];
  follow(`/api/runs/${encodeURIComponent(runId)}/stream`, (type, item) => {
    if (type === "end") {  // the run ended: if nothing came, nothing will
      const empty = document.getElementById("stream-empty");
      if (empty) empty.textContent = "This run emitted nothing.";
      return;
    }
    document.getElementById("stream-empty")?.remove();
    if (item.restart) {
      for (const s of spans) {
        if (s.node === item.node && s.branch === item.branch && s.call === item.call && s.offset >= item.value.void_from) s.el.classList.add("void");
      }
      const where = item.branch ? ` [${item.branch}]` : "";
      const what = item.call ? `call ${item.call} of step ${item.node}` : `step ${item.node}`;
      box.append(h("span", { class: "restart", "data-offset": item.offset },
        `\n↻ ${what}${where} runs again (attempt ${item.attempt}): what it emitted above is void\n`));
      return;
    }
    const text = typeof item.value === "string" ? item.value : `${JSON.stringify(item.value)}\n`;
    const el = h("span", { class: "item", "data-offset": item.offset, "data-node": item.node, title: `${item.topic} · ${item.node} · attempt ${item.attempt}` }, text);
    spans.push({ el, node: item.node, branch: item.branch, call: item.call, offset: item.offset });
    box.append(el);
  }, signal).catch((e) => { if (!signal.aborted) notice(e.message); });
}

// The newest event's row, as the CLI's history shows it: a UTC time (with the date where the
// day differs from the first event's), how long the step it ends took, its fields in words.
function timelineRow(events) {
  const e = events[events.length - 1];
  const took = stepDurations(events)[events.length - 1];
  const otherDay = events.length === 1 || clockTime(e.at, true).slice(0, 10) !== clockTime(events[0].at, true).slice(0, 10);
  return h("tr", { "data-event": e.type }, h("td", { class: "mono nowrap" }, clockTime(e.at, otherDay)),
    h("td", { class: "took" }, took === null ? "" : duration(took)), h("td", {}, e.type), h("td", { class: "details" }, eventDetails(e)));
}

// The run's attempts as a Gantt chart (timeline.js), drawn again with each event; clicking a
// step opens the checkpoint saved at its end in the checkpoints panel.
function renderGantt(container, run, graph, events, lanes = []) {
  const first = graph ? (edgesOf(graph.graph.mermaid).find(([a]) => a === "[*]") || [])[1] : null;
  const rows = attachLanes(ganttModel(events, first || null, Date.now() / 1000), lanes);
  if (!rows.length) { container.replaceChildren(h("p", { class: "muted" }, "No attempt has started yet.")); return; }
  container.replaceChildren(ganttSvg(rows, (seq) => {
    const detail = document.getElementById("checkpoint-detail");
    if (detail) showCheckpoint(detail, run.run_id, seq);
  }, Math.max(600, (container.clientWidth || 1116) - 20)));
}

// The checkpoints a run keeps (GET /api/runs/{id}/checkpoints), read again when a new one is
// saved. "Show" opens one with its values and a state editor; "Fork" creates a new run that
// resumes from it (POST /api/runs/{id}/fork) and opens it.
async function renderCheckpoints(container, run) {
  const key = `${run.checkpoints}:${run.status}`;
  if (container.dataset.key === key) return;  // unchanged: keep an open detail and its edits
  container.dataset.key = key;
  const kept = await api(`/api/runs/${encodeURIComponent(run.run_id)}/checkpoints`).catch(() => []);
  if (container.dataset.key !== key) return;  // a newer checkpoint arrived meanwhile: its read shows it
  if (!kept.length) { container.replaceChildren(h("p", {}, "None saved yet: a retry starts from the first step.")); return; }
  const detail = h("div", { id: "checkpoint-detail" });
  const rows = kept.map((c) => {
    const show = h("button", { class: "show-checkpoint", "data-seq": c.seq }, "Show");
    show.addEventListener("click", () => showCheckpoint(detail, run.run_id, c.seq));
    return h("tr", { "data-seq": c.seq }, h("td", {}, `#${c.seq}`), h("td", {}, when(c.saved_at)),
      h("td", {}, c.finished ? "(finished)" : c.next_node), h("td", {}, `${c.size} B`),
      h("td", {}, c.attempt ? String(c.attempt) : "fork"), h("td", {}, show));
  });
  container.replaceChildren(h("table", { id: "checkpoints" },
    h("thead", {}, h("tr", {}, ["seq", "saved", "next node", "size", "attempt", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows)), detail);
}

async function showCheckpoint(container, runId, seq) {
  let shown;
  try { shown = await api(`/api/runs/${encodeURIComponent(runId)}/checkpoints/${seq}`); } catch (e) { notice(e.message); return; }
  const values = shown.finished ? { output: shown.output } : { inputs: shown.inputs, next_inputs: shown.next_inputs };
  const state = h("textarea", { id: "fork-state", rows: 8, spellcheck: "false" });
  state.value = json(shown.state);
  const fork = h("button", { id: "fork" }, `Fork from #${seq}`);
  fork.addEventListener("click", async () => {
    let edited;
    try { edited = JSON.parse(state.value); } catch (_) { notice("The state is not JSON: fix it, or put back the checkpoint's."); return; }
    if (!(await confirmDialog(`Create a new run that resumes from checkpoint #${seq} of ${runId}, with this state?`))) return;
    try {
      const created = await api(`/api/runs/${encodeURIComponent(runId)}/fork`, { method: "POST", body: { from_seq: seq, state: edited } });
      notice("");
      location.hash = `#/run/${created.run_id}`;
    } catch (e) { notice(e.message); }
  });
  container.replaceChildren(h("h3", {}, `Checkpoint #${seq}`), h("pre", { id: "checkpoint-values" }, json(values)),
    ...(shown.finished ? [] : [h("label", { for: "fork-state" }, "State (edit it to fork with another)"), state]),
    h("div", { class: "actions" }, fork));
}

// A waiting run's signal, as a form generated from the signal's JSON Schema (the graph schema's
// `signals`, RunInfo's `waiting_for`; sent with POST /api/runs/{id}/signal).
function renderSignalForm(container, run, graph) {
  const signals = graph && graph.graph.signals;
  if (run.status !== "waiting" || !signals || !run.waiting_for || !signals[run.waiting_for]) { container.replaceChildren(); return; }
  if (container.dataset.for === run.waiting_for) return;  // keep what is being typed
  container.dataset.for = run.waiting_for;
  const form = schemaForm(signals[run.waiting_for], "signal");
  const send = h("button", { id: "send-signal" }, `Send ${run.waiting_for}`);
  send.addEventListener("click", async () => {
    try {
      await api(`/api/runs/${encodeURIComponent(run.run_id)}/signal`, { method: "POST", body: { name: run.waiting_for, value: form.read() } });
      notice("");
    } catch (e) { notice(e.message); }
  });
  container.replaceChildren(h("h2", {}, `Signal: ${run.waiting_for}`), form.el, send);
}

// A run's waits for external events (GET /api/runs/{id}/event-waits): each one's name and since
// when, and once answered, who answered, when, and what.
async function renderEventWaits(container, run) {
  const waits = await api(`/api/runs/${encodeURIComponent(run.run_id)}/event-waits`).catch(() => []);
  if (!waits.length) { container.replaceChildren(); return; }
  container.replaceChildren(h("h2", {}, "Approvals"), h("table", { class: "kv", id: "run-event-waits" }, ...waits.map((w) => {
    const a = w.answer;
    const said = !a ? h("span", { class: "pending" }, ["waiting since ", when(w.since_ms / 1000), " ", h("a", { href: "#/approvals" }, "(answer in the inbox)")])
      : [h("span", { class: "answered-by" }, a.by), " at ", when(a.at / 1000), ": ", h("pre", { class: "answer" }, "error" in a ? `failed: ${a.error}` : json(a.payload))];
    return h("tr", { "data-wait": w.name }, h("th", {}, w.name), h("td", {}, said));
  })));
}

// What a wait's answer is, once every deferred call of it has a decision: DeferredToolResults.
function decisionsPayload(decisions) {
  const approvals = {};
  for (const [id, d] of Object.entries(decisions)) approvals[id] = d.approve ? true : { kind: "tool-denied", message: d.message || "Denied." };
  return { approvals };
}

// One open wait in the inbox: its run, graph, agent and age, and each deferred call with its tool,
// its validated arguments, and Approve / Deny (Deny sends its message to the model). The answer is
// posted once each call that needs approval has a decision: a wait takes one answer.
function approvalCard(w, answered) {
  const decisions = {};
  const needed = w.calls.filter((c) => c.kind === "approval");
  const send = async () => {
    try { await api(`/api/events/${encodeURIComponent(w.token)}`, { method: "POST", body: { payload: decisionsPayload(decisions) } }); notice(""); answered(waitKey(w)); }
    catch (e) { notice(e.message); }
  };
  const row = (c) => {
    const state = h("span", { class: "decision" }, "");
    const message = h("input", { class: "deny-message", placeholder: "message for the model", "aria-label": `why ${c.tool_name} is denied` });
    const decide = (approve) => {
      decisions[c.tool_call_id] = { approve, message: message.value };
      state.textContent = approve ? "approved" : "denied";
      if (needed.every((n) => n.tool_call_id in decisions)) send();
    };
    const approve = h("button", { class: "approve" }, "Approve");
    approve.addEventListener("click", () => decide(true));
    const deny = h("button", { class: "danger deny" }, "Deny");
    deny.addEventListener("click", () => decide(false));
    // No token (a viewer's view, GET /api/events): the call is shown, and nothing can answer it.
    const actions = !w.token ? [h("span", { class: "muted read-only" }, "an operator answers this")]
      : c.kind === "approval" ? [approve, " ", deny, " ", message, " ", state] : [h("span", { class: "muted" }, `${c.kind}: answer with reflexr-graph event resolve`)];
    return h("tr", { "data-call": c.tool_call_id }, h("td", { class: "mono tool" }, c.tool_name), h("td", {}, h("pre", { class: "args" }, json(c.args))), h("td", { class: "actions nowrap" }, actions));
  };
  return h("section", { class: "approval", "data-run": w.run_id, "data-token-of": w.run_id },
    h("h2", {}, h("a", { href: `#/run/${w.run_id}`, class: "mono run-id" }, w.run_id)),
    h("p", { class: "muted" }, `graph ${w.graph} · agent ${w.agent} · ${w.name} · waiting since ${when(w.since_ms / 1000)}`, w.timeout_at_ms ? ` · times out ${when(w.timeout_at_ms / 1000)}` : ""),
    w.calls.length ? h("table", { class: "calls" }, h("thead", {}, h("tr", {}, ["tool", "arguments", ""].map((t) => h("th", {}, t)))), h("tbody", {}, w.calls.map(row)))
      : h("p", { class: "muted" }, "No deferred tool call: answer with reflexr-graph event resolve TOKEN --value JSON"));
}

// A wait's key in the inbox: its run and name (a viewer gets no token, api/waits.py).
const waitKey = (w) => `${w.run_id}\u0000${w.name}`;

// The approvals inbox (GET /api/events): every open wait for an external event. A card stays as it
// is while it is open (a message being typed is kept); answered or ended waits go.
async function approvalsPage(view) {
  const list = h("div", { id: "approvals" });
  const empty = h("p", { class: "muted", id: "approvals-empty" }, "Nothing waits for an answer.");
  view.replaceChildren(h("h1", {}, "Approvals"), list);
  const cards = new Map();
  const drop = (key) => { const card = cards.get(key); if (card) card.remove(); cards.delete(key); };
  return repeat(async () => {
    const waits = await api("/api/events");
    const open = new Set(waits.map(waitKey));
    for (const key of [...cards.keys()]) if (!open.has(key)) drop(key);
    for (const w of waits) if (!cards.has(waitKey(w))) { const card = approvalCard(w, drop); cards.set(waitKey(w), card); list.append(card); }
    if (!cards.size) list.replaceChildren(empty); else empty.remove();
  });
}

// The dead letters, all or those of one `reason` (#/dead/<reason>, as the overview links them).
async function deadPage(view, reason = "") {
  const body = h("tbody", { id: "dead-body" });
  const replaySel = h("button", { id: "replay-selected" }, "Replay selected");
  const selected = new Set();
  view.replaceChildren(h("h1", {}, "Dead letters", reason ? [" of reason ", h("span", { class: "mono", id: "dead-reason" }, reason), " ", h("a", { href: "#/dead" }, "(all)")] : []),
    h("div", { class: "actions" }, replaySel),
    h("table", { id: "dead" }, h("thead", {}, h("tr", {}, ["", "run", "graph", "reason", "last error", "dead since"].map((t) => h("th", {}, t)))), body));
  replaySel.addEventListener("click", async () => {
    if (!selected.size || !(await confirmDialog(`Replay ${selected.size} dead run(s) from their checkpoints?`))) return;
    try {
      const out = await api("/api/dead-letters/replay", { method: "POST", body: { run_ids: [...selected] } });
      notice(out.refused.length ? `replayed ${out.replayed.length}; refused: ${out.refused.map((r) => r.detail).join("; ")}` : "");
      selected.clear();
    } catch (e) { notice(e.message); }
  });
  return repeat(async () => {
    const q = new URLSearchParams({ limit: "200" });
    if (reason) q.set("reason", reason);
    const page = await api(`/api/dead-letters?${q}`);
    const rows = page.runs.map((r) => {
      const box = h("input", { type: "checkbox", "data-select": r.run_id, checked: selected.has(r.run_id) });
      box.addEventListener("change", () => (box.checked ? selected.add(r.run_id) : selected.delete(r.run_id)));
      return h("tr", { "data-run": r.run_id }, h("td", {}, box), h("td", { class: "mono run-id" }, h("a", { href: `#/run/${r.run_id}` }, r.run_id)),
        h("td", {}, r.graph), h("td", {}, r.reason || "-"), h("td", {}, h("span", { class: "mono" }, r.error || "-")), h("td", {}, when(r.updated_at)));
    });
    body.replaceChildren(...(rows.length ? rows
      : [h("tr", { id: "dead-none" }, h("td", { colspan: 6, class: "muted" }, reason ? "None: no run is dead for this reason." : "None: no run is dead-lettered."))]));
    replaySel.disabled = page.runs.length === 0;
  });
}

// A graph's versions, newest first (G9): runs stay on the version they started on.
async function versionsTable(name) {
  const versions = await api(`/api/graphs/${encodeURIComponent(name)}/versions`);
  const rows = versions.map((v) => h("tr", {}, h("td", { class: "mono" }, v.label || v.version), h("td", {}, when(v.first_published_at)),
    h("td", {}, v.workers.join(", ") || "no live worker"), h("td", { "data-behaviour": v.on_new_version }, behaviour(v)), h("td", {}, v.nodes.join(", "))));
  return h("details", { class: "versions", "data-versions": name }, h("summary", {}, `Versions (${versions.length})`),
    h("table", {}, h("thead", {}, h("tr", {}, ["version", "first published (UTC)", "live workers", "on new version", "nodes"].map((t) => h("th", {}, t)))), h("tbody", {}, rows)));
}

// What a version's runs do once no live worker serves it (GraphAction on_new_version, on_incompatible).
function behaviour(v) {
  return v.on_new_version === "auto_upgrade" ? `auto_upgrade (incompatible: ${v.on_incompatible})` : "pinned";
}

async function graphsPage(view) {
  const graphs = await api("/api/graphs");
  view.replaceChildren(h("h1", {}, "Graphs"));
  for (const { graph, workers } of graphs) {
    const diagram = h("div", { class: "diagram" });
    const form = schemaForm(graph.inputs, `enqueue-${graph.name}`);
    const key = h("input", { id: `enqueue-${graph.name}-key`, placeholder: "idempotency key (optional)" });
    const go = h("button", { id: `enqueue-${graph.name}` }, `Enqueue ${graph.name}`);
    go.addEventListener("click", async () => {
      try {
        const body = { graph: graph.name, inputs: form.read() };
        if (key.value) body.idempotency_key = key.value;
        const run = await api("/api/runs", { method: "POST", body });
        location.hash = `#/run/${run.run_id}`;
      } catch (e) { notice(e.message); }
    });
    view.append(h("section", { "data-graph": graph.name }, h("h2", {}, graph.name),
      h("p", { class: "muted" }, "served by ", workers.length ? h("a", { href: "#/workers", class: "served-by" }, workers.join(", ")) : "no live worker",
        `; max attempts ${graph.max_attempts}`),
      h("div", { class: "grid" }, diagram, h("div", {}, h("h3", {}, "Enqueue"), form.el, key, " ", go)),
      h("details", {}, h("summary", {}, "Schemas: inputs, state, output"), h("pre", {}, json({ inputs: graph.inputs, state: graph.state, output: graph.output })))));
    renderDiagram(diagram, graph.mermaid);
    view.querySelector(`section[data-graph="${CSS.escape(graph.name)}"]`).append(await versionsTable(graph.name));
  }
  return () => {};
}

// A worker's clock skew against Redis's (ms), as the CLI's `workers` shows it.
function skewText(ms) {
  if (ms === null || ms === undefined) return "-";
  return Math.abs(ms) >= 100 ? `${ms >= 0 ? "+" : ""}${(ms / 1000).toFixed(1)}s` : `${ms >= 0 ? "+" : ""}${ms}ms`;
}

// The live workers (GET /api/workers): what each serves, what it runs now, when it last beat.
async function workersPage(view) {
  const body = h("tbody", { id: "workers-body" });
  view.replaceChildren(h("h1", {}, "Workers"),
    h("table", { id: "workers" }, h("thead", {}, h("tr", {}, ["worker", "host", "pool", "concurrency", "graphs", "runs in flight", "last heartbeat", "clock skew", "version"].map((t) => h("th", {}, t)))), body));
  return repeat(async () => {
    const workers = await api("/api/workers");
    const now = Date.now() / 1000;
    body.replaceChildren(...(workers.length ? workers.map(({ info, in_flight, last_beat_at }) => {
      const [, host] = info.name.includes("@") ? info.name.split("@", 2) : ["", "-"];
      return h("tr", { "data-worker": info.name }, h("td", { class: "mono nowrap" }, info.name), h("td", {}, host || "-"),
        h("td", {}, info.pool || "-"), h("td", {}, String(info.concurrency || "-")),
        h("td", { class: "graphs" }, info.graphs.flatMap((g, i) => [i ? ", " : "", h("a", { href: "#/graphs", "data-graph": g }, g)])),
        h("td", { class: "in-flight" }, in_flight.length ? in_flight.map((id) => h("div", {}, h("a", { href: `#/run/${id}`, class: "mono nowrap" }, id))) : "none"),
        h("td", { class: "beat nowrap", title: `${clockTime(last_beat_at, true)} ${zoneLabel()}` }, `${duration(Math.max(0, now - last_beat_at))} ago`),
        h("td", { class: "skew nowrap", title: "this worker's clock minus Redis's; the fleet keeps Redis's time" }, skewText(info.clock_skew_ms)),
        h("td", {}, info.version || "-"));
    }) : [h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No live worker."))]));
  });
}

// The schedules (GET /api/schedules): each one's clock, graph and policies, its next and last fire
// with the run that fire made; Pause or Resume, Fire now (POST .../trigger, a run at once) and
// Delete, which asks first (DELETE /api/schedules/{name}).
async function schedulesPage(view) {
  const body = h("tbody", { id: "schedules-body" });
  view.replaceChildren(h("h1", {}, "Schedules"),
    h("table", { id: "schedules" }, h("thead", {}, h("tr", {}, ["schedule", "graph", "when", "overlap", "catch-up", "next fire", "last fire", ""].map((t) => h("th", {}, t)))), body));
  const path = (name, what = "") => `/api/schedules/${encodeURIComponent(name)}${what}`;
  const act = async (fn) => { try { await fn(); notice(""); await refresh(); } catch (e) { notice(e.message); } };
  const buttons = (s) => {
    const name = s.schedule.name;
    const toggle = h("button", { class: "toggle" }, s.schedule.paused ? "Resume" : "Pause");
    toggle.addEventListener("click", () => act(() => api(path(name, s.schedule.paused ? "/resume" : "/pause"), { method: "POST" })));
    const fire = h("button", { class: "trigger" }, "Fire now");
    fire.addEventListener("click", () => act(async () => { const { run_id } = await api(path(name, "/trigger"), { method: "POST" }); location.hash = `#/run/${run_id}`; }));
    const remove = h("button", { class: "danger delete" }, "Delete");
    remove.addEventListener("click", async () => {
      if (await confirmDialog(`Delete schedule ${name}? Its runs stay; it fires no more.`)) act(() => api(path(name), { method: "DELETE", raw: true }));
    });
    return h("td", { class: "actions nowrap" }, toggle, " ", fire, " ", remove);
  };
  const refresh = async () => {
    const schedules = await api("/api/schedules");
    body.replaceChildren(...(schedules.length ? schedules.map((s) => h("tr", { "data-schedule": s.schedule.name, "data-paused": String(s.schedule.paused) },
      h("td", { class: "mono nowrap" }, s.schedule.name), h("td", {}, s.schedule.graph),
      h("td", { class: "mono" }, s.schedule.cron || `every ${duration(s.schedule.every_s)}`),
      h("td", {}, s.schedule.overlap), h("td", {}, s.schedule.catchup),
      h("td", { class: "next nowrap" }, s.schedule.paused ? "paused" : when(s.next_fire_at)),
      h("td", { class: "last nowrap" }, s.last_run_id ? h("a", { href: `#/run/${s.last_run_id}` }, when(s.last_fire_at)) : "-"),
      buttons(s))) : [h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No schedule: add one with `reflexr-graph schedule add`."))]));
  };
  return repeat(refresh);
}

// The fleet at a glance (GET /api/overview), read again every few seconds: runs per minute over
// the last hour, runs by status now, durations and queues per graph, waiting runs by reason,
// dead letters by reason over the hour (overview.js draws the charts).
const OVERVIEW_MS = 2000;
const WAIT_COLOURS = { signal: "#ca8a04", timer: "#0891b2", limit: "#7c3aed", worker: "#dc2626", version: "#db2777", children: "#059669" };
const STATUS_COLOURS = { queued: "#6366f1", running: "#2563eb", retrying: "#ea580c", waiting: "#ca8a04", succeeded: "#16a34a", dead: "#dc2626", cancelled: "#94a3b8" };

const WINDOW_KEY = "reflexr-overview-minutes";

async function overviewPage(view) {
  const minutes = h("select", { id: "overview-window" }, [15, 30, 60].map((m) => h("option", { value: m }, `the last ${m} minutes`)));
  minutes.value = localStorage.getItem(WINDOW_KEY) || "60";
  const parts = {
    runs: h("div", { class: "chart", id: "overview-runs" }), status: h("div", { id: "overview-status" }),
    dead: h("div", { class: "chart", id: "overview-dead" }), waiting: h("div", { id: "overview-waiting" }),
    durations: h("tbody", { id: "durations" }), queues: h("tbody", { id: "queues" }),
    redis: h("p", { class: "banner", id: "redis-warning", role: "alert", hidden: true }),
  };
  const table = (id, heads, body) => h("table", { id }, h("thead", {}, h("tr", {}, heads.map((t) => h("th", {}, t)))), body);
  view.replaceChildren(h("div", { class: "filters" }, h("h1", {}, "Overview"), h("label", { for: "overview-window" }, "Charts of"), minutes),
    parts.redis,
    h("div", { class: "grid" },
      h("section", {}, h("h2", {}, "Runs per minute"), parts.runs),
      h("section", {}, h("h2", {}, "Runs by status now"), parts.status)),
    h("div", { class: "grid" },
      h("section", {}, h("h2", {}, "Dead letters per minute, by reason"), parts.dead),
      h("section", {}, h("h2", {}, "Waiting now, by reason"), parts.waiting)),
    h("div", { class: "grid" },
      h("section", {}, h("h2", {}, "Run duration per graph (created to succeeded)"),
        table("durations-table", ["graph", "runs", "p50", "p95"], parts.durations)),
      h("section", {}, h("h2", {}, "Queues"), table("queues-table", ["graph", "queued", "oldest waits"], parts.queues))));
  const refresh = async () => {
    const { now, activity, redis_warning } = await api(`/api/overview?minutes=${encodeURIComponent(minutes.value)}`);
    renderOverview(parts, now, activity);
    // A Redis that may lose runs (it evicts keys, or persists nothing), said as the worker says it.
    parts.redis.hidden = !redis_warning;
    parts.redis.textContent = redis_warning || "";
  };
  minutes.addEventListener("change", () => { localStorage.setItem(WINDOW_KEY, minutes.value); refresh().catch((e) => notice(e.message)); });
  return repeat(refresh, OVERVIEW_MS);
}

function renderOverview(parts, now, activity) {
  parts.runs.replaceChildren(runsChart(activity), legend(SERIES));
  parts.status.replaceChildren(barList("status-bars", STATUSES.map((s) => [s, now.by_status[s] || 0, STATUS_COLOURS[s], `#/runs/${s}`])),
    ...(now.queued_scanned ? [] : [h("p", { class: "muted" }, "Live statuses count the first runs of the due set and the leases only.")]));
  const dead = deadChart(activity);
  parts.dead.replaceChildren(dead.svg, Object.keys(activity.dead_by_reason).length ? dead.legend : h("p", { class: "muted" }, "No run was dead-lettered in this window."),
    h("p", {}, h("a", { href: "#/dead" }, `all ${now.dead_letters} dead letter(s)`)));
  parts.waiting.replaceChildren(barList("waiting-bars", Object.entries(activity.waiting).map(([reason, n]) => [reason, n, WAIT_COLOURS[reason] || "#475569", `#/runs/waiting`])));
  const durations = Object.entries(activity.durations);
  parts.durations.replaceChildren(...(durations.length ? durations.map(([graph, d]) => h("tr", { "data-graph": graph },
    h("td", {}, graph), h("td", {}, String(d.runs)), h("td", { class: "p50" }, duration(d.p50_s)), h("td", { class: "p95" }, duration(d.p95_s))))
    : [h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No succeeded run yet."))]));
  const queues = Object.entries(now.queues);
  const at = Date.now() / 1000;
  parts.queues.replaceChildren(...(queues.length ? queues.map(([graph, q]) => h("tr", { "data-graph": graph },
    h("td", {}, graph), h("td", { class: "depth" }, String(q.queued)), h("td", { class: "oldest", title: `${clockTime(q.oldest_at, true)} ${zoneLabel()}` }, duration(Math.max(0, at - q.oldest_at)))))
    : [h("tr", {}, h("td", { colspan: 3, class: "muted" }, "No run is queued."))]));
}

// -- routing --------------------------------------------------------------------------------

let routes = 0;  // the number of the latest route: an earlier one still loading renders nowhere

async function route() {
  const seq = ++routes;
  stopPage();
  stopPage = () => {};
  // Each route renders into an element of its own, in place at once: a route that a newer one
  // overtook (a hash change, then the token form) renders into a detached element, never over
  // the newer page or a form the user has begun to fill in.
  const view = h("div", {});
  document.getElementById("view").replaceChildren(view);
  const [, page, arg] = (location.hash || "#/overview").split("/");
  const shown = page === "run" ? "runs" : ["runs", "dead", "graphs", "workers", "schedules", "approvals"].includes(page) ? page : "overview";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.id === `nav-${shown}`);
  try {
    let stop;
    if (page === "run" && arg) stop = await runPage(view, decodeURIComponent(arg));
    else if (page === "dead") stop = await deadPage(view, arg ? decodeURIComponent(arg) : "");
    else if (page === "graphs") stop = await graphsPage(view);
    else if (page === "workers") stop = await workersPage(view);
    else if (page === "schedules") stop = await schedulesPage(view);
    else if (page === "approvals") stop = await approvalsPage(view);
    else if (page === "runs") stop = await runsPage(view, arg ? decodeURIComponent(arg) : "");
    else stop = await overviewPage(view);
    if (seq === routes) stopPage = stop;
    else stop();
  } catch (e) { if (seq === routes) notice(e.message); }
}

// `serve` prints the console's URL with its token in the fragment (#token=...), which the browser
// never sends: it is kept as a typed token is, and taken out of the address bar and history.
function takeTokenFromUrl() {
  const match = /^#token=(.+)$/.exec(location.hash);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

document.addEventListener("DOMContentLoaded", () => {
  takeTokenFromUrl();
  // The page's own font: mermaid measures its labels while the CSP refuses its styles, so the
  // labels are measured in the font they are later shown in.
  const font = getComputedStyle(document.body);
  window.mermaid.initialize({
    startOnLoad: false, securityLevel: "strict", fontFamily: font.fontFamily, themeVariables: { fontSize: font.fontSize },
  });
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value);
    notice("");
    route();
  });
  const zone = document.getElementById("time-zone");
  zone.value = localZone() ? "local" : "utc";
  zone.addEventListener("change", () => { localStorage.setItem(ZONE_KEY, zone.value); route(); });
  window.addEventListener("hashchange", route);
  route();
});
