// Coxswain's run viewer. The server decides what to draw (steps placed,
// arrows with what moved or why not); this script only fetches it from
// /api/v1, draws it, and follows the server's live streams.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const PREVIEW = "[moved out of the status: ";
const main = () => document.getElementById("main");
let live = null; // the EventSource of the page shown

// ---- small helpers --------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}

// replaceChildren would write a null it is given as the text "null".
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch (_) { return value; }
  }
  return JSON.stringify(value, null, 2);
}

function age(time) {
  if (!time) return "";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(time)) / 1000));
  if (s < 120) return s + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}

class Refused extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

// Every call goes to the API as the person; a missing sign-in goes to the
// sign-in page, anything else refused is shown as the server said it.
async function api(path, options) {
  const init = Object.assign({ headers: {} }, options || {});
  if (init.body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.headers["x-coxswain"] = "1";
    init.method = init.method || "POST";
  }
  const response = await fetch("/api/v1" + path, init);
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = { error: text }; }
  if (response.status === 401) {
    signIn(body && body.error);
    throw new Refused(401, body && body.error);
  }
  if (!response.ok) throw new Refused(response.status, (body && body.error) || response.statusText);
  return body;
}

function follow(path, handlers) {
  if (live) live.close();
  live = new EventSource("/api/v1" + path + "?watch=true");
  for (const [name, handle] of Object.entries(handlers)) {
    live.addEventListener(name, (e) => handle(JSON.parse(e.data)));
  }
}

function showError(where, error) {
  fill(where, el("p", { class: "error", role: "alert", "data-error": "" }, error.message || String(error)));
}

// ---- routing ---------------------------------------------------------------

const state = { ns: "default", user: null };

function route() {
  const path = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (live) { live.close(); live = null; }
  if (path[0] === "sign-in") return signIn();
  if (path[0] === "namespaces" && path[1]) {
    state.ns = path[1];
    document.getElementById("namespace").value = state.ns;
    navLinks();
    if (path[2] === "runs" && path[3]) return runPage(path[1], path[3]);
    if (path[2] === "runs") return runsPage(path[1]);
    if (path[2] === "flows" && path[3]) return flowPage(path[1], path[3]);
    if (path[2] === "flows") return flowsPage(path[1]);
  }
  location.replace("/namespaces/" + encodeURIComponent(state.ns) + "/runs");
}

function navLinks() {
  const ns = encodeURIComponent(state.ns);
  document.getElementById("nav-runs").href = "/namespaces/" + ns + "/runs";
  document.getElementById("nav-flows").href = "/namespaces/" + ns + "/flows";
}

function go(href) {
  history.pushState(null, "", href);
  route();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest && e.target.closest("a[href^='/']");
  if (a && !e.ctrlKey && !e.metaKey && !e.shiftKey && a.getAttribute("href") !== "#") {
    e.preventDefault();
    go(a.getAttribute("href"));
  }
});
window.addEventListener("popstate", route);

async function start() {
  document.getElementById("namespace-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const ns = document.getElementById("namespace").value.trim();
    if (ns) go("/namespaces/" + encodeURIComponent(ns) + "/runs");
  });
  if (location.pathname !== "/sign-in") {
    try {
      state.user = await api("/whoami");
      state.ns = state.user.namespace || state.ns;
      document.getElementById("whoami").textContent = state.user.username;
    } catch (e) {
      if (e.code === 401) return;
    }
  }
  route();
}

// ---- sign in (--auth token) ------------------------------------------------

function signIn(why) {
  if (live) { live.close(); live = null; }
  const next = location.pathname === "/sign-in"
    ? (new URLSearchParams(location.search).get("next") || "/")
    : location.pathname;
  if (location.pathname !== "/sign-in") history.replaceState(null, "", "/sign-in?next=" + encodeURIComponent(next));
  fill(main(), el("section", { class: "signin", "aria-label": "Sign in" },
    el("h1", { text: "Sign in" }),
    el("p", { text: "This viewer acts as you: every read and write is made with your token, so Kubernetes RBAC and the admission webhook judge you." }),
    el("p", { class: "quiet", text: "kubectl create token NAME, or your OIDC provider's id token." }),
    why ? el("p", { class: "error", role: "alert", text: why }) : null,
    el("form", { method: "post", action: "/sign-in" },
      el("label", { for: "token", text: "Bearer token" }),
      el("textarea", { id: "token", name: "token", required: true, autocomplete: "off" }),
      el("input", { type: "hidden", name: "next", value: next }),
      el("p", {}, el("button", { type: "submit", text: "Sign in" })))));
}

// ---- runs ------------------------------------------------------------------

function runsPage(ns) {
  const rows = new Map();
  const body = el("tbody");
  const table = el("table", { "aria-label": "Runs in " + ns },
    el("thead", {}, el("tr", {}, ["Run", "Flow", "Phase", "Step", "Progress", "Age"].map((h) => el("th", { text: h })))),
    body);
  const status = el("p", { class: "quiet", text: "Watching…" });
  fill(main(), el("h1", { text: "Runs in " + ns }), status, table);
  const draw = () => {
    const sorted = [...rows.values()].sort((a, b) => (b.created || "").localeCompare(a.created || "") || a.name.localeCompare(b.name));
    fill(body, ...sorted.map((r) => el("tr", { "data-run": r.name },
      el("td", {}, el("a", { href: "/namespaces/" + encodeURIComponent(ns) + "/runs/" + encodeURIComponent(r.name), text: r.name })),
      el("td", {}, el("a", { href: "/namespaces/" + encodeURIComponent(ns) + "/flows/" + encodeURIComponent(r.flow), text: r.flow })),
      el("td", { class: "phase phase-" + r.phase, "data-phase": r.phase, text: r.phase }),
      el("td", { text: r.currentStep || "" }),
      el("td", { text: r.progress || "" }),
      el("td", { title: r.created || "", text: age(r.created) }))));
    status.textContent = sorted.length ? sorted.length + " runs, live" : "No runs yet (live).";
  };
  follow("/namespaces/" + encodeURIComponent(ns) + "/runs", {
    init: () => rows.clear(),
    run: (r) => { rows.set(r.name, r); draw(); },
    deleted: (r) => { rows.delete(r.name); draw(); },
    ready: draw,
    failure: (e) => { status.textContent = e.error; status.className = "error"; },
  });
  live.onerror = () => {
    // A stream the API server refused says why on a plain request.
    api("/namespaces/" + encodeURIComponent(ns) + "/runs").catch((e) => {
      if (live) { live.close(); live = null; }
      showError(main(), e);
    });
  };
}

function runPage(ns, name) {
  const base = "/namespaces/" + encodeURIComponent(ns) + "/runs/" + encodeURIComponent(name);
  const page = {
    ns, name, base, selected: null,
    head: el("section", { "aria-label": "Run " + name }),
    approvals: el("section", { "aria-label": "Approvals", id: "approvals" }),
    // Outside the forms: a form goes once its Approval is answered, what
    // the answer met stays.
    notice: el("div", { id: "notice", "aria-live": "assertive" }),
    canvas: el("div", { class: "canvas", role: "region", "aria-label": "Run graph" }),
    panel: el("aside", { id: "panel", "aria-label": "Details", "aria-live": "polite" },
      el("p", { class: "quiet", text: "Click a step or an arrow." })),
    shownApprovals: "",
  };
  fill(main(), page.head, page.notice, page.approvals,
    el("div", { class: "run-layout" }, page.canvas, page.panel));
  api(base).then((run) => drawRun(page, run)).catch((e) => showError(page.head, e));
  follow(base, {
    run: (run) => drawRun(page, run),
    failure: (e) => page.head.append(el("p", { class: "error", role: "alert", text: e.error })),
  });
  live.onerror = () => {
    api(base).catch((e) => {
      if (live) { live.close(); live = null; }
      showError(page.head, e);
    });
  };
}

function drawRun(page, run) {
  page.run = run;
  const ns = encodeURIComponent(page.ns);
  fill(page.head, 
    el("h1", {}, "Run ", el("span", { "data-run-name": "", text: run.name })),
    el("dl", { class: "kv" },
      el("dt", { text: "Flow" }), el("dd", {}, el("a", { href: "/namespaces/" + ns + "/flows/" + encodeURIComponent(run.flow), text: run.flow })),
      el("dt", { text: "Phase" }), el("dd", { class: "phase phase-" + run.phase, "data-phase": run.phase, text: run.phase }),
      el("dt", { text: "Progress" }), el("dd", { text: (run.progress || "") + (run.currentStep ? " · at " + run.currentStep : "") }),
      el("dt", { text: "Started" }), el("dd", { text: run.startedAt || "not yet" }),
      run.finishedAt ? [el("dt", { text: "Finished" }), el("dd", { text: run.finishedAt })] : null,
      run.rerunOf ? [el("dt", { text: "Rerun of" }), el("dd", {}, el("a", { href: "/namespaces/" + ns + "/runs/" + encodeURIComponent(run.rerunOf.run || run.rerunOf.name || ""), text: run.rerunOf.run || run.rerunOf.name || "" }))] : null),
    run.error ? el("p", { class: "error", role: "alert", "data-run-error": "", text: run.error.message || pretty(run.error) }) : null,
    run.output !== undefined && run.output !== null ? el("details", {}, el("summary", { text: "Output" }), el("pre", { text: pretty(run.output) })) : null,
    run.flowProblem ? el("p", { class: "error", role: "alert", text: run.flowProblem }) : null);
  drawApprovals(page, run.approvals || []);
  if (run.picture) {
    const scroll = [page.canvas.scrollLeft, page.canvas.scrollTop];
    fill(page.canvas, drawPicture(run.picture, page));
    [page.canvas.scrollLeft, page.canvas.scrollTop] = scroll;
  }
  if (page.selected && page.selected.kind === "step") openStep(page, page.selected.key, true);
}

// ---- the graph -------------------------------------------------------------

function drawPicture(picture, page) {
  const root = svg("svg", { width: picture.width, height: picture.height, role: "img", "aria-label": "Steps and arrows", viewBox: "0 0 " + picture.width + " " + picture.height });
  root.append(svg("defs", {},
    marker("head", "#475467"), marker("head-taken", "#1d2330"), marker("head-back", "#a15c00"), marker("head-not", "#98a2b3")));
  for (const a of picture.arrows) root.append(drawArrow(a, page));
  for (const s of picture.steps) root.append(drawStep(s, page));
  return root;
}

function marker(id, color) {
  return svg("marker", { id, viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse", markerWidth: "11", markerHeight: "11", orient: "auto-start-reverse" },
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: color }));
}

function curve(a) {
  const [[x1, y1], [x2, y2]] = a.points;
  if (a.kind === "sendBack") {
    const out = 40 + Math.min(80, Math.abs(y1 - y2) / 6);
    return { d: `M ${x1} ${y1} C ${x1 + out} ${y1}, ${x2 + out} ${y2}, ${x2} ${y2}`, mid: [x1 + out * 0.75, (y1 + y2) / 2] };
  }
  const dy = Math.max(20, (y2 - y1) / 2);
  return { d: `M ${x1} ${y1} C ${x1} ${y1 + dy}, ${x2} ${y2 - dy}, ${x2} ${y2}`, mid: [(x1 + x2) / 2, (y1 + y2) / 2] };
}

function drawArrow(a, page) {
  const { d, mid } = curve(a);
  const state = a.state === "taken" ? "taken" : a.state === "notTaken" ? "not-taken" : "plain";
  const head = a.kind === "sendBack" ? "head-back" : state === "taken" ? "head-taken" : state === "not-taken" ? "head-not" : "head";
  const said = a.state === "taken" ? "taken" + (a.count > 1 ? " " + a.count + " times" : "") : a.state === "notTaken" ? "not taken" : "";
  const g = svg("g", {
    class: "arrow " + state + " kind-" + a.kind, "data-arrow": a.id, role: "button", tabindex: "0",
    "aria-label": "arrow " + a.id.replace("->", " to ") + (said ? ", " + said : ""),
  },
  svg("path", { class: "hit", d }),
  svg("path", { class: "line", d, "marker-end": "url(#" + head + ")" }),
  svg("circle", { class: "handle", cx: mid[0], cy: mid[1], r: 5 }),
  a.count > 1 ? svg("text", { class: "count", x: mid[0] + 8, y: mid[1] + 4 }, document.createTextNode("×" + a.count)) : null);
  const open = () => openArrow(page, a);
  g.addEventListener("click", open);
  g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
  return g;
}

function drawStep(s, page) {
  let sub = s.kind + " · " + s.status;
  if (s.parts) sub = s.kind + " · " + s.parts.completed + "/" + s.parts.total + " parts" + (s.parts.failed ? ", " + s.parts.failed + " failed" : "");
  else if (s.attempts > 1) sub += " · " + s.attempts + " attempts";
  const g = svg("g", {
    class: "step status-" + s.status + (page.selected && page.selected.key === s.key ? " selected" : ""),
    "data-step": s.key, "data-status": s.status, role: "button", tabindex: "0", "aria-label": s.label,
    transform: `translate(${s.x} ${s.y})`,
  },
  svg("rect", { width: 200, height: 48, rx: 6 }),
  svg("text", { class: "key", x: 10, y: 20 }, document.createTextNode(clip(s.key, 26))),
  svg("text", { class: "sub", x: 10, y: 38 }, document.createTextNode(clip(sub, 34))),
  svg("title", {}, document.createTextNode(s.error ? s.label + ": " + s.error : s.label)));
  const open = () => openStep(page, s.key);
  g.addEventListener("click", open);
  g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
  return g;
}

function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function select(page, kind, key) {
  page.selected = { kind, key };
  for (const n of page.canvas.querySelectorAll(".selected")) n.classList.remove("selected");
  const sel = kind === "step" ? `[data-step="${CSS.escape(key)}"]` : `[data-arrow="${CSS.escape(key)}"]`;
  const node = page.canvas.querySelector(sel);
  if (node) node.classList.add("selected");
}

// ---- an arrow's panel --------------------------------------------------------

async function openArrow(page, a) {
  select(page, "arrow", a.id);
  const panel = page.panel;
  if (!page.base) return;
  fill(panel, el("h2", { text: "Arrow " + a.from + (a.exit ? "." + a.exit : "") + " → " + a.to }), el("p", { class: "quiet", text: "Loading…" }));
  panel.setAttribute("data-panel", "arrow");
  panel.setAttribute("data-arrow-panel", a.id);
  let full = a;
  if (a.state === "taken" && a.kind === "flow") {
    try { full = await api(page.base + "/arrows/" + encodeURIComponent(a.id)); } catch (e) { return showError(panel, e); }
  }
  const kind = { flow: "", sendBack: " (send-back)", eachPass: " (each pass of the loop)" }[a.kind];
  const what = full.state === "taken" ? "Taken" + (full.count > 1 ? " on " + full.count + " passes" : "") : full.state === "notTaken" ? "Not taken" : "The flow's shape (no run)";
  const moved = full.moved || [];
  fill(panel, 
    el("h2", { text: "Arrow " + a.from + (a.exit ? "." + a.exit : "") + " → " + a.to + kind }),
    el("p", { "data-arrow-state": full.state, text: what }),
    full.why ? el("p", { "data-why": "", text: "Why nothing moved: " + full.why }) : null,
    full.unread ? el("p", { class: "quiet", text: "Values moved out of the status are shown as their previews: " + full.unread }) : null,
    full.state === "taken" && a.kind === "flow" && moved.length === 0 ? el("p", { "data-why": "", text: "Nothing moved: control only (the step reads nothing of " + a.from + ")." }) : null,
    moved.length ? el("h3", { text: "What moved" }) : null,
    ...moved.map((m) => el("div", { class: "moved", "data-moved": m.reference },
      el("dl", { class: "kv" },
        el("dt", { text: "Reference" }), el("dd", {}, el("code", { text: m.reference })),
        el("dt", { text: "Into" }), el("dd", {}, el("code", { text: m.into })),
        el("dt", { text: "Size" }), el("dd", { text: bytes(m.bytes) })),
      el("pre", { "data-moved-value": "", text: pretty(m.json) }))));
}

// ---- a step's panel ------------------------------------------------------------

async function openStep(page, key, quiet) {
  select(page, "step", key);
  const panel = page.panel;
  if (!page.base) return;
  if (!quiet) fill(panel, el("h2", { text: "Step " + key }), el("p", { class: "quiet", text: "Loading…" }));
  panel.setAttribute("data-panel", "step");
  panel.setAttribute("data-step-panel", key);
  let step;
  try { step = await api(page.base + "/steps/" + encodeURIComponent(key)); } catch (e) { return showError(panel, e); }
  if (!page.selected || page.selected.key !== key) return;
  const r = step.record || { status: "pending", attempts: [] };
  const parts = r.parts || [];
  fill(panel, 
    el("h2", { text: "Step " + key }),
    el("dl", { class: "kv" },
      el("dt", { text: "Kind" }), el("dd", { text: step.kind }),
      el("dt", { text: "Status" }), el("dd", { class: "status-" + r.status, "data-step-status": r.status, text: r.status }),
      r.exit ? [el("dt", { text: "Exit" }), el("dd", { text: r.exit })] : null,
      r.reason ? [el("dt", { text: "Reason" }), el("dd", { text: r.reason })] : null,
      r.copiedFrom ? [el("dt", { text: "Copied from" }), el("dd", { text: r.copiedFrom.run || JSON.stringify(r.copiedFrom) })] : null,
      el("dt", { text: "Where" }), el("dd", {}, el("code", { text: step.location }))),
    r.error ? el("p", { class: "error", role: "alert", "data-step-error": "", text: r.error.message }) : null,
    step.step.input !== undefined ? el("details", {}, el("summary", { text: "Input as written" }), el("pre", { text: pretty(step.step.input) })) : null,
    inputsReceived(step.arrowsIn || []),
    r.output !== undefined ? valueBlock(page, "Output", r.output, "/steps/" + key + "/output") : null,
    parts.length ? el("h3", { text: parts.length + " parts" }) : null,
    parts.length ? el("table", { "aria-label": "Parts" }, parts.slice(0, 200).map((p) => el("tr", {},
      el("td", { text: p.label || p.key }), el("td", { class: "status-" + p.status, text: p.status }),
      el("td", { text: p.error ? p.error.message : "" })))) : null,
    parts.length > 200 ? el("p", { class: "quiet", text: "… and " + (parts.length - 200) + " more" }) : null,
    el("h3", { text: (r.attempts || []).length === 1 ? "1 attempt" : (r.attempts || []).length + " attempts" }),
    ...(r.attempts || []).map((a, i) => attemptBlock(page, key, a, i)),
    logBlock(page, key, step.kind));
}

function inputsReceived(arrows) {
  const moved = arrows.flatMap((a) => (a.moved || []).map((m) => ({ a, m })));
  if (!moved.length) return null;
  return el("details", { open: true }, el("summary", { text: "Inputs received" }),
    el("table", {}, moved.map(({ a, m }) => el("tr", {},
      el("td", {}, el("code", { text: m.into })),
      el("td", { text: "from " + a.from }),
      el("td", {}, el("code", { text: m.json.length > 120 ? m.json.slice(0, 119) + "…" : m.json }))))));
}

function valueBlock(page, title, value, pointer) {
  const pre = el("pre", { "data-value": pointer, text: pretty(value) });
  const moved = typeof value === "string" && value.startsWith(PREVIEW);
  const fetchWhole = async () => {
    button.disabled = true;
    try {
      const whole = await api(page.base + "/values?path=" + encodeURIComponent(pointer));
      pre.textContent = pretty(whole.value);
      button.remove();
    } catch (e) { pre.after(el("p", { class: "error", role: "alert", text: e.message })); }
  };
  const button = moved ? el("button", { class: "plain", type: "button", "data-fetch-value": pointer, onclick: fetchWhole, text: "Fetch the whole value" }) : null;
  return el("div", {}, el("h3", { text: title }), pre, button);
}

function attemptBlock(page, key, a, i) {
  return el("div", { class: "attempt", "data-attempt": a.number },
    el("dl", { class: "kv" },
      el("dt", { text: "Attempt" }), el("dd", { text: a.number + (a.iteration !== undefined ? " (pass " + a.iteration + ")" : "") }),
      el("dt", { text: "Status" }), el("dd", { class: "status-" + a.status, text: a.status }),
      el("dt", { text: "Started" }), el("dd", { text: a.startedAt || "" }),
      el("dt", { text: "Finished" }), el("dd", { text: a.finishedAt || "" }),
      a.usage ? [el("dt", { text: "Tokens" }), el("dd", { text: a.usage.promptTokens + " in, " + a.usage.completionTokens + " out" })] : null),
    a.error ? el("p", { class: "error", text: a.error.message }) : null,
    a.feedback ? el("p", { text: "Feedback: " + a.feedback }) : null,
    a.output !== undefined ? valueBlock(page, "Output", a.output, "/steps/" + key + "/attempts/" + i + "/output") : null,
    a.lookups !== undefined ? valueBlock(page, "Looked up", a.lookups, "/steps/" + key + "/attempts/" + i + "/lookups") : null,
    a.log ? el("details", {}, el("summary", { text: "Last lines of stderr" + (a.log.cut ? " (earlier cut)" : "") }), el("pre", { text: a.log.text })) : null);
}

function logBlock(page, key, kind) {
  if (kind !== "script") return null;
  const box = el("div", { "data-log": key }, el("h3", { text: "Log" }), el("p", { class: "quiet", text: "Loading…" }));
  api(page.base + "/steps/" + encodeURIComponent(key) + "/log").then((log) => {
    const pods = log.pods || [];
    fill(box, el("h3", { text: "Log" }),
      pods.length
        ? pods.map((p) => el("div", {}, el("p", { class: "quiet", text: "pod " + p.pod }), el("pre", { "data-log-text": "", text: p.text || "(empty)" })))
        : (log.attempts || []).map((a) => el("div", {}, el("p", { class: "quiet", text: "attempt " + a.number + ", from the record" + (a.cut ? " (earlier lines cut)" : "") }), el("pre", { "data-log-text": "", text: a.text }))),
      log.note ? el("p", { class: "quiet", "data-log-note": "", text: "The pods cannot be read as you (" + log.note + "): shown is what the run's record kept." }) : null,
      !pods.length && !(log.attempts || []).length ? el("p", { class: "quiet", text: "No log: no pod is left and the record kept none." }) : null);
  }).catch((e) => showError(box, e));
  return box;
}

// ---- approvals ---------------------------------------------------------------

function drawApprovals(page, approvals) {
  const names = approvals.map((a) => a.name + "/" + (a.refused || "") + "/" + (a.tally || "")).join(",");
  if (names === page.shownApprovals) return; // keep what the person is typing
  page.shownApprovals = names;
  fill(page.approvals, ...approvals.map((a) => approvalForm(page, a)));
}

function approvalForm(page, a) {
  const result = page.notice;
  const decisions = a.decisions.length
    ? el("fieldset", {}, el("legend", { text: "Decision" }), a.decisions.map((d, i) =>
      el("label", {}, el("input", { type: "radio", name: "decision", value: d, required: true, checked: i === 0 ? undefined : undefined }), " " + d)))
    : null;
  const fields = (a.fields || []).map((f) => field(f));
  const form = el("form", { class: "approval", "data-approval": a.name, "data-approval-step": a.step, "aria-label": "Approval for step " + a.step },
    el("h2", { text: "Step " + a.step + " waits for a person" }),
    a.instructions ? el("p", { "data-instructions": "", text: a.instructions }) : null,
    el("p", { class: "quiet", "data-approvers": "", text: "Who may decide: " + a.approvers + (a.needed > 1 ? " (" + a.needed + " must agree" + (a.tally ? "; " + a.tally : "") + ")" : "") }),
    a.refused ? el("p", { class: "refusal", text: "The last answer was not taken: " + a.refused }) : null,
    a.show ? el("details", { open: true }, el("summary", { text: "What it shows" }), el("pre", { "data-show": "", text: pretty(a.show) })) : null,
    decisions,
    fields.length ? el("fieldset", {}, el("legend", { text: "Fill in" }), fields) : null,
    el("label", { for: "feedback-" + a.name, text: "Feedback" }),
    el("textarea", { id: "feedback-" + a.name, name: "feedback", rows: 3 }),
    el("p", {}, el("button", { type: "submit", text: "Answer as " + ((state.user && state.user.username) || "you") })));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const data = new FormData(form);
    const answer = { feedback: data.get("feedback") || undefined };
    if (a.decisions.length) answer.decision = data.get("decision");
    if ((a.fields || []).length) {
      answer.response = {};
      for (const f of a.fields) {
        const raw = data.get("field-" + f.name);
        answer.response[f.name] = read(f, raw);
      }
    }
    fill(result, el("p", { class: "quiet", text: "Sending…" }));
    try {
      const written = await api("/namespaces/" + encodeURIComponent(page.ns) + "/approvals/" + encodeURIComponent(a.name) + "/answer", { body: JSON.stringify(answer) });
      const by = written.decidedBy ? written.decidedBy.username : (state.user && state.user.username);
      fill(result, el("p", { class: "accepted", role: "status", "data-accepted": "", text: "Answered as " + by + "." }));
    } catch (err) {
      fill(result, el("p", { class: "refusal", role: "alert", "data-refusal": "", text: err.message }));
    }
  });
  return form;
}

function field(f) {
  const id = "field-" + f.name;
  const label = el("label", { for: id, text: f.name + (f.description ? " — " + f.description : "") });
  let input;
  if (f.type === "boolean") input = el("input", { id, name: id, type: "checkbox", value: "true" });
  else if (f.type === "number" || f.type === "integer") input = el("input", { id, name: id, type: "number", step: f.type === "integer" ? "1" : "any" });
  else if (f.type === "array" || f.type === "object") input = el("textarea", { id, name: id, rows: 3, placeholder: "JSON" });
  else input = el("input", { id, name: id, type: "text" });
  return el("div", {}, label, input);
}

function read(f, raw) {
  if (f.type === "boolean") return raw === "true";
  if (raw === null || raw === "") return null;
  if (f.type === "number" || f.type === "integer") return Number(raw);
  if (f.type === "array" || f.type === "object") { try { return JSON.parse(raw); } catch (_) { return raw; } }
  return raw;
}

// ---- flows -----------------------------------------------------------------

async function flowsPage(ns) {
  fill(main(), el("h1", { text: "Flows in " + ns }), el("p", { class: "quiet", text: "Loading…" }));
  let list;
  try { list = await api("/namespaces/" + encodeURIComponent(ns) + "/flows"); } catch (e) { return showError(main(), e); }
  fill(main(), el("h1", { text: "Flows in " + ns }),
    list.flows.length ? el("table", { "aria-label": "Flows in " + ns },
      el("thead", {}, el("tr", {}, ["Flow", "Steps", "Valid"].map((h) => el("th", { text: h })))),
      el("tbody", {}, list.flows.map((f) => el("tr", { "data-flow": f.name },
        el("td", {}, el("a", { href: "/namespaces/" + encodeURIComponent(ns) + "/flows/" + encodeURIComponent(f.name), text: f.name })),
        el("td", { text: f.steps }),
        el("td", {}, f.valid ? el("span", { class: "status-completed", text: "valid" })
          : el("ul", {}, f.problems.map((p) => el("li", { class: "error", text: problem(p) })))))))) : el("p", { class: "quiet", text: "No flows." }));
}

function problem(p) {
  return (p.step ? "step " + p.step + (p.field ? "." + p.field : "") + ": " : "") + p.message + (p.character ? " (character " + p.character + ")" : "");
}

async function flowPage(ns, name) {
  fill(main(), el("h1", { text: "Flow " + name }), el("p", { class: "quiet", text: "Loading…" }));
  let flow;
  try { flow = await api("/namespaces/" + encodeURIComponent(ns) + "/flows/" + encodeURIComponent(name)); } catch (e) { return showError(main(), e); }
  const page = { ns, base: null, selected: null, canvas: el("div", { class: "canvas", role: "region", "aria-label": "Flow graph" }), panel: el("aside", { id: "panel", "aria-live": "polite" }) };
  page.canvas.append(drawFlow(flow.picture, page));
  fill(main(), el("h1", { text: "Flow " + name }),
    el("p", { class: "quiet", text: flow.digest }),
    flow.valid ? el("p", { class: "status-completed", text: "Valid." }) : el("ul", { "aria-label": "Problems" }, flow.problems.map((p) => el("li", { class: "error", text: problem(p) }))),
    page.canvas);
}

function drawFlow(picture) {
  const root = svg("svg", { width: picture.width, height: picture.height, role: "img", "aria-label": "Steps and arrows" });
  root.append(svg("defs", {}, marker("head", "#475467"), marker("head-back", "#a15c00")));
  const page = { canvas: root, panel: el("div"), selected: null };
  for (const a of picture.arrows) root.append(drawArrow(a, page));
  for (const s of picture.steps) root.append(drawStep(s, page));
  return root;
}

start();
