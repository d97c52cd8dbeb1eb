// The page: threads (with their cost), one thread (its graph, live run, pause, plan, state,
// cost, artifacts, history with forks), and a form
// that starts a run. It calls the server's JSON API, the one LangGraph's clients call, and
// follows run streams (Server-Sent Events) with fetch, so it can send the token and rejoin a
// dropped stream with Last-Event-ID. No framework, no build step.
"use strict";

const page = {
  token: sessionStorage.getItem("stategraph-token") || "",
  leave: [], // what to stop when the view changes (timers, streams)
};

// ---- the API -------------------------------------------------------------------------------

function headers(json) {
  const h = {};
  if (json) h["content-type"] = "application/json";
  if (page.token) h["x-api-key"] = page.token;
  return h;
}

/** Calls the API; answers its JSON, or throws with the server's message. */
async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = { message: text }; }
  if (res.status === 401) document.getElementById("token-form").hidden = false;
  if (!res.ok) throw new Error((data && data.message) || `${method} ${path}: HTTP ${res.status}`);
  return data;
}

/** Follows a run's stream to its `end`, rejoining after the last event seen if it drops. */
async function follow(path, onEvent, signal) {
  let last = null;
  for (let tries = 0; tries < 20 && !signal.aborted; tries++) {
    try {
      const h = headers(false);
      if (last !== null) h["Last-Event-ID"] = last;
      const res = await fetch(path, { headers: h, signal });
      if (!res.ok) return;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = (buffer + value).replace(/\r\n/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = parseEvent(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (!event) continue;
          if (event.id !== null) last = event.id;
          onEvent(event);
          if (event.event === "end") return;
        }
      }
    } catch (_) {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

function parseEvent(block) {
  let id = null, event = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
  }
  if (!data && event === "message") return null; // a keep-alive
  let parsed = null;
  try { parsed = JSON.parse(data); } catch (_) { parsed = data; }
  return { id, event, data: parsed };
}

// ---- small helpers ---------------------------------------------------------------------

/** An element with attributes (`on*` are listeners) and children (strings are text). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const pretty = (v) => JSON.stringify(v, null, 2);
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
const status = (s) => el("span", { class: `status ${s}` }, s);
const enc = encodeURIComponent;

/** A cost as the CLI shows it ("USD 0.0123"), else the calls it counts; "" for no ledger. */
function money(cost) {
  if (!cost) return "";
  const calls = `${cost.calls} call${cost.calls === 1 ? "" : "s"}`;
  if (cost.usd === null || cost.usd === undefined) return calls + (cost.calls ? ", no price set" : "");
  return `USD ${cost.usd.toFixed(4)} (${calls})`;
}

/** A size in bytes, short. */
function bytes(n) {
  return n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`;
}

/** Runs `fn` on a button press, showing what went wrong in `out`. */
function action(out, fn) {
  return async (e) => {
    e.preventDefault();
    const button = e.submitter || e.currentTarget;
    if (button) button.disabled = true;
    out.textContent = "";
    try { await fn(); } catch (err) { out.textContent = err.message; }
    if (button) button.disabled = false;
  };
}

/** A value typed by a person: JSON when it reads as JSON, else the text itself. */
function typed(text) {
  try { return JSON.parse(text); } catch (_) { return text; }
}

// ---- views -----------------------------------------------------------------------------

function route() {
  page.leave.forEach((stop) => stop());
  page.leave = [];
  const main = document.getElementById("main");
  const hash = location.hash.replace(/^#/, "") || "/";
  const thread = hash.match(/^\/thread\/(.+)$/);
  main.replaceChildren();
  const shown = thread ? threadView(main, decodeURIComponent(thread[1]))
    : hash.startsWith("/new") ? startView(main, new URLSearchParams(hash.split("?")[1] || ""))
    : threadsView(main);
  shown.catch((e) => main.append(el("p", { class: "error", role: "alert" }, e.message)));
}

function every(ms, fn) {
  fn();
  const timer = setInterval(fn, ms);
  page.leave.push(() => clearInterval(timer));
}

async function threadsView(main) {
  document.title = "Threads · stategraph";
  const body = el("tbody");
  const note = el("p", { class: "error", role: "alert" });
  main.append(el("section", {},
    el("h1", {}, "Threads"),
    el("table", {},
      el("caption", { class: "muted" }, "Newest first, refreshed every two seconds"),
      el("thead", {}, el("tr", {}, ["Thread", "Graph", "Status", "Steps", "Cost", "Last update"].map((h) => el("th", { scope: "col" }, h)))),
      body),
    note));
  every(2000, async () => {
    try {
      const threads = await api("POST", "/threads/search", { limit: 100, sort_by: "updated_at", sort_order: "desc" });
      body.replaceChildren(...threads.map((t) => el("tr", {},
        el("td", {}, el("a", { href: `#/thread/${enc(t.thread_id)}` }, t.thread_id)),
        el("td", {}, (t.metadata && t.metadata.graph_id) || ""),
        el("td", {}, status(t.status)),
        el("td", {}, t.step === null || t.step === undefined ? "" : String(t.step)),
        el("td", {}, money(t.cost)),
        el("td", {}, when(t.updated_at)))));
      if (!threads.length) body.append(el("tr", {}, el("td", { colspan: 6 }, "No threads yet: start a run.")));
      note.textContent = "";
    } catch (e) { note.textContent = e.message; }
  });
}

async function startView(main, query) {
  document.title = "Start a run · stategraph";
  const assistants = await api("POST", "/assistants/search", { limit: 100 });
  const graph = el("select", { id: "graph", name: "graph" },
    assistants.map((a) => el("option", { value: a.assistant_id, selected: a.assistant_id === query.get("graph") }, `${a.assistant_id}: ${a.description || ""}`)));
  const fields = el("div");
  const settings = el("textarea", { id: "settings", placeholder: '{"search": {"corpus": "docs/"}}' });
  const threadId = el("input", { id: "thread-id", placeholder: "a new id is made when empty" });
  const out = el("p", { class: "error", role: "alert" });
  const inputs = {};
  async function fieldsFor() {
    const schemas = await api("GET", `/assistants/${enc(graph.value)}/schemas`);
    const props = Object.keys((schemas.input_schema && schemas.input_schema.properties) || {});
    for (const k of Object.keys(inputs)) delete inputs[k];
    fields.replaceChildren();
    if (!props.length) props.push("");
    for (const name of props) {
      const id = `input-${name || "json"}`;
      inputs[name] = el("textarea", { id, required: true });
      fields.append(el("label", { for: id }, name ? `Input: ${name}` : "Input (JSON)"), inputs[name]);
    }
  }
  graph.addEventListener("change", () => fieldsFor().catch((e) => (out.textContent = e.message)));
  await fieldsFor();
  const form = el("form", {
    onsubmit: action(out, async () => {
      const input = {};
      for (const [name, box] of Object.entries(inputs)) {
        if (name) input[name] = box.value; else Object.assign(input, typed(box.value));
      }
      const body = { assistant_id: graph.value, input, stream_mode: ["updates", "debug"] };
      if (settings.value.trim()) body.context = typed(settings.value);
      const t = await api("POST", "/threads", {
        thread_id: threadId.value.trim() || undefined,
        metadata: { graph_id: graph.value },
      });
      await api("POST", `/threads/${enc(t.thread_id)}/runs`, body);
      location.hash = `#/thread/${enc(t.thread_id)}`;
    }),
  },
  el("label", { for: "graph" }, "Graph"), graph,
  fields,
  el("label", { for: "settings" }, "Settings (JSON, optional: what nodes read, over the graph file's)"), settings,
  el("label", { for: "thread-id" }, "Thread id (optional)"), threadId,
  el("button", { type: "submit" }, "Start run"), out);
  main.append(el("section", {}, el("h1", {}, "Start a run"), form));
}

// ---- one thread ------------------------------------------------------------------------

async function threadView(main, id) {
  document.title = `${id} · stategraph`;
  const v = { id, checkpoint: undefined, graph: null, drawing: null, running: null, following: null };
  const summary = el("p");
  const cost = el("p", { id: "cost" });
  const artifacts = el("section", { id: "artifacts", "aria-labelledby": "artifacts-h" });
  const live = el("p", { id: "live", role: "status" }, "");
  const events = el("ol", { id: "events", "aria-label": "Events of the run" });
  const drawing = el("div");
  const pause = el("section", { id: "pause", hidden: true, class: "paused", "aria-labelledby": "pause-h" });
  const plan = el("section", { id: "plan", hidden: true, "aria-labelledby": "plan-h" });
  const values = el("pre", { id: "values", tabindex: "0" });
  const history = el("tbody");
  const diff = el("div");
  const edit = editState(v);
  main.append(
    el("h1", {}, `Thread ${id}`), summary, cost,
    el("div", { class: "grid" }, pause, plan),
    el("div", { class: "grid" },
      el("section", {}, el("h2", {}, "Run"), live, events),
      el("section", {}, el("h2", {}, "Graph"), drawing)),
    el("div", { class: "grid" },
      el("section", {}, el("h2", {}, "State"), values),
      artifacts),
    el("section", {}, el("h2", {}, "Steps"),
      el("table", {}, el("thead", {}, el("tr", {}, ["Step", "Source", "Written by", "Time", ""].map((h) => el("th", { scope: "col" }, h)))), history),
      diff),
    edit.section);

  // One refresh at a time, in order: a slow one that read an older checkpoint must not draw
  // over a newer one (a saved plan's note, say).
  let queue = Promise.resolve();
  function refresh() {
    const next = queue.then(refreshNow);
    queue = next.catch(() => {});
    return next;
  }

  async function refreshNow() {
    const t = await api("GET", `/threads/${enc(id)}`);
    const s = await api("GET", `/threads/${enc(id)}/state`);
    v.graph = (t.metadata && t.metadata.graph_id) || s.metadata.graph_id || null;
    summary.replaceChildren(
      "Graph ", el("strong", {}, v.graph || "none yet"), " · ", status(t.status),
      ` · step ${s.metadata.step ?? "–"} · updated ${when(t.updated_at)}`);
    values.textContent = pretty(s.values);
    if (v.graph && !v.drawing) {
      v.drawing = await api("GET", `/assistants/${enc(v.graph)}/graph`);
    }
    drawGraph(drawing, v.drawing, v.running, t.status === "busy" ? [] : s.next);
    const cid = s.checkpoint && s.checkpoint.checkpoint_id;
    if (cid !== v.checkpoint || t.status !== v.status) {
      v.checkpoint = cid;
      v.status = t.status;
      showPause(pause, v, t, s, refresh);
      await showPlan(plan, v, t.status, refresh);
      await showHistory(history, diff, v).catch((e) => history.replaceChildren(el("tr", {}, el("td", { colspan: 5 }, e.message))));
      await showCost(cost, v).catch((e) => { cost.textContent = e.message; });
      await showArtifacts(artifacts, v).catch((e) => artifacts.replaceChildren(el("h2", { id: "artifacts-h" }, "Artifacts"), el("p", { class: "error" }, e.message)));
      edit.show(t.status !== "busy" && !!v.graph);
    }
    if (t.status === "busy" && !v.following) await join();
    return t;
  }

  /** Follows the run `runId` (else the thread's active run; with `newest`, its newest run,
   * whose kept stream is replayed) in the Run section. */
  async function join(runId, newest) {
    let run = runId ? { run_id: runId } : null;
    if (!run) {
      const runs = await api("GET", `/threads/${enc(id)}/runs?limit=5`);
      run = newest ? runs[0] : runs.find((r) => r.status === "pending" || r.status === "running");
    }
    if (!run || v.following === run.run_id) return;
    v.following = run.run_id;
    events.replaceChildren();
    live.textContent = `Run ${run.run_id} is running`;
    const stop = new AbortController();
    page.leave.push(() => stop.abort());
    let soon = null;
    const later = () => { clearTimeout(soon); soon = setTimeout(() => refresh().catch(() => {}), 250); };
    follow(`/threads/${enc(id)}/runs/${enc(run.run_id)}/stream`, (e) => {
      const line = describe(e, v);
      if (line) {
        events.append(el("li", {}, el("code", {}, e.event), " ", line));
        events.scrollTop = events.scrollHeight;
      }
      if (e.event === "debug" || e.event === "updates") {
        drawGraph(drawing, v.drawing, v.running, []);
        later();
      }
      if (e.event === "end") {
        v.running = null;
        v.following = null;
        live.textContent = `Run ${run.run_id} ended: ${e.data.status}`;
        refresh().catch(() => {});
      }
    }, stop.signal);
  }

  v.refresh = refresh;
  v.join = join;
  await refresh();
  if (!v.following) await join(null, true);
  every(3000, () => { if (!v.following) refresh().catch(() => {}); });
}

/** One line for a stream event in the run's log (and the node running, kept in `v`). */
function describe(e, v) {
  const d = e.data;
  if (e.event === "debug" && d.type === "task") { v.running = d.payload.name; return `step ${d.step}: ${d.payload.name} started`; }
  if (e.event === "debug" && d.type === "task_result") {
    if (v.running === d.payload.name) v.running = null;
    return d.payload.error ? `${d.payload.name} failed: ${d.payload.error}` : `${d.payload.name} finished`;
  }
  if (e.event === "debug") return null;
  if (e.event === "updates" && d.__interrupt__) return `paused: ${question(d.__interrupt__[0] && d.__interrupt__[0].value)}`;
  if (e.event === "updates") return `${Object.keys(d).join(", ")} wrote ${Object.keys(Object.values(d)[0] || {}).join(", ") || "nothing"}`;
  if (e.event === "error") return d.message;
  if (e.event === "end") return `the run ended: ${d.status}`;
  if (e.event === "metadata") return `run ${d.run_id}`;
  return null;
}

function question(value) {
  if (value && typeof value === "object" && typeof value.question === "string") return value.question;
  return typeof value === "string" ? value : pretty(value);
}

/** The pause: where the thread waits, why, and the forms that answer it. */
function showPause(box, v, t, s, refresh) {
  const waits = s.interrupts || [];
  const atBreakpoint = t.status === "idle" && s.next.length > 0;
  box.hidden = !(t.status === "interrupted" || atBreakpoint);
  if (box.hidden) { box.replaceChildren(); return; }
  const out = el("p", { class: "error", role: "alert" });
  const answer = el("textarea", { id: "answer" });
  const resume = (command) => action(out, async () => {
    const body = { assistant_id: v.graph, stream_mode: ["updates", "debug"] };
    if (command !== undefined) body.command = { resume: command };
    const run = await api("POST", `/threads/${enc(v.id)}/runs`, body);
    await v.join(run.run_id);
    await refresh();
  });
  const where = `Paused before ${s.next.join(", ") || "the end"}`;
  const parts = [el("h2", { id: "pause-h" }, where)];
  for (const w of waits) {
    const q = question(w.value);
    parts.push(el("p", {}, el("strong", {}, "Why: "), q));
    if (w.value && typeof w.value === "object" && w.value.problem) parts.push(el("p", { class: "error" }, w.value.problem));
    parts.push(el("details", {}, el("summary", {}, "What it asks, in full"), el("pre", {}, pretty(w.value))));
  }
  if (waits.length) {
    // A question that names `approve` takes that word; others a plain yes.
    const word = /approve/i.test(question(waits[0].value)) ? "approve" : "yes";
    parts.push(
      el("label", { for: "answer" }, "Answer (text, or JSON)"), answer,
      el("button", { type: "button", onclick: resume(word) }, "Approve"),
      el("button", { type: "button", class: "quiet", onclick: (e) => resume(typed(answer.value))(e) }, "Send answer"));
  } else {
    parts.push(el("p", {}, "A breakpoint: nothing is asked."),
      el("button", { type: "button", onclick: resume(undefined) }, "Continue"));
  }
  parts.push(out);
  box.replaceChildren(...parts);
}

/** The plan, for graphs that keep one: its Markdown, edited and saved with the CLI's checks. */
async function showPlan(box, v, threadStatus, refresh) {
  let plan;
  try { plan = await api("GET", `/threads/${enc(v.id)}/plan`); } catch (_) { box.hidden = true; return; }
  box.hidden = false;
  const text = el("textarea", { id: "plan-markdown", class: "tall" });
  text.value = plan.markdown;
  const out = el("p", { class: "error", role: "alert" });
  const busy = threadStatus === "busy";
  box.replaceChildren(
    el("h2", { id: "plan-h" }, "Plan"),
    el("label", { for: "plan-markdown" }, "Plan (Markdown: one todo a line; edit, then save before answering)"), text,
    el("button", {
      type: "button", disabled: busy,
      onclick: action(out, async () => {
        await api("PUT", `/threads/${enc(v.id)}/plan`, { markdown: text.value });
        out.textContent = "";
        await refresh();
        document.getElementById("plan-saved").textContent = "Plan saved.";
      }),
    }, "Save plan"),
    el("span", { id: "plan-saved", role: "status", class: "muted" }),
    out);
}

/** The checkpoints, newest first: each one's state, a run again from it, a fork of the thread
 * from it (a new thread), and a diff of two. */
async function showHistory(body, diff, v) {
  const states = await api("POST", `/threads/${enc(v.id)}/history`, { limit: 50 });
  const note = el("p", { class: "error", role: "alert" });
  const label = (s) => `step ${s.metadata.step} (${s.metadata.source || ""})`;
  body.replaceChildren(...states.map((s) => {
    const cid = s.checkpoint.checkpoint_id;
    const shown = el("pre", { hidden: true }, pretty(s.values));
    return el("tr", {},
      el("td", {}, String(s.metadata.step)),
      el("td", {}, s.metadata.source || ""),
      el("td", {}, (s.metadata.writers || []).join(", ")),
      el("td", {}, when(s.created_at)),
      el("td", {},
        el("button", { type: "button", class: "quiet", "aria-label": `State: ${label(s)}`, onclick: () => { shown.hidden = !shown.hidden; } }, "State"),
        el("button", {
          type: "button", class: "quiet", "aria-label": `Run from here: ${label(s)}`,
          onclick: action(note, async () => {
            const run = await api("POST", `/threads/${enc(v.id)}/runs`, { assistant_id: v.graph, checkpoint_id: cid, stream_mode: ["updates", "debug"] });
            await v.join(run.run_id);
            await v.refresh();
          }),
        }, "Run from here"),
        el("button", {
          type: "button", class: "quiet", "aria-label": `Fork from here: ${label(s)}`,
          onclick: action(note, async () => {
            const fork = await api("POST", `/threads/${enc(v.id)}/fork`, { checkpoint_id: cid });
            location.hash = `#/thread/${enc(fork.thread_id)}`;
          }),
        }, "Fork"),
        shown));
  }));
  if (states.length < 2) { diff.replaceChildren(note); return; }
  const pick = (id, n) => el("select", { id }, states.map((s, i) => el("option", { value: i, selected: i === n }, label(s))));
  const a = pick("diff-a", 1), b = pick("diff-b", 0);
  const table = el("div");
  diff.replaceChildren(note, el("div", { class: "row" },
    el("div", {}, el("label", { for: "diff-a" }, "Compare"), a),
    el("div", {}, el("label", { for: "diff-b" }, "with"), b),
    el("button", { type: "button", class: "quiet", onclick: () => showDiff(table, states[a.value].values, states[b.value].values) }, "Compare")),
  table);
}

/** What the thread paid for model calls, as `graph state` tells it. */
async function showCost(box, v) {
  const c = (await api("GET", `/threads/${enc(v.id)}/cost`)).cost;
  if (!c) { box.replaceChildren(); return; }
  const off = c.off_ledger ? `; ${money(c.off_ledger)} of it off the ledger (failed attempts, set-aside results)` : "";
  const tokens = `${c.input_tokens} tokens in, ${c.output_tokens} out`;
  box.replaceChildren("Cost ", el("strong", {}, money(c) || "nothing yet"), ` · ${tokens}${off}`);
}

/** The thread's artifact files (its current version folder, or one picked), each opened in
 * place as text. */
async function showArtifacts(box, v, version) {
  const q = version ? `?version=${enc(version)}` : "";
  const list = await api("GET", `/threads/${enc(v.id)}/artifacts${q}`);
  const head = el("h2", { id: "artifacts-h" }, "Artifacts");
  if (!list.versions.length) {
    box.replaceChildren(head, el("p", { class: "muted" }, "No files yet: a graph that declares artifacts writes them when a run ends."));
    return;
  }
  const pick = el("select", { id: "artifact-version", "aria-label": "Version folder" },
    list.versions.map((f) => el("option", { value: f.label, selected: f.label === list.version }, `${f.label} (${f.reason})`)));
  pick.addEventListener("change", () => showArtifacts(box, v, pick.value).catch(() => {}));
  const opened = el("pre", { id: "artifact-text", hidden: true, tabindex: "0" });
  const title = el("p", { id: "artifact-name", class: "muted" });
  const note = el("p", { class: "error", role: "alert" });
  const open = (path) => action(note, async () => {
    const res = await fetch(`/threads/${enc(v.id)}/artifacts/file?path=${enc(path)}&version=${enc(list.version)}`, { headers: headers(false) });
    const text = await res.text();
    if (!res.ok) { let m = text; try { m = JSON.parse(text).message; } catch (_) {} throw new Error(m); }
    title.textContent = `${path} (${res.headers.get("content-type")})`;
    opened.textContent = text;
    opened.hidden = false;
  });
  const rows = list.files.map((f) => el("li", {},
    el("button", { type: "button", class: "quiet", "aria-label": `Open ${f.path}`, onclick: open(f.path) }, f.path),
    el("span", { class: "muted" }, ` ${bytes(f.size)}`)));
  box.replaceChildren(head,
    el("label", { for: "artifact-version" }, "Version folder"), pick,
    el("p", { class: "muted" }, list.missing ? `${list.dir} is not there (moved or deleted).` : String(list.dir || "")),
    el("ul", { id: "artifact-files" }, rows.length ? rows : [el("li", {}, "No files in this version.")]),
    note, title, opened);
}

function showDiff(box, before, after) {
  const keys = [...new Set([...Object.keys(before || {}), ...Object.keys(after || {})])];
  const changed = keys.filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  if (!changed.length) { box.replaceChildren(el("p", {}, "The two states are the same.")); return; }
  box.replaceChildren(el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "Field"), el("th", {}, "Before"), el("th", {}, "After"))),
    el("tbody", {}, changed.map((k) => el("tr", {},
      el("td", {}, k),
      el("td", { class: "changed" }, el("pre", {}, pretty(before[k]))),
      el("td", { class: "changed" }, el("pre", {}, pretty(after[k]))))))));
}

/** A form that edits the state as LangGraph's update_state does: fields to write, as a node. */
function editState(v) {
  const update = el("textarea", { id: "update" }, "{}");
  const asNode = el("input", { id: "as-node", placeholder: "as the last node that wrote" });
  const out = el("p", { class: "error", role: "alert" });
  const section = el("section", { hidden: true },
    el("h2", {}, "Edit the state"),
    el("label", { for: "update" }, "Update (JSON: the fields to write, through their reducers)"), update,
    el("label", { for: "as-node" }, "As node (optional)"), asNode,
    el("button", {
      type: "button",
      onclick: action(out, async () => {
        const body = { values: JSON.parse(update.value) };
        if (asNode.value.trim()) body.as_node = asNode.value.trim();
        await api("POST", `/threads/${enc(v.id)}/state`, body);
        await v.refresh();
      }),
    }, "Save state"), out);
  return { section, show: (on) => { section.hidden = !on; } };
}

/** The graph in layers from its start (breadth first), the running and waiting nodes marked. */
function drawGraph(box, drawing, running, next) {
  if (!drawing) { box.textContent = "No graph yet."; return; }
  const depth = { __start__: 0 };
  const queue = ["__start__"];
  while (queue.length) {
    const n = queue.shift();
    for (const e of drawing.edges.filter((e) => e.source === n)) {
      if (!(e.target in depth)) { depth[e.target] = depth[n] + 1; queue.push(e.target); }
    }
  }
  const layers = [];
  for (const node of drawing.nodes) {
    const d = depth[node.id] ?? Object.keys(depth).length;
    (layers[d] = layers[d] || []).push(node.id);
  }
  const rows = layers.filter(Boolean);
  const W = 150, H = 28, GX = 20, GY = 26;
  const width = Math.max(...rows.map((r) => r.length)) * (W + GX);
  const at = {};
  rows.forEach((row, y) => row.forEach((id, x) => {
    const offset = (width - row.length * (W + GX)) / 2;
    at[id] = { x: offset + x * (W + GX) + GX / 2, y: y * (H + GY) + 4 };
  }));
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  const height = rows.length * (H + GY);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "graph");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `The graph: ${drawing.nodes.map((n) => n.id).join(", ")}` + (running ? `; running ${running}` : ""));
  const add = (parent, tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, val] of Object.entries(attrs)) node.setAttribute(k, val);
    if (text) node.textContent = text;
    parent.append(node);
    return node;
  };
  for (const e of drawing.edges) {
    const a = at[e.source], b = at[e.target];
    if (!a || !b) continue;
    add(svg, "line", { x1: a.x + W / 2, y1: a.y + H, x2: b.x + W / 2, y2: b.y, class: e.conditional ? "conditional" : "" });
  }
  for (const node of drawing.nodes) {
    const p = at[node.id];
    const cls = [node.type === "schema" ? "special" : "", node.id === running ? "running" : "", next.includes(node.id) ? "next" : ""].join(" ");
    const g = add(svg, "g", { class: cls, "data-node": node.id });
    add(g, "rect", { x: p.x, y: p.y, width: W, height: H, rx: 6 });
    add(g, "text", { x: p.x + W / 2, y: p.y + H / 2 }, node.id.length > 20 ? node.id.slice(0, 19) + "…" : node.id);
  }
  box.replaceChildren(svg);
}

// ---- start -----------------------------------------------------------------------------

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  page.token = document.getElementById("token").value;
  sessionStorage.setItem("stategraph-token", page.token);
  document.getElementById("token-form").hidden = true;
  route();
});
window.addEventListener("hashchange", route);
route();
