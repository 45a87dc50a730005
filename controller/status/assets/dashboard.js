// Holdfast dashboard: follows /dashboard/events (server-sent events) and redraws the tables from
// each snapshot; timeline events are prepended. Plain DOM, no library; data only via textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let maxFlows = 1;
const previousCells = new Map();

function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

function bar(value) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "bar");
  svg.setAttribute("width", "60");
  svg.setAttribute("height", "10");
  const back = document.createElementNS(SVG, "rect");
  back.setAttribute("width", "60");
  back.setAttribute("height", "10");
  back.setAttribute("fill", "#e6e9f0");
  const fill = document.createElementNS(SVG, "rect");
  fill.setAttribute("width", String(Math.round((60 * value) / maxFlows)));
  fill.setAttribute("height", "10");
  fill.setAttribute("fill", "#2d5bd8");
  svg.append(back, fill);
  return svg;
}

/**
 * Replaces the rows of table `id`; each row is [key, cells]; a cell is text or {text | node,
 * cls, field, flash}. A cell whose text changed since the last snapshot flashes (unless
 * `flash: false`: a countdown).
 */
function fill(id, rows, empty) {
  const body = $(id).tBodies[0];
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = el("tr");
    const td = el("td", empty, "empty");
    td.colSpan = $(id).tHead.rows[0].cells.length;
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const [key, cells] of rows) {
    const tr = el("tr");
    tr.dataset.key = key;
    cells.forEach((c, i) => {
      const cell = typeof c === "object" && c !== null && !(c instanceof Node) ? c : { text: c };
      const td = el("td", cell.node ? undefined : cell.text, cell.cls);
      if (cell.node) td.append(...cell.node);
      if (cell.field) td.dataset.field = cell.field;
      const k = `${id}|${key}|${i}`;
      const text = td.textContent;
      const changed = previousCells.has(k) && previousCells.get(k) !== text;
      if (changed && cell.flash !== false) td.classList.add("changed");
      previousCells.set(k, text);
      tr.append(td);
    });
    body.append(tr);
  }
}

const short = (d) => (d ? d.slice(0, 16) : "none");
const state = (s) => ({ text: s, cls: `state-${s}` });

function render(s) {
  $("updated").textContent = `updated ${new Date(s.at).toLocaleTimeString()}`;
  const redis = $("redis");
  redis.textContent = s.redis.up ? "Redis: up" : `Redis: down (${s.redis.error ?? "?"})`;
  redis.className = `pill ${s.redis.up ? "ok" : "bad"}`;
  $("model").textContent = `model rev ${s.model.rev} · ${s.model.services} services`;
  maxFlows = Math.max(1, ...s.addresses.map((a) => a.flows), ...s.backends.map((b) => b.flows));

  fill(
    "addresses",
    s.addresses.map((a) => [a.address, [
      { text: a.address, cls: "mono" },
      a.nodes.length ? a.nodes.join(", ") : state("none"),
      { node: [bar(a.flows), document.createTextNode(String(a.flows))], cls: "num" },
      a.frontends.join("; "),
    ]]),
    "no LB addresses in the model",
  );

  fill(
    "backends",
    s.backends.map((b) => [`${b.service}|${b.address}`, [
      b.service,
      { text: b.address, cls: "mono" },
      state(b.state),
      { ...state(b.health), field: "health" },
      { node: [bar(b.flows), document.createTextNode(String(b.flows))], cls: "num" },
      Object.entries(b.healthBy).map(([n, v]) => `${n}: ${v}`).join(", "),
    ]]),
    "no backends",
  );

  fill(
    "egress",
    s.egress.map((e) => [`${e.egress}|${e.address}`, [
      e.egress,
      { text: e.address, cls: "mono" },
      { text: e.holder ?? "nobody", cls: e.holder ? "mono" : "state-none", field: "owner" },
      { text: e.epoch ?? "", cls: "num", field: "epoch" },
      {
        text: e.ttlMs === null ? "" : `${(e.ttlMs / 1000).toFixed(1)} s`,
        cls: "num",
        flash: false,
      },
    ]]),
    "no egress addresses",
  );

  fill("policy", [
    ["model", [`model (ABI ${s.policy.abi})`, { text: short(s.policy.model), cls: "mono" }]],
    ...s.policy.nodes.map((p) => [p.node, [p.node, { text: short(p.digest), cls: "mono" }]]),
  ], "");

  fill(
    "anycast",
    s.anycast.map((a) => [a.address, [
      { text: a.address, cls: "mono" },
      a.nodes.join(", "),
    ]]),
    "no anycast addresses held",
  );

  fill(
    "nodes",
    s.nodes.map((n) => [n.url, [
      n.node,
      n.role,
      n.up ? state("up") : { text: `down: ${n.error ?? ""}`, cls: "state-down" },
      n.lbIps.join(", "),
      { text: n.url, cls: "mono" },
    ]]),
    "no node /metrics given (--agents)",
  );
}

function addEvent(e) {
  const li = el("li");
  li.dataset.kind = e.kind;
  li.append(
    el("time", new Date(e.at).toLocaleTimeString()),
    el("span", e.kind, `kind kind-${e.kind}`),
    el("span", e.text),
  );
  $("timeline").prepend(li);
}

function connect() {
  const source = new EventSource("/dashboard/events");
  const conn = $("conn");
  source.onopen = () => {
    conn.textContent = "live";
    conn.className = "pill ok";
    $("timeline").replaceChildren(); // the server replays the recent timeline on connect
  };
  source.onerror = () => {
    conn.textContent = "reconnecting…";
    conn.className = "pill bad";
  };
  source.addEventListener("snapshot", (m) => render(JSON.parse(m.data)));
  source.addEventListener("timeline", (m) => addEvent(JSON.parse(m.data)));
}

connect();
