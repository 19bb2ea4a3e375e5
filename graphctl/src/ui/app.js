// The inspector's page: every stored string reaches the page through textContent or an attribute set
// with setAttribute, never as markup (the server's Content-Security-Policy forbids inline scripts too).
"use strict";

const main = document.getElementById("main");
const tokenInput = document.getElementById("token");
tokenInput.value = sessionStorage.getItem("graphctl-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("graphctl-token", tokenInput.value));

/** An element with text and attributes; children appended. */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

async function api(path, options) {
  const response = await fetch("/api" + path, options);
  const body = await response.json().catch(() => ({ error: { kind: "failed", message: "not JSON" } }));
  if (!response.ok) throw new Error(body.error ? body.error.kind + ": " + body.error.message : String(response.status));
  return body;
}

async function act(path, body) {
  const headers = { "content-type": "application/json" };
  if (tokenInput.value) headers["authorization"] = "Bearer " + tokenInput.value;
  return api(path, { method: "POST", headers, body: body === undefined ? "" : JSON.stringify(body) });
}

function statusCell(status) {
  return el("span", { class: "status-" + status, text: status });
}

function table(head, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c))))));
}

function errorBox(e) {
  return el("p", { class: "error", text: String(e.message || e) });
}

// ---------------------------------------------------------------------------------------------
// The runs list

const PAGE = 50;

/** The runs list: a page of runs in run-id order from the hash's cursor (`after`), filtered by status
 * and id prefix on the server; `earlier` keeps the cursors of the pages before, for "previous". */
async function showRuns() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const status = params.get("status") || "";
  const prefix = params.get("prefix") || "";
  const after = params.get("after") || "";
  const earlier = params.getAll("earlier");
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (status) query.set("status", status);
  if (prefix) query.set("prefix", prefix);
  if (after) query.set("after", after);
  main.replaceChildren(el("p", { text: "Loading runs…" }));
  let data;
  try {
    data = await api("/runs?" + query);
  } catch (e) {
    main.replaceChildren(errorBox(e));
    return;
  }
  const filter = el("select", { id: "status-filter" },
    ...["", "running", "completed", "paused", "interrupted", "waiting", "failed", "cancelled"].map((s) => {
      const o = el("option", { value: s, text: s || "any status" });
      if (s === status) o.selected = true;
      return o;
    }));
  const box = el("input", { id: "search", placeholder: "run id starts with…", value: prefix });
  const go = (cursor, before) => {
    const p = new URLSearchParams();
    if (filter.value) p.set("status", filter.value);
    if (box.value) p.set("prefix", box.value);
    if (cursor) p.set("after", cursor);
    for (const c of before) p.append("earlier", c);
    location.hash = "#/?" + p;
  };
  filter.addEventListener("change", () => go("", []));
  box.addEventListener("change", () => go("", []));
  const rows = data.runs.map((r) => [
    el("a", { href: "#/run/" + encodeURIComponent(r.run_id), class: "run-link", text: r.run_id }),
    statusCell(r.status),
    document.createTextNode(r.graph || "?"),
    document.createTextNode(String(r.version)),
    document.createTextNode(r.label || ""),
    document.createTextNode(String(r.latest_step)),
    document.createTextNode(r.started_ms ? new Date(r.started_ms).toISOString() : ""),
    document.createTextNode(r.updated_ms ? new Date(r.updated_ms).toISOString() : "unreadable"),
  ]);
  // The page before starts after the cursor that was current before this one.
  const previous = el("button", { id: "previous", text: "← previous",
    onclick: () => go(earlier[earlier.length - 1] || "", earlier.slice(0, -1)) });
  const next = el("button", { id: "next", text: "next →", onclick: () => go(data.next, [...earlier, after]) });
  const first = earlier.length === 0 && !after;
  const shown = first && !data.next ? data.runs.length + " runs" : data.runs.length + " on this page";
  main.replaceChildren(
    el("h1", { text: "Runs" }),
    el("div", { class: "controls" }, filter, box, el("span", { id: "count", text: shown })),
    table(["run", "status", "graph", "version", "label", "step", "started", "updated"], rows),
    el("div", { class: "controls" }, first ? el("span") : previous, data.next ? next : el("span")));
}

// ---------------------------------------------------------------------------------------------
// A run

let live = null;

async function showRun(id) {
  const base = "/runs/" + encodeURIComponent(id);
  let show, history, log;
  try {
    [show, history, log] = await Promise.all([api(base), api(base + "/history"), api(base + "/events?limit=1000")]);
  } catch (e) {
    main.replaceChildren(el("p", {}, el("a", { href: "#/", text: "← runs" })), errorBox(e));
    return;
  }
  const steps = history.history.map((h) => h.step);
  const page = el("div", { id: "run-page" },
    el("p", {}, el("a", { href: "#/", text: "← runs" })),
    el("h1", { id: "run-title", text: "Run " + id }),
    el("p", { id: "run-status" }, statusCell(show.status),
      document.createTextNode(" · graph " + (show.graph || "?") + " version " + show.version + " · step " + show.latest_step)));
  const waits = show.interrupts || [];
  if (waits.length) {
    page.append(el("section", { id: "waits" }, el("h2", { text: "Waits for" }),
      table(["id", "kind", "node", "asks"], waits.map((w) => [
        document.createTextNode(w.id), document.createTextNode(w.kind), document.createTextNode(w.node),
        el("code", { class: "payload", text: JSON.stringify(w.payload) })]))));
  }
  page.append(el("section", { class: "graph" }, el("h2", { text: "Graph" }),
    el("img", { id: "graph", alt: "the run's graph", src: "/api" + base + "/graph.svg" })));
  page.append(el("section", { id: "timeline" }, el("h2", { text: "Steps" }),
    table(["step", "committed", "took", "ran", "outcome", "next", "state hash"], history.history.map((h, i) => [
      document.createTextNode(String(h.step)),
      document.createTextNode(new Date(h.timestamp_ms).toISOString()),
      document.createTextNode(i === 0 ? "" : took(h.timestamp_ms - history.history[i - 1].timestamp_ms)),
      document.createTextNode((h.ran || []).join(", ")),
      outcome(h, i === history.history.length - 1, show, log.events),
      document.createTextNode((h.next || []).join(", ")),
      el("code", { text: h.state_hash.slice(0, 12) })]))));
  page.append(stateSection(base, steps), diffSection(base, steps));
  page.append(actionsSection(id, base, show, steps));
  page.append(el("section", { id: "verify" }, el("h2", { text: "Event log" }), el("p", { text: "…" }),
    el("div", { id: "events" })));
  page.append(el("section", { id: "effects" }, el("h2", { text: "Effects" }), el("p", { text: "…" })));
  page.append(el("section", { id: "outbox" }, el("h2", { text: "Outbox" }), el("p", { text: "…" })));
  main.replaceChildren(page);
  Promise.resolve(log).then(
    (j) => document.getElementById("events").replaceChildren(
      table(["seq", "event", "time", "step", "payload"], j.events.slice(0, 200).map((e) => {
        const text = JSON.stringify(e.payload);
        return [document.createTextNode(String(e.seq)), document.createTextNode(e.event_type),
          document.createTextNode(new Date(e.timestamp_ms).toISOString()),
          document.createTextNode(e.payload && e.payload.step !== undefined ? String(e.payload.step) : ""),
          el("code", { class: "payload", title: text.length > 160 ? text : "", text: text.length > 160 ? text.slice(0, 160) + "…" : text })];
      })),
      j.events.length <= 200 && (j.next === null || j.next === undefined) ? el("span")
        : el("p", { text: "the first 200 events; the rest: /api" + base + "/events?from=200" })),
    (e) => document.getElementById("events").replaceChildren(errorBox(e)));
  api(base + "/outbox").then(
    (j) => document.querySelector("#outbox p").replaceChildren(j.outbox.length
      ? table(["step", "topic", "key", "delivered", "payload"], j.outbox.map((o) => [
        document.createTextNode(String(o.step)), document.createTextNode(o.topic), document.createTextNode(o.key),
        document.createTextNode(o.delivered ? "yes" : "not yet"), el("code", { text: JSON.stringify(o.payload) })]))
      : document.createTextNode("none")),
    (e) => document.querySelector("#outbox p").replaceChildren(errorBox(e)));
  api(base + "/verify").then(
    (v) => document.querySelector("#verify p").replaceChildren(el("span", { class: "ok", text: "verified: " + v.events + " events, " + v.checkpoints_matched + " checkpoints matched" })),
    (e) => document.querySelector("#verify p").replaceChildren(errorBox(e)));
  api(base + "/effects").then(
    (j) => document.querySelector("#effects p").replaceChildren(j.effects.length
      ? el("div", {}, table(["key", "step", "node", "name", "state"], j.effects.map((f) => [document.createTextNode(f.key),
        document.createTextNode(String(f.step)), document.createTextNode(f.node), document.createTextNode(f.name),
        el("code", { text: JSON.stringify(f.state) })])),
        ...j.effects.filter((f) => f.state === "Started").map((f) => resolveForm(id, base, f)))
      : document.createTextNode("none")),
    (e) => document.querySelector("#effects p").replaceChildren(errorBox(e)));
  // Live: the server's events say when the run's row moves; the page is drawn again then.
  if (live) live.close();
  live = null;
  if (!["completed", "cancelled", "failed"].includes(show.status)) {
    const shown = location.hash;
    live = new EventSource("/api" + base + "/live");
    live.addEventListener("run", (m) => {
      const now = JSON.parse(m.data);
      if (location.hash !== shown) {
        live.close();
      } else if (now.version !== show.row_version || now.status !== show.status || now.latest_step !== show.latest_step) {
        live.close();
        route();
      }
    });
  }
}

/** A duration in ms, as people read it. */
function took(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
  if (ms < 7200000) return Math.round(ms / 60000) + " min";
  return (ms / 3600000).toFixed(1) + " h";
}

/** What the execution that committed a checkpoint recorded on the way (its events carry the step that
 * ran, one before the checkpoint's): effects journaled, questions asked and answered, a hand-back. */
const NOTES = {
  EFFECT_RECORDED: (p) => "effect " + p.name,
  INTERRUPTED: () => "asked",
  RESUMED: (p) => "resumed" + (p.by ? " by " + p.by : ""),
  HANDED_BACK: () => "handed back",
  RUN_PAUSED: () => "paused",
};

/** What became of a step: committed (with what its execution recorded), or, for the run's latest,
 * where the run stands after it. */
function outcome(h, latest, show, events) {
  const notes = h.ran ? events.filter((e) => NOTES[e.event_type] && e.payload && e.payload.step === h.step - 1)
    .map((e) => NOTES[e.event_type](e.payload)) : [];
  const done = (h.ran ? "committed" : "started") + (notes.length ? " · " + notes.join(", ") : "");
  if (!latest || show.status === "running") return document.createTextNode(done);
  const waits = (show.interrupts || []).map((w) => w.node + " (" + w.kind.toLowerCase() + ")").join(", ");
  const text = {
    completed: "completed", cancelled: "cancelled", paused: "paused",
    failed: "failed: " + (show.error || ""), interrupted: "asks: " + waits, waiting: "waits: " + waits,
  }[show.status] || show.status;
  return el("span", { class: "status-" + show.status, text: (notes.length ? notes.join(", ") + " · " : "") + text });
}

/** Says what happened to an effect a crash left unknown: it happened (with its response), call it again,
 * or it failed for good. */
function resolveForm(id, base, f) {
  const how = el("select", { class: "resolve-how" }, ...["completed", "retry", "fail"].map((v) => el("option", { value: v, text: v })));
  const value = el("input", { class: "resolve-value", placeholder: "response JSON, or the error" });
  return el("div", { class: "resolve" }, el("span", { text: "effect " + f.name + " (" + f.key.slice(0, 12) + "…): " }), how, value,
    action("resolve", () => {
      const body = { key: f.key };
      if (how.value === "completed") body.completed = JSON.parse(value.value || "null");
      else if (how.value === "retry") body.retry = true;
      else body.fail = value.value || "failed";
      const says = { completed: "it happened, with response " + JSON.stringify(body.completed), retry: "it did not happen: call it again", fail: "it failed for good: " + body.fail }[how.value];
      return { text: "Record for effect " + f.name + " of run " + id + " that " + says + "?", body };
    }, (p) => act(base + "/resolve-effect", p.body)));
}

function stepSelect(id, steps, chosen) {
  return el("select", { id }, ...steps.map((s) => {
    const o = el("option", { value: String(s), text: "step " + s });
    if (s === chosen) o.selected = true;
    return o;
  }));
}

function stateSection(base, steps) {
  const pick = stepSelect("state-step", steps, steps[steps.length - 1]);
  const out = el("pre", { id: "state" });
  const load = () => api(base + "/state?step=" + pick.value).then(
    (j) => { out.textContent = JSON.stringify(j.state, null, 2); },
    (e) => { out.textContent = String(e.message); });
  pick.addEventListener("change", load);
  load();
  return el("section", {}, el("h2", { text: "State" }), el("div", { class: "controls" }, pick), out);
}

function diffSection(base, steps) {
  const from = stepSelect("diff-from", steps, steps[0]);
  const to = stepSelect("diff-to", steps, steps[steps.length - 1]);
  const out = el("div", { id: "diff" });
  const load = () => api(base + "/diff?from=" + from.value + "&to=" + to.value).then(
    (j) => out.replaceChildren(j.changes.length
      ? table(["field", "change", "before", "after"], j.changes.map((c) => [
        document.createTextNode(c.path), document.createTextNode(c.op),
        el("code", { class: "removed", text: c.old === undefined ? "" : JSON.stringify(c.old) }),
        el("code", { class: "added", text: c.new === undefined ? "" : JSON.stringify(c.new) })]))
      : el("p", { text: "no change" })),
    (e) => out.replaceChildren(errorBox(e)));
  from.addEventListener("change", load);
  to.addEventListener("change", load);
  load();
  return el("section", {}, el("h2", { text: "Diff" }), el("div", { class: "controls" }, from, to), out);
}

/** A button that says what it will do, and does it on a second click. */
function action(label, describe, run) {
  const result = el("span", { class: "result" });
  const box = el("span");
  const button = el("button", { class: "action", text: label });
  button.addEventListener("click", () => {
    let plan;
    try {
      plan = describe();
    } catch (e) {
      result.replaceChildren(errorBox(e));
      return;
    }
    const go = el("button", { class: "confirm-go", text: "confirm" });
    const cancel = el("button", { text: "back", onclick: () => box.replaceChildren() });
    go.addEventListener("click", async () => {
      box.replaceChildren();
      try {
        const out = await run(plan);
        result.replaceChildren(el("span", { class: "ok", text: label + ": done (" + (out.status || "ok") + ")" }));
        setTimeout(route, 300);
      } catch (e) {
        result.replaceChildren(errorBox(e));
      }
    });
    box.replaceChildren(el("div", { class: "confirm" }, el("span", { class: "plan", text: plan.text + " " }), go, cancel));
  });
  return el("div", { class: "controls" }, button, box, result);
}

function actionsSection(id, base, show, steps) {
  const section = el("section", { id: "actions" }, el("h2", { text: "Actions" }));
  const waits = (show.interrupts || []).filter((w) => w.kind === "Input");
  if (waits.length) {
    const which = el("select", { id: "answer-id" }, ...waits.map((w) => el("option", { value: w.id, text: w.node + " · " + w.id.slice(0, 12) })));
    const input = el("textarea", { id: "answer-input", rows: "2", cols: "40", placeholder: "the answer, as JSON: true" });
    section.append(el("div", { class: "controls" }, which, input), action("answer", () => {
      const value = JSON.parse(input.value);
      return { text: "Answer question " + which.value.slice(0, 12) + "… of run " + id + " with " + JSON.stringify(value) + " and continue the run?", value };
    }, (p) => act(base + "/answer", { input: p.value, interrupt: which.value })));
  }
  section.append(action("resume", () => ({ text: "Resume run " + id + " from step " + show.latest_step + " here?" }), () => act(base + "/resume")));
  section.append(action("cancel", () => ({ text: "Cancel run " + id + "? It stops at once." }), () => act(base + "/cancel")));
  section.append(action("hand back", () => ({ text: "Leave run " + id + " running for a worker pool to claim?" }), () => act(base + "/hand-back")));
  const forkStep = stepSelect("fork-step", steps, steps[steps.length - 1]);
  const forkId = el("input", { id: "fork-id", placeholder: "new run id" });
  section.append(el("div", { class: "controls" }, forkStep, forkId), action("fork", () => {
    if (!forkId.value) throw new Error("name the new run");
    return { text: "Start run " + forkId.value + " from step " + forkStep.value + " of " + id + "?" };
  }, () => act(base + "/fork", { step: Number(forkStep.value), new_run: forkId.value })));
  const topic = el("input", { id: "event-topic", placeholder: "topic" });
  const payload = el("input", { id: "event-payload", placeholder: "payload JSON" });
  section.append(el("div", { class: "controls" }, topic, payload), action("send event", () => {
    const value = JSON.parse(payload.value || "null");
    return { text: "Send " + JSON.stringify(value) + " on topic " + topic.value + " to run " + id + "?", value };
  }, (p) => act(base + "/send-event", { topic: topic.value, payload: p.value })));
  return section;
}

// ---------------------------------------------------------------------------------------------

function route() {
  const hash = location.hash || "#/";
  if (hash.startsWith("#/run/")) showRun(decodeURIComponent(hash.slice(6)));
  else showRuns();
}

window.addEventListener("hashchange", route);
api("/openapi.json").then(() => document.getElementById("mode").textContent = "", () => {});
route();
