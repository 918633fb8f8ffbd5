// meshsat serve: the page. Plain DOM, no outside code; every text goes in through
// textContent, never as HTML. The JSON it reads is the CLI's --format json documents.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// Replace an element's children with these (nested lists flattened, empty ones dropped).
function put(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false && c !== ""));
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) el.append(c instanceof Node ? c : String(c));
  return el;
}

// ---- talking to the API -------------------------------------------------------------
class ApiError extends Error {
  constructor(line, field) { super(line); this.field = field; }
}

async function call(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const data = await r.json();
  if (!r.ok) throw new ApiError(data.error || `HTTP ${r.status}`, data.field);
  const notes = JSON.parse(r.headers.get("X-Meshsat-Notes") || "[]");
  return { doc: data, exit: Number(r.headers.get("X-Meshsat-Exit") || 0), notes };
}

// Read a form into a request: empty fields are left out, so the CLI's defaults apply;
// numbers go as typed, so the CLI's own parser judges them.
function request(form) {
  const body = {};
  for (const el of $$("[name]", form)) {
    if (el.closest("[hidden]")) continue;
    if (el.type === "checkbox") { if (el.checked) body[el.name] = true; continue; }
    const v = el.value.trim();
    if (v === "") continue;
    if (el.name === "where") body.where = v.split("\n").map((x) => x.trim()).filter(Boolean);
    else if (el.name === "model_config") {
      try { body.model_config = JSON.parse(v); }
      catch (e) { throw new ApiError(`meshsat: error: the pasted config.json is not JSON: ${e.message}`, "model_config"); }
    } else body[el.name] = v;
  }
  if (body.model_config !== undefined) delete body.model;
  return body;
}

function clearErrors(form) {
  for (const el of $$(".err", form)) { el.textContent = ""; el.hidden = true; }
}

function showError(form, err) {
  const line = err instanceof ApiError ? err.message : `meshsat: error: ${err.message}`;
  const slot = $(`.err[data-for="${err.field}"]`, form) || $('.err[data-for="_form"]', form);
  slot.textContent = line.split("\n")[0];
  slot.hidden = false;
  const details = slot.closest("details");
  if (details) details.open = true;
}

function fmt(v) {
  if (typeof v === "boolean") return v ? "y" : "n";
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString("en-US") : String(v);
  if (v === null || v === undefined) return "";
  if (Array.isArray(v)) return v.join(" ");
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// ---- views --------------------------------------------------------------------------
function show(view) {
  for (const b of $$("#tabs button")) b.classList.toggle("active", b.dataset.view === view);
  for (const sec of $$(".view")) sec.hidden = sec.id !== `view-${view}`;
  if (location.hash !== `#${view}`) history.replaceState(null, "", `#${view}`);
}

async function boot() {
  const { doc: meta } = await call("GET", "/api/meta");
  for (const m of meta.models) $("#models").append(h("option", { value: m }));
  const gpuSelect = $('#plan-form [name="gpu"]');
  for (const [name, g] of Object.entries(meta.gpus)) {
    gpuSelect.append(h("option", { value: name }, `${name} (${g.memory_gib} GiB)`));
  }
  gpuSelect.value = "H200";
  for (const sel of $$("select.versions")) {
    for (const v of [...meta.versions].reverse()) sel.append(h("option", { value: v }, v));
    sel.value = meta.newest;
  }
  const older = meta.versions.filter((v) => v !== meta.newest);
  $('#compare-form [name="old"]').value = older[older.length - 1] || meta.newest;
  // plan --engine: the CLI's choices and default, its --help text as the hint.
  const engine = $('#plan-form [name="engine"]');
  for (const c of meta.plan_engine.choices) engine.append(h("option", { value: c }, c));
  engine.value = meta.plan_engine.default;
  engine.title = meta.plan_engine.help;
  $("#plan-engine").title = meta.plan_engine.help;
  // plan --quantization: the field's values; the empty choice (not sent) is the CLI's
  // default, the checkpoint's own scheme.
  const quant = $('#plan-form [name="quantization"]');
  for (const c of meta.plan_quantization.choices) quant.append(h("option", { value: c }, c));
  quant.value = meta.plan_quantization.default ?? "";
  $("#plan-quantization").title = meta.plan_quantization.help;
  for (const el of $$("[data-option]")) el.hidden = !meta.plan_options.includes(el.dataset.option);
  // plan --disagg ranks by estimate only (it refuses --rank kv): the ranking is put away;
  // --rank kv estimates nothing: the estimator is. A hidden field is not sent.
  const offered = (option) => meta.plan_options.includes(option);
  const disagg = $("#plan-disagg"), rank = $('#plan-form [name="rank"]');
  const planOptions = () => {
    $('[data-option="rank"]').hidden = disagg.checked || !offered("rank");
    $("#plan-engine").hidden = (!disagg.checked && rank.value === "kv") || !offered("engine");
  };
  disagg.addEventListener("change", planOptions);
  rank.addEventListener("change", planOptions);
  planOptions();
  for (const k of meta.group_kinds) $("#groups-kind").append(h("option", { value: k }, k));
  $("#groups-kind").value = "attn_tp";
  $("#groups-kind").addEventListener("change", () => lastGroups && drawGroups(lastGroups));
  for (const b of $$("#tabs button")) b.addEventListener("click", () => show(b.dataset.view));
  $("#plan-form").addEventListener("submit", (e) => { e.preventDefault(); runPlan(); });
  $("#plan-cancel").addEventListener("click", cancelPlan);
  $("#check-form").addEventListener("submit", (e) => { e.preventDefault(); runCheck(); });
  $("#groups-form").addEventListener("submit", (e) => { e.preventDefault(); runGroups(); });
  $("#compare-form").addEventListener("submit", (e) => { e.preventDefault(); runCompare(); });
  const fromHash = () => {
    const view = location.hash.slice(1);
    show(["plan", "check", "groups", "compare"].includes(view) ? view : "plan");
  };
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.body.dataset.ready = "1";
}

// ---- plan ---------------------------------------------------------------------------
let planJob = null;
let planRequest = null;

async function runPlan() {
  const form = $("#plan-form");
  clearErrors(form);
  let body;
  try { body = request(form); } catch (e) { showError(form, e); return; }
  $("#plan-run").disabled = true;
  $("#plan-cancel").hidden = false;
  $("#plan-progress").textContent = "starting...";
  try {
    let { doc: job } = await call("POST", "/api/jobs/plan", body);
    planJob = job.id;
    while (job.state === "running") {
      const p = job.progress;
      const n = (x) => x.toLocaleString("en-US");
      const what = body.disagg ? "layouts (prefill and decode roles, then the aggregated baseline)" : "layout shapes";
      $("#plan-progress").textContent = p.examined !== undefined
        ? `examined ${n(p.examined)} layouts, ${n(p.fit)} fit (${job.elapsed_s} s)`
        : p.estimated !== undefined && p.of > 0  // 0 of 0: the layouts are still being read
          ? `estimated ${n(p.estimated)} of ${n(p.of)} ${what} (${job.elapsed_s} s)`
          : `working (${job.elapsed_s} s)`;
      await new Promise((r) => setTimeout(r, 150));
      ({ doc: job } = await call("GET", `/api/jobs/${job.id}`));
    }
    if (job.state === "failed") throw new ApiError(job.error, job.field);
    planRequest = body;
    if (body.disagg) {
      $("#plan-progress").textContent = `${job.document.deployments.length} deployments in ${job.elapsed_s} s`;
      $("#plan-out").hidden = true;
      drawDisagg(job.document);
    } else {
      $("#plan-progress").textContent = `${job.document.layouts.length} layouts in ${job.elapsed_s} s`;
      $("#disagg-out").hidden = true;
      drawPlan(job.document);
    }
  } catch (e) {
    $("#plan-progress").textContent = "";
    $("#plan-out").hidden = true;  // the old answer is not this input's
    $("#disagg-out").hidden = true;
    showError(form, e);
  } finally {
    planJob = null;
    $("#plan-run").disabled = false;
    $("#plan-cancel").hidden = true;
  }
}

async function cancelPlan() {
  if (planJob !== null) await call("DELETE", `/api/jobs/${planJob}`);
}

// The chart plots what the rows carry: throughput estimates when they are there, else
// the two keys of the KV-capacity ranking. Either way the line is the Pareto front.
function chartAxes(rows) {
  const has = (k) => rows.length > 0 && rows.every((r) => typeof r[k] === "number");
  if (has("tokens_per_s_gpu") && has("tokens_per_s_user")) {
    return { x: "tokens_per_s_user", y: "tokens_per_s_gpu", xHigh: true,
      caption: "Output tokens/s per GPU against tokens/s per user; the line joins the Pareto front. Hover a point for its layout, click it to select." };
  }
  if (has("total_kv_tokens") && has("node_crossing_gpus")) {
    return { x: "node_crossing_gpus", y: "total_kv_tokens", xHigh: false,
      caption: "These rows carry no throughput estimates, so the chart shows the two keys of the ranking: total KV-cache tokens against GPUs in node-spanning attention-TP/EP groups (fewer is better); the line joins the Pareto front. Hover a point for its layout, click it to select." };
  }
  const numeric = rows.length ? Object.keys(rows[0]).filter((k) => k !== "rank" && has(k)) : [];
  return { x: numeric[0] || "rank", y: numeric[1] || "rank", xHigh: true,
    caption: `${numeric[1] || "rank"} against ${numeric[0] || "rank"}.` };
}

function paretoFront(points, xHigh) {
  // Points not beaten on both axes (y higher is better; x per xHigh), in x order.
  const better = (a, b) => (xHigh ? a.x >= b.x : a.x <= b.x) && a.y >= b.y && (a.x !== b.x || a.y !== b.y);
  const front = points.filter((p) => !points.some((q) => better(q, p)));
  return front.sort((a, b) => a.x - b.x);
}

function ticks(lo, hi, n = 5) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const step0 = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(step0));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= step0);
  const out = [];
  const first = Math.floor(lo / step), last = Math.ceil(hi / step);
  for (let i = first; i <= last; i++) out.push(i * step);
  if (out.length < 2) out.push((last + 1) * step);
  return out;
}

function short(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(2)}`;
}

function layoutName(r) {
  const parts = ["tp", "pp", "dp", "ep", "attn_tp", "attn_cp", "dcp"].filter((k) => k in r).map((k) => `${k} ${r[k]}`);
  if ("dp_attention" in r) parts.push(r.dp_attention ? "DP attention" : "no DP attention");
  return `#${r.rank}: ${parts.join(", ")}`;
}

let planRows = [];

function drawPlan(doc) {
  planRows = doc.layouts;
  $("#plan-out").hidden = false;
  $("#plan-ranking").textContent = `${doc.gpu}: ${doc.ranking}`;
  const axes = chartAxes(planRows);
  $("#plan-caption").textContent = axes.caption;
  drawChart(planRows, axes);
  drawTable(planRows);
  $("#plan-selected").hidden = true;
  if (planRows.length) select(planRows[0].rank);
}

function drawChart(rows, axes) {
  const svg = $("#plan-chart");
  svg.replaceChildren();
  const W = 720, H = 340, L = 70, R = 20, T = 14, B = 44;
  if (!rows.length) { svg.append(s("text", { x: L, y: H / 2 }, "no layout fits")); return; }
  const pts = rows.map((r) => ({ x: r[axes.x], y: r[axes.y], r }));
  const xt = ticks(Math.min(...pts.map((p) => p.x)), Math.max(...pts.map((p) => p.x)));
  const yt = ticks(Math.min(...pts.map((p) => p.y)), Math.max(...pts.map((p) => p.y)));
  const sx = (v) => L + ((v - xt[0]) / (xt[xt.length - 1] - xt[0])) * (W - L - R);
  const sy = (v) => H - B - ((v - yt[0]) / (yt[yt.length - 1] - yt[0])) * (H - T - B);
  for (const v of xt) {
    svg.append(s("line", { class: "grid", x1: sx(v), x2: sx(v), y1: T, y2: H - B }));
    svg.append(s("text", { x: sx(v), y: H - B + 14, "text-anchor": "middle" }, short(v)));
  }
  for (const v of yt) {
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: sy(v), y2: sy(v) }));
    svg.append(s("text", { x: L - 6, y: sy(v) + 4, "text-anchor": "end" }, short(v)));
  }
  svg.append(s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(s("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(s("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle" }, axes.x));
  svg.append(s("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${(T + H - B) / 2})` }, axes.y));
  const front = paretoFront(pts, axes.xHigh);
  svg.append(s("polyline", { class: "front", points: front.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ") }));
  const onFront = new Set(front.map((p) => p.r.rank));
  for (const p of [...pts].reverse()) {
    svg.append(s("circle", {
      class: `pt${onFront.has(p.r.rank) ? " onfront" : ""}`, cx: sx(p.x), cy: sy(p.y), r: 5,
      "data-rank": p.r.rank, onclick: () => select(p.r.rank),
    }, s("title", {}, `${layoutName(p.r)}\n${axes.x} ${fmt(p.x)}, ${axes.y} ${fmt(p.y)}${p.r.source ? `\nsource: ${p.r.source}` : ""}`)));
  }
}

function drawTable(rows) {
  const table = $("#plan-table");
  table.replaceChildren();
  if (!rows.length) return;
  const cols = [];
  for (const r of rows) for (const k of Object.keys(r)) if (k !== "command" && !cols.includes(k)) cols.push(k);
  // Each row's estimate source beside its rank, as the CLI prints it with each row: which
  // rows are AIConfigurator's and which the roofline's shows without scrolling.
  if (cols.includes("source")) {
    cols.splice(cols.indexOf("source"), 1);
    cols.splice(cols.indexOf("rank") + 1, 0, "source");
  }
  const textCol = (k) => rows.some((r) => typeof r[k] === "string");
  table.append(h("thead", {}, h("tr", {}, cols.map((k) => h("th", { class: textCol(k) ? "text" : "" }, k)))));
  table.append(h("tbody", {}, rows.map((r) => h("tr", { "data-rank": r.rank, onclick: () => select(r.rank) },
    cols.map((k) => h("td", { class: textCol(k) ? "text" : "" }, fmt(r[k])))))));
}

function select(rank) {
  const r = planRows.find((x) => x.rank === rank);
  if (!r) return;
  for (const tr of $$("#plan-table tbody tr")) tr.classList.toggle("selected", Number(tr.dataset.rank) === rank);
  for (const c of $$("#plan-chart circle")) c.classList.toggle("selected", Number(c.dataset.rank) === rank);
  const panel = $("#plan-selected");
  panel.hidden = false;
  const facts = Object.entries(r).filter(([k]) => k !== "command" && k !== "node_command");
  const copy = copyButton(r.command, "Copy command");
  // Over several hosts the one-engine command does not start as typed: what each node runs.
  const spread = r.node_command && r.node_command !== r.command;
  const onNodes = spread ? [
    h("p", {}, r.servers > 1
      ? `${r.servers} servers of ${r.nodes_per_server} node(s), ${r.gpus_per_node} GPUs each (plain DP runs across nodes only as separate servers: put sglang_router in front). Each node runs:`
      : `One server on ${r.nodes_per_server} nodes, ${r.gpus_per_node} GPUs each; set NODE_RANK (0..${r.nodes_per_server - 1}) and LEADER_ADDR (node 0's address) on each. Each node runs:`),
    h("code", { class: "cmd", id: "plan-node-command" }, r.node_command), " ",
    copyButton(r.node_command, "Copy node command"),
  ] : [];
  panel.replaceChildren(h("div", { class: "panel", id: "plan-detail" },
    h("h3", {}, `Selected layout ${layoutName(r)}`),
    h("dl", { class: "kv" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, fmt(v))])),
    h("code", { class: "cmd", id: "plan-command" }, r.command), " ", copy, " ",
    h("button", { type: "button", onclick: () => openIn("groups", r.command) }, "Show its groups"), " ",
    h("button", { type: "button", onclick: () => openIn("check", r.command) }, "Check it"), " ",
    ...onNodes,
    h("button", { type: "button", id: "plan-lws", onclick: () => downloadLws(r.rank, "plan", "sglang") }, "Download LeaderWorkerSet"),
    h("span", { id: "plan-lws-status", class: "muted" }),
    h("div", { id: "plan-memory" }),
  ));
  showMemory(r);
}

function copyButton(text, label) {
  const b = h("button", { type: "button", onclick: async () => {
    try { await navigator.clipboard.writeText(text); b.textContent = "Copied"; }
    catch (e) { b.textContent = "Select the text to copy"; }
  } }, label);
  return b;
}

// ---- plan --disagg: prefill and decode pools against the best aggregated layout -------
const DISAGG_COLUMNS = [["rank", (r) => r.rank], ["prefill layout", (r) => r.prefill_layout],
  ["decode layout", (r) => r.decode_layout], ["x:y", (r) => `${r.prefill_workers}:${r.decode_workers}`],
  ["GPUs", (r) => r.gpus], ["TTFT ms", (r) => fixed(r.ttft_ms, 1)], ["TPOT ms", (r) => fixed(r.tpot_ms, 2)],
  ["tok/s/GPU", (r) => fixed(r.tokens_per_s_gpu, 1)], ["tok/s/user", (r) => fixed(r.tokens_per_s_user, 1)],
  ["SLA", (r) => r.meets_sla], ["source", (r) => r.source]];
let disaggRows = [];
// The CLI's table's decimals (an estimate that could not be made is null in the JSON).
const fixed = (x, digits) => (typeof x === "number" ? x.toFixed(digits) : "");

function drawDisagg(doc) {
  $("#disagg-out").hidden = false;
  disaggRows = doc.deployments;
  $("#disagg-verdict").replaceChildren(h("b", {}, "verdict: "),
    h("span", { class: doc.verdict === "disaggregated" ? "ok" : doc.verdict === "none" ? "bad" : "" }, doc.verdict_note));
  $("#disagg-ranking").textContent = doc.ranking;
  const text = new Set(["prefill layout", "decode layout", "source"]);
  $("#disagg-table").replaceChildren(
    h("thead", {}, h("tr", {}, DISAGG_COLUMNS.map(([k]) => h("th", { class: text.has(k) ? "text" : "" }, k)))),
    h("tbody", {}, disaggRows.map((r) => h("tr", { "data-rank": r.rank, onclick: () => selectDisagg(r.rank) },
      DISAGG_COLUMNS.map(([k, f]) => h("td", { class: text.has(k) ? "text" : "" }, fmt(f(r))))))));
  $("#disagg-selected").replaceChildren(disaggRows.length ? "" : h("p", { class: "muted" }, "no disaggregated deployment fits"));
  if (disaggRows.length) selectDisagg(disaggRows[0].rank);
}

// A role's servers and GPUs; over several hosts, where each node's NODE_RANK and
// LEADER_ADDR come from (the command shown is what each node runs, as the CLI prints it).
function roleTitle(r, role) {
  const nodes = r[`${role}_nodes_per_worker`], gpus = r[`${role}_gpus_per_worker`];
  const spread = nodes > 1 ? `, on ${nodes} nodes of ${gpus / nodes}: NODE_RANK 0..${nodes - 1}, LEADER_ADDR its node 0` : "";
  return `${role} × ${r[`${role}_workers`]} (${gpus} GPUs each${spread})`;
}

function selectDisagg(rank) {
  const r = disaggRows.find((x) => x.rank === rank);
  if (!r) return;
  for (const tr of $$("#disagg-table tbody tr")) tr.classList.toggle("selected", Number(tr.dataset.rank) === rank);
  const role = (id, title, command) => [h("h3", {}, title),
    h("code", { class: "cmd", id }, command), " ", copyButton(command, "Copy")];
  $("#disagg-selected").replaceChildren(h("div", { class: "panel", id: "disagg-detail" },
    h("p", { class: "muted" }, `deployment ${r.rank}: ${r.concurrency} requests in flight; KV transfer ${r.transfer_ms} ms of TTFT; ` +
      `prefill pool ${r.prefill_requests_per_s} req/s, decode pool ${r.decode_requests_per_s} req/s`),
    role("disagg-prefill", roleTitle(r, "prefill"), r.prefill_node_command),
    role("disagg-decode", roleTitle(r, "decode"), r.decode_node_command),
    role("disagg-router", "router", r.router_command),
    h("p", {}, h("button", { type: "button", id: "disagg-lws", onclick: () => downloadLws(r.rank, "disagg", "sglang-pd") },
      "Download LeaderWorkerSets"), h("span", { id: "disagg-lws-status", class: "muted" }))));
}

// The selected layout (view "plan") or deployment (view "disagg", the request has `disagg`)
// for Kubernetes: `plan [--disagg] --emit lws --pick RANK` on the request that ranked it,
// the very YAML the CLI prints, saved as `<file>-rank<RANK>.yaml`.
async function downloadLws(rank, view, file) {
  const status = $(`#${view}-lws-status`);
  status.textContent = " writing...";
  try {
    const { doc } = await call("POST", "/api/plan", { ...planRequest, emit: "lws", pick: rank });
    const name = `${file}-rank${doc.rank}.yaml`;
    const link = h("a", { id: `${view}-lws-file`, download: name, hidden: "",
      href: URL.createObjectURL(new Blob([doc.manifest], { type: "application/yaml" })) });
    status.replaceChildren(" ", link);
    link.click();
    status.replaceChildren(` saved ${name}`, link);
  } catch (e) {
    status.textContent = ` ${e.message}`;
  }
}

// Memory per rank of the selected layout: `validate --gpu` on its command with the model.
async function showMemory(r) {
  const slot = $("#plan-memory");
  if (!planRequest || !planRequest.model) {
    slot.replaceChildren(h("p", { class: "muted" }, "memory per rank: for a catalogue model (a pasted config.json is not looked up)"));
    return;
  }
  const command = r.command.includes("--model-path") ? r.command : `${r.command} --model-path ${planRequest.model}`;
  const body = { sglang: command, gpu: planRequest.gpu,
    context_length: planRequest.context_length, sglang_version: planRequest.sglang_version };
  try {
    const { doc } = await call("POST", "/api/validate", body);
    if (!doc.memory || $("#plan-command")?.textContent !== r.command) return;
    const m = doc.memory;
    const gib = (x) => `${x.toFixed(2)} GiB`;
    const parts = [["GPU memory", gib(m.gpu_memory_gib)], ["weights", gib(m.weights_gib)],
      ["reserve (outside mem_fraction_static)", gib(m.reserve_gib)], ["KV pool", gib(m.kv_pool_gib)],
      ["KV bytes per token", fmt(m.kv_bytes_per_token)], ["max_total_num_tokens", fmt(m.max_total_num_tokens)],
      ["mem_fraction_static", m.mem_fraction_static], [`requests of ${fmt(m.context_length)} tokens`, fmt(m.max_requests)]];
    slot.replaceChildren(h("h3", {}, `memory per rank on ${m.gpu}`),
      h("dl", { class: "kv" }, parts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
  } catch (e) {
    slot.replaceChildren(h("p", { class: "err" }, e.message));
  }
}

function openIn(view, command) {
  const form = $(`#${view}-form`);
  $('[name="sglang"]', form).value = command;
  show(view);
  form.requestSubmit();
}

// ---- check a command ----------------------------------------------------------------
function violationTable(rows, hot) {
  return h("table", { class: "violations" },
    h("thead", {}, h("tr", {}, ["rule", "SGLang says", "because", "fields"].map((c) => h("th", { class: "text" }, c)))),
    h("tbody", {}, rows.map((v) => h("tr", {},
      h("td", { class: "text" }, h("b", {}, v.rule)),
      h("td", { class: "text" }, v.message),
      h("td", { class: "text" }, v.detail, v.hint ? h("div", { class: "muted" }, `hint: ${v.hint}`) : null),
      h("td", { class: "text" }, (v.fields || []).map((f) => h("span", { class: `chip${hot.has(f) ? " hot" : ""}` }, f))),
    ))));
}

function noteLine(n) {
  return `${n.text} (${n.resolution})`;
}

function lineDiff(before, after) {
  // Lines of the script, the changed ones marked; rewrite keeps every other byte.
  const a = before.split("\n"), b = after.split("\n");
  const out = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] === b[i]) out.push(h("div", {}, `  ${a[i]}`));
    else {
      if (a[i] !== undefined) out.push(h("div", { class: "del" }, `- ${a[i]}`));
      if (b[i] !== undefined) out.push(h("div", { class: "add" }, `+ ${b[i]}`));
    }
  }
  return h("pre", { class: "diff", id: "check-diff" }, out);
}

async function runCheck() {
  const form = $("#check-form");
  clearErrors(form);
  const body = request(form);
  const fixGpus = body.gpus;
  delete body.gpus;
  $("#check-progress").textContent = "checking...";
  $("#check-run").disabled = true;
  try {
    const { doc, notes } = await call("POST", "/api/validate", body);
    const out = $("#check-out");
    out.hidden = false;
    if (doc.deployment) {
      showDeployment(doc, notes);
      $("#check-progress").textContent = "";
      return;
    }
    const hot = new Set(doc.conflict || []);
    const open = doc.undecided || [];
    $("#check-verdict").replaceChildren(doc.valid
      ? h("span", { class: "ok" }, open.length
        ? `✓ valid on SGLang ${doc.sglang_version} on the values known here; ${open.length} rule(s) not checked (see the warnings): ${gpusText(doc)}`
        : `✓ valid on SGLang ${doc.sglang_version}: ${gpusText(doc)}`)
      : h("span", { class: "bad" }, `✗ invalid on SGLang ${doc.sglang_version}: ${doc.violations.length} rule(s) violated`));
    $("#check-violations").replaceChildren(doc.violations.length ? violationTable(doc.violations, hot) : "");
    $("#check-conflict").replaceChildren(doc.conflict && doc.conflict.length
      ? h("p", {}, h("b", {}, "conflict: "), doc.conflict.map((f) => h("span", { class: "chip hot" }, f)),
        doc.conflict.length > 1 ? " cannot all hold; change at least one of them" : " cannot hold as it is; change it")
      : "");
    put($("#check-warnings"), doc.warnings.length ? [h("h3", {}, "warnings"), violationTable(doc.warnings, hot)] : "");
    // As the CLI: the silent changes you can see first; those that change nothing you set
    // (validate --verbose) folded away; the notes on reading the command last.
    const all = doc.notes || [];
    const seen = all.filter((n) => n.visible), quiet = all.filter((n) => !n.visible);
    put($("#check-notes"), all.length || notes.length
      ? [h("h3", {}, "what SGLang would silently change"),
         seen.length ? h("ul", {}, seen.map((n) => h("li", {}, noteLine(n)))) : h("p", { class: "muted" }, "nothing you set"),
         quiet.length ? h("details", {}, h("summary", { class: "muted" }, `${quiet.length} more that change no value you set`),
           h("ul", {}, quiet.map((n) => h("li", {}, noteLine(n))))) : null,
         notes.length ? h("ul", { class: "muted" }, notes.map((n) => h("li", {}, n))) : null]
      : "");
    // A width that reads a value the launch leaves unknown shows "?", not SGLang's default.
    const unknownWidths = new Set(doc.derived_unknown || []);
    const d = Object.fromEntries(Object.entries(doc.derived).map(([k, v]) => [k, unknownWidths.has(k) ? "?" : v]));
    $("#check-derived").textContent = `derived: attn_dp ${d.attn_dp} · attn_tp ${d.attn_tp} · moe_tp ${d.moe_tp} · engine world ${d.engine_world}`;
    $("#check-fix").replaceChildren();
    if (!doc.valid) {
      $("#check-progress").textContent = "looking for the nearest fix...";
      await showFix({ ...body, ...(fixGpus ? { gpus: fixGpus } : {}) });
    }
    $("#check-progress").textContent = "";
  } catch (e) {
    $("#check-progress").textContent = "";
    showError(form, e);
  } finally {
    $("#check-run").disabled = false;
  }
}

// GPUs of what was pasted: a manifest object's every replica (`manifest.gpus`, as the
// CLI's `... runs 8 replicas of this server: 16 GPU(s) in all`), else the one server's.
function gpusText(doc) {
  if ((doc.derived_unknown || []).includes("gpus_used")) {
    return `GPU count not known here (it reads ${Object.entries(doc.unknown).map(([k, v]) => `${k} = ${v}`).join(", ")})`;
  }
  const m = doc.manifest;
  if (!m || m.replicas <= 1) return `${doc.derived.gpus_used} GPU(s)`;
  return `${m.gpus} GPU(s): ${m.object} runs ${m.replicas} replicas of ${doc.derived.gpus_used} GPU(s)`;
}

// A pasted deployment (servers in roles and routers): the CLI's counts, every copy of a
// role's replicas included, each server's own violations under its name, and the
// deployment rules' findings.
function showDeployment(doc, notes) {
  const d = doc.deployment;
  const servers = Object.values(d.servers).reduce((a, b) => a + b, 0);
  const size = `${servers} server(s), ${d.routers} router(s), ${d.gpus} GPU(s)`;
  $("#check-verdict").replaceChildren(d.valid
    ? h("span", { class: "ok" }, `✓ valid deployment on SGLang ${d.sglang_version}: ${size}`)
    : h("span", { class: "bad" }, `✗ invalid deployment on SGLang ${d.sglang_version}: ${size}`));
  const own = (key) => doc.roles.flatMap((r) => r[key].map((v) => ({ ...v, rule: `${r.server}: ${v.rule}` })));
  const found = (severity) => d.findings.filter((f) => f.severity === severity)
    .map((f) => ({ rule: f.rule, message: f.message, detail: f.servers.join(", "), hint: f.hint, fields: [] }));
  const errors = [...own("violations"), ...found("error")], warnings = [...own("warnings"), ...found("warning")];
  $("#check-violations").replaceChildren(errors.length ? violationTable(errors, new Set()) : "");
  $("#check-conflict").replaceChildren();
  put($("#check-warnings"), warnings.length ? [h("h3", {}, "warnings"), violationTable(warnings, new Set())] : "");
  put($("#check-notes"), notes.length ? h("ul", { class: "muted" }, notes.map((n) => h("li", {}, n))) : "");
  $("#check-derived").textContent = doc.roles
    .map((r) => `${r.server}${r.replicas > 1 ? ` ×${r.replicas}` : ""}: ${r.gpus} GPU(s) each`).join(" · ");
  $("#check-fix").replaceChildren();
}

async function showFix(body) {
  const { strict, ...fixBody } = body;
  const { doc } = await call("POST", "/api/fix", { ...fixBody, top: 3 });
  const panel = h("div", { class: "panel", id: "check-fix-panel" });
  $("#check-fix").replaceChildren(panel);
  if (!doc.fixes.length) {
    panel.append(h("h3", { class: "bad" }, "no fix"), h("pre", {}, JSON.stringify(doc.conflict || {}, null, 1)));
    return;
  }
  doc.fixes.forEach((f, i) => {
    panel.append(
      h("h3", {}, `${i === 0 ? "Nearest fix" : `Alternative ${i}`}: ${f.changes.length} change(s), repairs ${f.repairs.join(", ") || "-"}${f.optimal ? " (proven optimal)" : ""}`),
      h("table", {}, h("tbody", {}, f.changes.map((c) => h("tr", {}, h("td", { class: "text" }, c.field), h("td", {}, fmt(c.old)), h("td", {}, "→"), h("td", {}, fmt(c.new)))))),
      h("code", { class: "cmd" }, f.command_line),
    );
  });
  // `validate --rewrite`'s answer: the fix (default objective) written into the command.
  const { doc: rw } = await call("POST", "/api/rewrite", { sglang: body.sglang, sglang_version: body.sglang_version });
  if (rw.script) panel.append(h("h3", {}, "your command with the nearest fix written in"), lineDiff(body.sglang, rw.script));
}

// ---- groups -------------------------------------------------------------------------
let lastGroups = null;

async function runGroups() {
  const form = $("#groups-form");
  clearErrors(form);
  try {
    const { doc, exit } = await call("POST", "/api/groups", request(form));
    $("#groups-out").hidden = false;
    if (doc.roles) {  // a PD script: one entry per server, as `groups --json` gives it
      lastGroups = doc;
      drawGroups(doc);
      return;
    }
    if (exit !== 0) {
      lastGroups = null;
      $("#groups-summary").replaceChildren(h("span", { class: "bad" }, "✗ invalid layout: "), doc.violations.map((v) => v.rule).join(", "));
      $("#groups-grid").replaceChildren(violationTable(doc.violations, new Set(doc.conflict || [])));
      $("#groups-kinds").replaceChildren();
      return;
    }
    lastGroups = doc;
    drawGroups(doc);
  } catch (e) {
    showError(form, e);
  }
}

function colour(i, n) {
  const hue = Math.round((i * 360) / Math.max(n, 1) + 20) % 360;
  return `hsl(${hue} 70% ${i % 2 ? 78 : 86}%)`;
}

// A PD script's servers: each named with its summary (or why its layout is invalid), then
// each drawable server's grid under its name; the group kinds table is the first one's.
function drawDeployment(doc) {
  const kind = $("#groups-kind").value;
  $("#groups-summary").replaceChildren(...doc.roles.map((r) => h("p", { class: "server" },
    h("b", {}, `${r.server} (${r.role}): `),
    r.report ? h("span", { class: "bad" }, `invalid layout: ${r.report.violations.map((v) => v.rule).join(", ")}`) : r.summary)));
  const drawn = doc.roles.filter((r) => r.ranks);
  $("#groups-grid").replaceChildren(
    h("p", { class: "muted" }, `cell: global rank, GPU in its node, and its ${kind} group (one colour per group); each server as for its command alone`),
    ...drawn.flatMap((r) => [h("h3", {}, `${r.server} (${r.role})`), gridOf(r, kind)]));
  if (drawn.length) kindsTable(drawn[0], kind, doc); else $("#groups-kinds").replaceChildren();
}

function drawGroups(doc) {
  if (doc.roles) {
    drawDeployment(doc);
    return;
  }
  $("#groups-summary").textContent = doc.summary;
  if (!doc.ranks) {
    $("#groups-grid").replaceChildren(h("p", { class: "muted" }, "too many ranks to draw; the widths are above"));
    $("#groups-kinds").replaceChildren();
    return;
  }
  const kind = $("#groups-kind").value;
  $("#groups-grid").replaceChildren(h("p", { class: "muted" }, `cell: global rank, GPU in its node, and its ${kind} group (one colour per group)`), gridOf(doc, kind));
  kindsTable(doc, kind, doc);
}

// One layout's ranks by node, each cell coloured by its `kind` group.
function gridOf(doc, kind) {
  const groups = doc.groups[kind] || [];
  const groupOf = new Map();
  groups.forEach((g, i) => g.forEach((r) => groupOf.set(r, i)));
  const byNode = new Map();
  for (const r of doc.ranks) {
    if (!byNode.has(r.node)) byNode.set(r.node, []);
    byNode.get(r.node).push(r);
  }
  const grid = h("div", { class: "grid-nodes" });
  for (const [node, ranks] of byNode) {
    const row = h("div", { class: "node", "data-node": node }, h("div", { class: "label" }, `node ${node}`));
    for (const r of ranks) {
      const g = groupOf.get(r.rank);
      const cell = h("div", { class: "gpu", "data-rank": r.rank, title: `rank ${r.rank}: node ${r.node} gpu ${r.local_gpu}; pp ${r.pp}; attention dp ${r.attn_dp} cp ${r.attn_cp} tp ${r.attn_tp}; MoE dp ${r.moe_dp} ep ${r.ep} tp ${r.moe_tp}` },
        h("b", {}, r.rank), `gpu ${r.local_gpu}`, h("div", {}, `${kind} ${g}`));
      cell.style.background = colour(g, groups.length);
      row.append(cell);
    }
    grid.append(row);
  }
  return grid;
}

// The group kinds of one layout: how many, their size, where their traffic goes; a row
// click recolours by that kind (`shown`: what was drawn, the layout or the deployment).
function kindsTable(doc, kind, shown) {
  const node = new Map(doc.ranks.map((r) => [r.rank, r.node]));
  $("#groups-kinds").replaceChildren(
    h("thead", {}, h("tr", {}, ["group kind", "groups", "size", "traffic"].map((c) => h("th", { class: "text" }, c)))),
    h("tbody", {}, Object.entries(doc.groups).map(([k, gs]) => {
      const spans = gs.filter((g) => new Set(g.map((r) => node.get(r))).size > 1).length;
      const where = gs[0] && gs[0].length === 1 ? "no traffic (size 1)" : spans ? `network: ${spans} of ${gs.length} group(s) span nodes` : "NVLink: every group inside one node";
      return h("tr", { class: k === kind ? "selected" : "", onclick: () => { $("#groups-kind").value = k; drawGroups(shown); } },
        h("td", { class: "text" }, k), h("td", {}, gs.length), h("td", {}, gs[0] ? gs[0].length : 0), h("td", { class: "text" }, where));
    })));
}

// ---- compare releases ---------------------------------------------------------------
async function runCompare() {
  const form = $("#compare-form");
  clearErrors(form);
  try {
    const { doc } = await call("POST", "/api/diff", request(form));
    const out = $("#compare-out");
    out.hidden = false;
    const parts = [h("h2", {}, `SGLang ${doc.from} → ${doc.to}`)];
    if (doc.layout) {
      parts.push(h("div", { class: "panel", id: "compare-layout" }, h("h3", {}, "your layout"),
        Object.entries(doc.layout.valid).map(([v, ok]) => h("p", {}, h("b", {}, `${v}: `),
          h("span", { class: ok ? "ok" : "bad" }, ok ? "valid" : "invalid"), ok ? "" : ` (${doc.layout.violations[v].join(", ")})`)),
        Object.entries(doc.layout.resolved_changes).map(([k, vs]) => h("p", {}, `resolved ${k}: ${Object.values(vs).map(fmt).join(" → ")}`))));
    }
    for (const kind of ["added", "removed", "changed"]) {
      const rules = doc.rules[kind];
      if (!rules.length) continue;
      parts.push(h("h3", {}, `rules ${kind} (${rules.length})`), h("table", {}, h("tbody", {}, rules.map((r) => h("tr", {},
        h("td", { class: "text" }, h("b", {}, r.id)),
        h("td", { class: "text" }, kind === "changed" ? `${r.from.condition} [${r.from.kind}] → ${r.to.condition} [${r.to.kind}]${r.definitions.map((d) => `; ${d.name}: ${d.from} → ${d.to}`).join("")}` : `${r.condition || ""} [${r.kind}]`),
        h("td", { class: "text" }, kind === "changed" ? r.to.message : r.message))))));
    }
    for (const [kind, steps] of Object.entries(doc.resolution_steps)) {
      if (steps.length) parts.push(h("h3", {}, `resolution steps ${kind}`), h("p", {}, steps.map((x) => h("span", { class: "chip" }, x))));
    }
    for (const [kind, fields] of Object.entries(doc.fields)) {
      if (fields.length) parts.push(h("h3", {}, `fields ${kind}`), h("p", {}, fields.map((x) => h("span", { class: "chip" }, x))));
    }
    out.replaceChildren(...parts);
  } catch (e) {
    showError(form, e);
  }
}

boot().catch((e) => { document.body.prepend(h("p", { class: "err" }, `meshsat: error: ${e.message}`)); });
