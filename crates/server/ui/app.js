// isobench's web UI: one page, hash routes, only the HTTP API under /api/v1.
//
// Routes: #/runs (list), #/runs/<id> (one run: live progress, stop/resume, report),
// #/launch (preset, scenario or tune, here on one platform or several in turn, or on a fleet
// of hosts; problems shown at their line, a tune's at its field), #/queue, #/compare. A
// fleet run's page shows its fleet table, and a run of a set on several platforms the table
// across them, as the server gives them (every figure is text from the results; the UI
// computes none).
// Every value from the server reaches the DOM through textContent or an attribute, never as
// HTML. Every state-changing request carries the CSRF token from GET /api/v1/session.
"use strict";

(function () {
  const API = "/api/v1";
  const FINAL_JOB_STATES = new Set(["done", "failed", "cancelled", "interrupted"]);
  const ACTIVE_JOB_STATES = new Set(["queued", "running", "stopping"]);

  const state = {
    session: null,
    jobs: new Map(), // job id -> Job, kept current by the event stream
    live: new Map(), // job id -> {notes, failures, waiting, summary, planned}
    runsCache: [], // the last runs list, for the compare picker
    selected: new Set(), // run ids ticked for comparison
    view: null, // {name, update(kind, data), leave()} of the page shown
    source: null,
  };

  // ---------- DOM helpers ----------

  /** Creates an element; attrs: class, text, on<Event> handlers, dataset object, others as
   *  attributes (false/null skipped). Children: nodes or strings (as text). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (v === true) el.setAttribute(k, "");
      else el.setAttribute(k, String(v));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return el;
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  function $(sel, root) {
    return (root || document).querySelector(sel);
  }

  function toast(text, kind) {
    const t = $("#toast");
    t.textContent = text;
    t.className = "toast " + (kind || "error");
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, 6000);
  }

  // ---------- formatting ----------

  function fmtDuration(s) {
    if (s === null || s === undefined || !isFinite(s)) return "—";
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60), sec = s % 60;
    if (m < 60) return m + "m " + String(sec).padStart(2, "0") + "s";
    const hr = Math.floor(m / 60);
    return hr + "h " + String(m % 60).padStart(2, "0") + "m";
  }

  function fmtRelative(iso) {
    if (!iso) return "—";
    const t = Date.parse(iso);
    if (isNaN(t)) return String(iso);
    const d = (Date.now() - t) / 1000;
    if (d < 0) return "just now";
    if (d < 45) return "just now";
    if (d < 3600) return Math.round(d / 60) + " min ago";
    if (d < 86400) return Math.round(d / 3600) + " h ago";
    if (d < 86400 * 30) return Math.round(d / 86400) + " d ago";
    return new Date(t).toISOString().slice(0, 10);
  }

  function timeEl(iso) {
    if (!iso) return h("span", { class: "muted", text: "—" });
    return h("time", { datetime: iso, title: new Date(Date.parse(iso) || 0).toLocaleString(), text: fmtRelative(iso) });
  }

  function badge(status) {
    const s = String(status || "unknown");
    return h("span", { class: "badge status-" + s.replace(/[^a-z]/g, ""), text: s });
  }

  /** The run's headline in one line, exactly as the API gives it (`isobench show` prints the same figures first). */
  function headlineText(run) {
    const hl = run && run.headline;
    return hl && hl.text ? hl.text : "—";
  }

  /** The headline's rule, shown on hover: how the figures were chosen. */
  function headlineRule(run) {
    const hl = run && run.headline;
    return hl && hl.rule ? hl.rule : null;
  }

  /** One line per resource, worst first: the figure, then what stands behind it. */
  function headlineList(run) {
    const hl = run && run.headline;
    if (!hl || !hl.resources || !hl.resources.length) return "—";
    return h("div", {},
      h("ul", { class: "headline" }, hl.resources.map((x) =>
        h("li", {}, h("strong", { text: x.resource + " " + x.figure }), " ", h("span", { class: "muted small", text: x.detail })))),
      h("p", { class: "muted small", text: hl.rule }));
  }

  function jobWhat(job) {
    const s = job.spec || {};
    const parts = [];
    if (s.resume) parts.push("resume of " + s.resume);
    else if (s.preset) parts.push("preset " + s.preset);
    else if (s.scenario_name) parts.push(s.scenario_name);
    else parts.push("scenario");
    if (s.platform) parts.push("on " + s.platform);
    if (s.platforms && s.platforms.length) parts.push("on " + s.platforms.join(", ") + " in turn");
    if (s.hosts && s.hosts.length) parts.push("on " + plural(s.hosts.length, "host"));
    if (s.seed !== null && s.seed !== undefined) parts.push("seed " + s.seed);
    return parts.join(", ");
  }

  /** "1 run", "2 runs". */
  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  function progressText(p) {
    return p && p.of ? p.n + " / " + p.of : "0 / ?";
  }

  // ---------- API ----------

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.error) || "HTTP " + status);
      this.status = status;
      this.body = body || {};
    }
  }

  /** A request to the API: JSON in and out; state-changing methods carry the CSRF header. */
  async function api(path, opts) {
    opts = opts || {};
    const method = opts.method || "GET";
    const headers = { Accept: "application/json" };
    if (method !== "GET" && method !== "HEAD" && state.session && state.session.csrf) {
      headers["X-Isobench-Csrf"] = state.session.csrf;
    }
    let body;
    if (opts.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(opts.json);
    }
    let res;
    try {
      res = await fetch(API + path, { method, headers, body, credentials: "same-origin" });
    } catch (e) {
      throw new ApiError(0, { error: "the server did not answer (" + e.message + ")" });
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = { error: text.slice(0, 300) }; }
    }
    if (!res.ok) {
      if (res.status === 401 && !opts.noLogin) showLogin();
      throw new ApiError(res.status, data);
    }
    return data;
  }

  // ---------- live events ----------

  function liveOf(jobId) {
    let l = state.live.get(jobId);
    if (!l) {
      l = { notes: [], failures: [], waiting: null, summary: null, condition: null };
      state.live.set(jobId, l);
    }
    return l;
  }

  function connectEvents() {
    if (state.source) state.source.close();
    const liveEl = $("#live");
    const es = new EventSource(API + "/events");
    state.source = es;
    es.onopen = () => {
      liveEl.textContent = "live";
      liveEl.className = "live on";
    };
    es.onerror = () => {
      liveEl.textContent = "reconnecting…";
      liveEl.className = "live off";
    };
    es.addEventListener("job", (e) => {
      let job;
      try { job = JSON.parse(e.data); } catch (err) { return; }
      if (!job || !job.id) return;
      const before = state.jobs.get(job.id);
      state.jobs.set(job.id, job);
      updateQueueCount();
      notify("job", { job, before });
    });
    es.addEventListener("run", (e) => {
      let msg;
      try { msg = JSON.parse(e.data); } catch (err) { return; }
      if (!msg || !msg.event) return;
      absorbRunEvent(msg);
      notify("run", msg);
    });
  }

  /** Keeps what a run page shows from the run events: progress, notes, trial failures. */
  function absorbRunEvent(msg) {
    const ev = msg.event;
    const jobId = msg.job;
    if (!jobId) return;
    const l = liveOf(jobId);
    const job = state.jobs.get(jobId);
    switch (ev.event) {
      case "planned":
        l.summary = ev.summary || null;
        if (job) {
          if (!job.run && ev.run) job.run = ev.run;
          // On several platforms, each platform's plan starts its count.
          if ((!job.progress || !job.progress.of) && ev.trials) {
            job.progress = Object.assign({}, job.progress || {}, { n: ev.done || 0, of: ev.trials });
          }
        }
        break;
      case "tenants_ready":
        for (const t of ev.tenants || []) {
          for (const n of t.notes || []) l.notes.push({ kind: "note", text: t.name + ": " + n });
        }
        break;
      case "memory_checked":
        if (ev.ok === false) l.notes.push({ kind: "warn", text: ev.text || ev.tenant + ": memory check failed" });
        break;
      case "waiting":
        l.waiting = ev.why ? ev.why + (ev.seconds ? " (" + fmtDuration(ev.seconds) + ")" : "") : null;
        break;
      case "block_started":
        l.condition = ev.condition || l.condition;
        break;
      case "trial_started":
      case "trial_ended":
        l.waiting = null;
        if (job) {
          job.progress = Object.assign({}, job.progress || {}, {
            n: ev.n, of: ev.of, round: ev.round, condition: ev.condition, what: ev.what, eta_s: ev.eta_s,
          });
        }
        if (ev.event === "trial_ended" && ev.status && ev.status !== "ok") {
          l.failures.push({
            text: "trial " + ev.n + " (" + (ev.what || "?") + " under " + (ev.condition || "?") + "): " +
              ev.status + (ev.reason ? " — " + ev.reason : ""),
          });
        }
        break;
      case "note":
        if (ev.text) l.notes.push({ kind: "note", text: ev.text });
        break;
      case "platform_started":
        if (job) job.progress = { n: 0, of: 0, platform: { name: ev.platform, n: ev.n, of: ev.of } };
        break;
      case "platform_failed":
        l.notes.push({ kind: "warn", text: "platform " + ev.platform + " could not run: " + (ev.why || "?") });
        break;
      case "platform_interrupted":
        l.notes.push({ kind: "warn", text: "interrupted on " + ev.platform + ": the platforms after it are not run" });
        break;
      case "member_progress":
        if (ev.status && ev.status !== "ok") l.failures.push({ text: ev.member + ": " + ev.line });
        else if (ev.line) l.notes.push({ kind: "note", text: "[" + ev.member + "] " + ev.line });
        break;
      case "member_not_run":
        l.notes.push({ kind: "warn", text: ev.member + ": " + (ev.why || "not run") });
        break;
      case "member_imported":
        if (ev.done) l.notes.push({ kind: "note", text: ev.member + ": run " + ev.done.run_id + " " + ev.done.status + " (exit code " + ev.done.exit_code + "), imported" });
        break;
      case "fleet_note":
        if (ev.text) l.notes.push({ kind: "note", text: ev.text });
        break;
      case "fleet_stopping":
        l.notes.push({ kind: "warn", text: "interrupted; the hosts stop their runs (what they stored stays there)" });
        break;
      case "fleet_dropped":
        l.notes.push({ kind: "warn", text: ev.lines + " progress lines of the hosts were not shown" });
        break;
      case "finished":
        l.waiting = null;
        if (ev.reason) l.notes.push({ kind: ev.status === "complete" ? "note" : "warn", text: "finished " + ev.status + ": " + ev.reason });
        break;
      default:
        break; // unknown events are ignored (the stream may grow)
    }
    if (l.notes.length > 200) l.notes.splice(0, l.notes.length - 200);
    if (l.failures.length > 200) l.failures.splice(0, l.failures.length - 200);
  }

  function notify(kind, data) {
    if (state.view && state.view.update) {
      try { state.view.update(kind, data); } catch (e) { console.warn(e); }
    }
  }

  function updateQueueCount() {
    const n = [...state.jobs.values()].filter((j) => ACTIVE_JOB_STATES.has(j.state)).length;
    const el = $("#queue-count");
    el.textContent = String(n);
    el.hidden = n === 0;
  }

  function activeJobFor(runId) {
    for (const j of state.jobs.values()) {
      if (!ACTIVE_JOB_STATES.has(j.state)) continue;
      if (j.run === runId || (j.spec && j.spec.resume === runId)) return j;
    }
    return null;
  }

  // ---------- login ----------

  function showLogin(message) {
    if (state.view && state.view.leave) state.view.leave();
    state.view = { name: "login" };
    if (state.source) { state.source.close(); state.source = null; }
    const err = h("p", { id: "login-error", class: "error", role: "alert", hidden: !message, text: message || "" });
    const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "current-password", required: true });
    const form = h("form", { id: "login-form", class: "card narrow" },
      h("h1", { text: "Sign in" }),
      h("p", { class: "muted", text: "This server needs its access token (the contents of the file given to --token-file)." }),
      h("label", { for: "token", text: "Token" }), input,
      h("div", { class: "actions" }, h("button", { id: "login-submit", type: "submit", class: "primary", text: "Sign in" })),
      err);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      err.hidden = true;
      try {
        await api("/login", { method: "POST", json: { token: input.value }, noLogin: true });
        location.reload();
      } catch (ex) {
        err.textContent = ex.status === 401 ? "That token is not right." : ex.message;
        err.hidden = false;
      }
    });
    setMain(form);
    input.focus();
  }

  // ---------- routing ----------

  function setMain(...nodes) {
    const main = clear($("#app"));
    append(main, nodes);
  }

  function route() {
    if (!state.session) return;
    if (state.view && state.view.leave) state.view.leave();
    state.view = null;
    const hash = location.hash || "#/runs";
    const [path, query] = hash.slice(1).split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    const params = new URLSearchParams(query || "");
    for (const a of document.querySelectorAll("[data-nav]")) {
      if (a.dataset.nav === (parts[0] || "runs")) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    if (parts[0] === "runs" && parts[1]) return runPage(parts[1]);
    if (parts[0] === "launch") return launchPage();
    if (parts[0] === "queue") return queuePage();
    if (parts[0] === "compare") return comparePage(params.get("runs"));
    return runsPage();
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  // ---------- runs list ----------

  function runsPage() {
    const status = h("p", { class: "muted", text: "Loading runs…" });
    const compareBtn = h("button", { type: "button", id: "compare-selected", disabled: true, text: "Compare selected" });
    const table = h("table", { id: "runs-table", class: "data" },
      h("thead", {}, h("tr", {},
        h("th", { scope: "col", class: "pick" }, h("span", { class: "sr-only", text: "Compare" })),
        ["Status", "Run", "Kind", "Platform", "Host", "Started", "Duration", "Trials", "Headline"].map((t) =>
          h("th", { scope: "col", class: t === "Duration" || t === "Trials" ? "num" : null, text: t })))),
      h("tbody"));
    const view = { name: "runs", timer: null };
    state.view = view;
    const filter = h("input", { id: "runs-filter", type: "search", placeholder: "scenario, id, status, platform, host…", value: state.runsFilter || "" });
    function applyFilter() {
      state.runsFilter = filter.value;
      const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      let shown = 0;
      for (const tr of table.tBodies[0].rows) {
        const hay = tr.textContent.toLowerCase();
        tr.hidden = !words.every((w) => hay.includes(w));
        if (!tr.hidden) shown++;
      }
      const total = table.tBodies[0].rows.length;
      status.textContent = total === 0 ? "No runs yet. Launch one."
        : words.length ? shown + " of " + plural(total, "run") + " match." : plural(total, "run") + ", newest first.";
    }
    filter.addEventListener("input", applyFilter);

    function refreshCompareBtn() {
      compareBtn.disabled = state.selected.size < 2;
      compareBtn.textContent = "Compare selected" + (state.selected.size ? " (" + state.selected.size + ")" : "");
    }
    compareBtn.addEventListener("click", () => go("#/compare?runs=" + encodeURIComponent([...state.selected].join(","))));

    async function load() {
      try {
        const data = await api("/runs");
        if (state.view !== view) return;
        const runs = (data && data.runs) || [];
        state.runsCache = runs;
        const tbody = clear(table.tBodies[0]);
        for (const r of runs) tbody.appendChild(runRow(r, refreshCompareBtn));
        applyFilter();
        for (const id of [...state.selected]) if (!runs.some((r) => r.id === id)) state.selected.delete(id);
        refreshCompareBtn();
      } catch (e) {
        if (e.status !== 401) status.textContent = "Could not load the runs: " + e.message;
      }
    }

    view.update = (kind, data) => {
      // A running job's progress shows in its run's row as it comes.
      const j = kind === "job" ? data.job : state.jobs.get(data.job);
      const runId = j && (j.run || (j.spec && j.spec.resume));
      const cell = runId && table.querySelector('tr[data-run="' + CSS.escape(runId) + '"] td.trials');
      const run = runId && state.runsCache.find((r) => r.id === runId);
      if (cell && run) cell.textContent = trialsText(run);
      // A job that starts, ends or changes its run changes the list: reload, at most every 1.5 s.
      if (kind === "job" && (!data.before || data.before.state !== data.job.state || data.before.run !== data.job.run)) {
        if (!view.timer) view.timer = setTimeout(() => { view.timer = null; load(); }, 1500);
      }
    };
    view.leave = () => clearTimeout(view.timer);

    setMain(
      h("div", { class: "page-head" },
        h("h1", { text: "Runs" }),
        h("div", { class: "actions" }, compareBtn, h("a", { class: "button primary", href: "#/launch", text: "Launch a run" }))),
      h("div", { class: "toolbar" }, h("label", { for: "runs-filter", text: "Filter" }), filter, status),
      h("div", { class: "table-wrap" }, table));
    load();
  }

  function runRow(r, onPick) {
    const href = "#/runs/" + encodeURIComponent(r.id);
    const pick = h("input", { type: "checkbox", class: "pick-run", "aria-label": "Compare " + r.id, checked: state.selected.has(r.id) });
    pick.addEventListener("click", (e) => e.stopPropagation());
    pick.addEventListener("change", () => {
      if (pick.checked) state.selected.add(r.id); else state.selected.delete(r.id);
      onPick();
    });
    const tr = h("tr", { dataset: { run: r.id }, class: "clickable" },
      h("td", { class: "pick" }, pick),
      h("td", {}, badge(r.status)),
      h("td", {}, h("a", { href, text: r.scenario || r.id }), h("div", { class: "muted small mono", text: r.id })),
      h("td", { text: r.kind || "—" }),
      h("td", { text: r.platform || "—" }),
      h("td", { text: r.host || "—" }),
      h("td", {}, timeEl(r.started_at)),
      h("td", { class: "num", text: r.status === "running" && r.duration_s == null ? "running" : fmtDuration(r.duration_s) }),
      h("td", { class: "num trials", text: trialsText(r) }),
      h("td", { class: "headline", text: headlineText(r), title: headlineRule(r) }));
    tr.addEventListener("click", (e) => {
      if (e.target.closest("a, input, button")) return;
      go(href);
    });
    return tr;
  }

  /** ok / planned trials of a stored run, or the live "n / of" while a job runs it. */
  function trialsText(r) {
    const job = activeJobFor(r.id);
    if (job && job.progress && job.progress.of) return progressText(job.progress) + " run";
    return (r.trials_ok ?? "?") + " / " + (r.trials ?? "?");
  }

  // ---------- one run ----------

  function runPage(id) {
    const view = { name: "run", id, run: null, reportShown: false, timer: null, asked: 0, shown: 0 };
    state.view = view;

    const title = h("h1", {}, "Run ", h("span", { class: "mono", text: id }));
    const statusEl = h("span", { id: "run-status", class: "badge", role: "status", "aria-label": "Status", text: "…" });
    const stopBtn = h("button", { id: "stop-run", type: "button", class: "danger", hidden: true, text: "Stop" });
    const resumeBtn = h("button", { id: "resume-run", type: "button", class: "primary", hidden: true, text: "Resume" });
    const meta = h("dl", { class: "meta" });
    const caveats = h("ul", { id: "run-caveats", class: "caveats" });

    const bar = h("progress", { id: "run-progress-bar", max: 1, value: 0, "aria-labelledby": "run-progress" });
    const progressText_ = h("span", { id: "run-progress", class: "mono", text: "0 / ?" });
    const condEl = h("dd", { id: "run-condition", text: "—" });
    const whatEl = h("dd", { id: "run-probe", text: "—" });
    const etaEl = h("dd", { id: "run-eta", text: "—" });
    const roundEl = h("dd", { id: "run-round", text: "—" });
    const platformEl = h("dd", { id: "run-platform", text: "—" });
    const waitingEl = h("p", { id: "run-waiting", class: "muted", hidden: true });
    const notesEl = h("ul", { id: "run-notes", class: "notes" });
    const failuresEl = h("ul", { id: "run-failures", class: "failures" });
    const summaryEl = h("pre", { id: "run-plan", class: "plan" });
    const liveBox = h("section", { id: "run-live", class: "card", hidden: true, "aria-live": "polite" },
      h("h2", { text: "Progress" }),
      h("div", { class: "progress-line" }, bar, progressText_),
      h("dl", { class: "meta compact" },
        h("dt", { text: "Platform" }), platformEl,
        h("dt", { text: "Condition" }), condEl,
        h("dt", { text: "Probe" }), whatEl,
        h("dt", { text: "Round" }), roundEl,
        h("dt", { text: "ETA" }), etaEl),
      waitingEl,
      h("details", { id: "run-plan-box", hidden: true }, h("summary", { text: "Plan" }), summaryEl));
    const notesBox = h("section", { class: "card", id: "run-notes-box", hidden: true },
      h("h2", { text: "Notes and warnings" }), notesEl);
    const failuresBox = h("section", { class: "card", id: "run-failures-box", hidden: true },
      h("h2", { text: "Trial failures" }), failuresEl);
    const downloads = h("p", { class: "downloads" },
      h("span", { class: "muted", text: "Download: " }),
      ["json", "csv", "markdown"].map((f) => [h("a", { href: API + "/runs/" + encodeURIComponent(id) + "/export?format=" + f, download: "", text: f }), " "]),
      h("a", { href: API + "/runs/" + encodeURIComponent(id) + "/report?download=1", download: "", text: "html" }));
    const reportBox = h("section", { id: "run-report", class: "report", hidden: true });
    const fleetBox = h("section", { id: "run-fleet", class: "card", hidden: true });
    const crossBox = h("section", { id: "run-cross", class: "card", hidden: true });
    const message = h("p", { id: "run-message", class: "error", role: "alert", hidden: true });

    stopBtn.addEventListener("click", async () => {
      const job = activeJobFor(id);
      if (!job) return;
      stopBtn.disabled = true;
      try {
        const j = await api("/jobs/" + encodeURIComponent(job.id) + "/stop", { method: "POST" });
        if (j && j.id) state.jobs.set(j.id, j);
        render();
      } catch (e) {
        toast("Stop failed: " + e.message);
      } finally {
        stopBtn.disabled = false;
      }
    });
    resumeBtn.addEventListener("click", async () => {
      resumeBtn.disabled = true;
      try {
        const j = await api("/runs/" + encodeURIComponent(id) + "/resume", { method: "POST" });
        if (j && j.id) {
          state.jobs.set(j.id, j);
          state.live.delete(j.id);
        }
        view.reportShown = false;
        clear(reportBox);
        reportBox.hidden = true;
        render();
      } catch (e) {
        toast("Resume failed: " + e.message);
      } finally {
        resumeBtn.disabled = false;
      }
    });

    function metaRow(k, v) {
      return [h("dt", { text: k }), h("dd", {}, v)];
    }

    function render() {
      const run = view.run;
      const job = activeJobFor(id);
      // What the run is doing now: an active job speaks for it, else the stored status.
      let status = run ? run.status : "unknown";
      if (job) status = job.state === "queued" ? "queued" : job.state === "stopping" ? "stopping" : "running";
      else if (status === "running" && run && run.job) {
        const j = state.jobs.get(run.job);
        if (j && FINAL_JOB_STATES.has(j.state)) scheduleReload(2000);
      }
      statusEl.textContent = status;
      statusEl.className = "badge status-" + status.replace(/[^a-z]/g, "");
      stopBtn.hidden = !job || job.state === "stopping";
      resumeBtn.hidden = !!job || !run || run.status !== "interrupted" || run.resumable === false;

      if (run) {
        clear(meta);
        append(meta, [
          metaRow("Scenario", run.scenario || "—"),
          metaRow("Kind", run.kind || "—"),
          metaRow("Platform", run.platform || "—"),
          metaRow("Host", run.host || "—"),
          metaRow("Seed", run.seed === null || run.seed === undefined ? "—" : String(run.seed)),
          metaRow("Started", timeEl(run.started_at)),
          metaRow("Duration", fmtDuration(run.duration_s)),
          // While a job runs it, the stored counts lag: the live count speaks instead.
          metaRow("Trials", job && job.progress && job.progress.of
            ? progressText(job.progress) + " run so far"
            : (run.trials_ok ?? "?") + " ok of " + (run.trials ?? "?")),
          metaRow("Headline", headlineList(run)),
        ]);
        if (run.reason) append(meta, metaRow("Reason", run.reason));
        renderFleet(run.fleet);
        renderCross(run.cross);
        clear(caveats);
        for (const c of run.caveats || []) caveats.appendChild(h("li", { text: typeof c === "string" ? c : JSON.stringify(c) }));
      }

      const running = !!job;
      liveBox.hidden = !running;
      if (job) {
        const p = job.progress || {};
        const l = liveOf(job.id);
        progressText_.textContent = progressText(p);
        bar.max = p.of || 1;
        bar.value = Math.min(p.n || 0, p.of || 1);
        platformEl.textContent = p.platform ? p.platform.name + " (" + p.platform.n + " of " + p.platform.of + ")" : "—";
        condEl.textContent = p.condition || l.condition || "—";
        whatEl.textContent = p.what || "—";
        roundEl.textContent = p.round === null || p.round === undefined ? "—" : String(p.round);
        etaEl.textContent = p.eta_s === null || p.eta_s === undefined ? "—" : fmtDuration(p.eta_s);
        waitingEl.hidden = !l.waiting;
        waitingEl.textContent = l.waiting ? "Waiting: " + l.waiting : "";
        if (job.state === "queued") {
          waitingEl.hidden = false;
          waitingEl.textContent = "Queued" + (job.position ? " at position " + job.position : "") + ".";
        }
        const planBox = $("#run-plan-box", liveBox);
        planBox.hidden = !l.summary;
        summaryEl.textContent = l.summary || "";
      }
      renderLists(job);

      const finished = !job && run && run.status !== "running";
      if (finished && !view.reportShown) {
        view.reportShown = true;
        clear(reportBox);
        append(reportBox, [
          h("h2", { text: "Report" }),
          h("iframe", { id: "report-frame", title: "The HTML report of run " + id, src: API + "/runs/" + encodeURIComponent(id) + "/report" }),
        ]);
        reportBox.hidden = false;
      }
    }

    /** The table across the platforms of a set of runs and its runs, as the server gives them. */
    function renderCross(cross) {
      crossBox.hidden = !cross;
      clear(crossBox);
      if (!cross) return;
      const table = h("table", { id: "cross-table", class: "data" },
        h("thead", {}, h("tr", {}, (cross.columns || []).map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, (cross.rows || []).map((r) => h("tr", {}, r.map((v) => h("td", { text: v }))))));
      append(crossBox, [
        h("h2", { text: cross.title || "Across platforms" }),
        h("div", { class: "table-wrap" }, table),
        (cross.notes || []).length ? h("ul", { id: "cross-notes", class: "notes" }, cross.notes.map((n) => h("li", { text: n }))) : null,
        h("p", { id: "cross-runs", class: "small" }, h("span", { class: "muted", text: "Runs: " }),
          (cross.runs || []).map((r) => [h("a", { href: "#/runs/" + encodeURIComponent(r.run), dataset: { platform: r.platform }, text: r.platform + " " + r.run }), " "])),
      ]);
    }

    /** The fleet table and the hosts of a fleet run, as the server gives them. */
    function renderFleet(fleet) {
      fleetBox.hidden = !fleet;
      clear(fleetBox);
      if (!fleet) return;
      const table = h("table", { id: "fleet-table", class: "data" },
        h("thead", {}, h("tr", {}, (fleet.columns || []).map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, (fleet.rows || []).map((r) => h("tr", {}, r.map((v) => h("td", { text: v }))))));
      const hosts = h("table", { id: "fleet-hosts", class: "data" },
        h("thead", {}, h("tr", {}, ["Host", "Run", "Labels"].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, (fleet.hosts || []).map((m) => h("tr", { dataset: { host: m.host } },
          h("td", { text: m.host }),
          h("td", {}, h("a", { href: "#/runs/" + encodeURIComponent(m.run), class: "mono", text: m.run })),
          h("td", { class: "small", text: Object.entries(m.labels || {}).map(([k, v]) => k + "=" + v).join(" ") })))));
      append(fleetBox, [
        h("h2", { text: "Fleet: " + (fleet.title || "") }),
        h("div", { class: "table-wrap" }, table),
        (fleet.notes || []).length ? h("ul", { id: "fleet-notes", class: "notes" }, fleet.notes.map((n) => h("li", { text: n }))) : null,
        h("h3", { text: "Hosts (grouped by " + (fleet.type_label || "type") + ")" }),
        h("div", { class: "table-wrap" }, hosts),
      ]);
    }

    // Notes and failures stay shown after the run ends (from the job that ran it last).
    function renderLists(job) {
      const jobId = job ? job.id : view.lastJob;
      if (job) view.lastJob = job.id;
      const l = jobId ? state.live.get(jobId) : null;
      clear(notesEl);
      clear(failuresEl);
      if (l) {
        for (const n of l.notes) notesEl.appendChild(h("li", { class: n.kind, text: n.text }));
        for (const f of l.failures) failuresEl.appendChild(h("li", { text: f.text }));
      }
      const caveatCount = caveats.childElementCount;
      notesBox.hidden = notesEl.childElementCount === 0;
      failuresBox.hidden = failuresEl.childElementCount === 0;
      $("#caveats-box", page).hidden = caveatCount === 0;
    }

    // Loads can overlap (a reload asked while one is under way) and answer out of order: an
    // answer older than the one shown is dropped, or a run read before its set was linked
    // would hide the table across the platforms for good.
    async function load() {
      const asked = ++view.asked;
      try {
        const run = await api("/runs/" + encodeURIComponent(id));
        if (state.view !== view || asked < view.shown) return;
        view.shown = asked;
        view.run = run;
        message.hidden = true;
        render();
      } catch (e) {
        if (state.view !== view || asked < view.shown) return;
        if (e.status === 404 && activeJobFor(id)) {
          // Planned but not stored yet: the job's events will bring it.
          scheduleReload(1000);
          render();
          return;
        }
        message.textContent = e.status === 404 ? "No run " + id + " in this database." : "Could not load the run: " + e.message;
        message.hidden = false;
      }
    }

    // A reload already waiting serves a later ask too, unless that ask is `final` (the job
    // ended, the runs of a set were linked): then the page loads again after it, whatever
    // an earlier load brought.
    function scheduleReload(ms, final) {
      if (view.timer && !final) return;
      clearTimeout(view.timer);
      view.timer = setTimeout(() => { view.timer = null; load(); }, ms);
    }

    view.update = (kind, data) => {
      if (kind === "job") {
        const j = data.job;
        if (j.run !== id && !(j.spec && j.spec.resume === id)) return;
        if (!data.before || data.before.state !== j.state) {
          const final = FINAL_JOB_STATES.has(j.state);
          scheduleReload(final ? 200 : 500, final);
        }
        render();
      } else if (kind === "run") {
        const j = state.jobs.get(data.job);
        if (data.run !== id && !(j && (j.run === id || (j.spec && j.spec.resume === id)))) return;
        if (data.event.event === "finished") scheduleReload(200);
        if (data.event.event === "platforms_linked") scheduleReload(200, true);
        render();
      }
    };
    view.leave = () => clearTimeout(view.timer);

    const page = h("div", { class: "run-page" },
      h("p", { class: "crumbs" }, h("a", { href: "#/runs", text: "← Runs" })),
      h("div", { class: "page-head" }, h("div", {}, title, " ", statusEl),
        h("div", { class: "actions" }, stopBtn, resumeBtn)),
      message,
      h("div", { class: "columns" },
        h("section", { class: "card" }, h("h2", { text: "Details" }), meta, downloads),
        liveBox),
      h("section", { class: "card", id: "caveats-box", hidden: true }, h("h2", { text: "Caveats" }), caveats),
      crossBox, fleetBox, failuresBox, notesBox, reportBox);
    setMain(page);
    load();
  }

  // ---------- launch ----------

  /** The tune part of the launch form: the victim's probe, the SLO, the aggressor's
   *  stressors, the knobs (a + adds one) and the resolution, as the job's `tune`. Errors are
   *  shown at their field (`tune.knobs[1]`): the element whose data-field is that field. */
  function tuneFields(s) {
    const t = s.tune || { probes: [], stressors: [], knobs: [] };
    const field = (name, label, input, extra) => h("div", { class: "field", dataset: { field: name } },
      h("label", { for: input.id, text: label }), input, extra || null);
    const probe = h("select", { id: "tune-probe", name: "tune-probe" },
      t.probes.map((p) => h("option", { value: p.name, selected: p.name === "service", text: p.name })));
    const metric = h("select", { id: "tune-metric", name: "tune-metric" });
    function fillMetrics() {
      const p = t.probes.find((x) => x.name === probe.value);
      // A service's isol% at p01 (isol_p01 >= PCT) is a figure of its windows, not a metric.
      const names = p ? (p.name === "service" ? [...p.metrics, "isol_p01"] : p.metrics) : [];
      const keep = metric.value;
      clear(metric);
      for (const m of names) metric.appendChild(h("option", { value: m, text: m }));
      const pick = names.includes(keep) ? keep : names.includes("lat_p99_ms") ? "lat_p99_ms" : names[0];
      if (pick) metric.value = pick;
    }
    probe.addEventListener("change", fillMetrics);
    fillMetrics();
    const op = h("select", { id: "tune-op", name: "tune-op", "aria-label": "How the metric compares with the bound" },
      h("option", { value: "<=", text: "<= (at most)" }),
      h("option", { value: ">=", text: ">= (at least)" }),
      h("option", { value: "loss<=", text: "loss <= (% worse than alone, at most)" }));
    const bound = h("input", { id: "tune-bound", name: "tune-bound", type: "number", min: 0, step: "any", value: 10, "aria-label": "Bound" });
    const stressors = h("select", { id: "tune-stressors", name: "tune-stressors", multiple: true, size: Math.min(6, t.stressors.length || 1) },
      t.stressors.map((n) => h("option", { value: n, selected: n === "cpu", text: n })));
    const knobs = h("div", { id: "tune-knobs", dataset: { field: "tune.knobs" } });
    const addKnob = h("button", { id: "tune-add-knob", type: "button", text: "+ knob", title: "Search another knob" });
    const resolution = h("input", { id: "tune-resolution", name: "tune-resolution", type: "number", min: 0, max: 0.5, step: "any", value: 0.05 });

    function knobRow(k) {
      const i = knobs.querySelectorAll("fieldset.knob").length;
      const id = (part) => "tune-knob-" + i + "-" + part;
      const input = (part, label, value) => h("span", { class: "field" },
        h("label", { for: id(part), text: label }),
        h("input", { id: id(part), name: id(part), type: "text", value, size: 8 }));
      const key = h("select", { id: id("key"), name: id("key") },
        t.knobs.map((n) => h("option", { value: n, selected: n === k.key, text: n })));
      const remove = i === 0 ? null : h("button", { type: "button", class: "small", text: "remove", title: "Search this knob no more" });
      const row = h("fieldset", { class: "knob", dataset: { field: "tune.knobs[" + i + "]" } },
        h("legend", { text: "Knob " + (i + 1) }),
        h("div", { class: "row" },
          input("tenant", "Tenant", k.tenant),
          h("span", { class: "field" }, h("label", { for: id("key"), text: "Limit" }), key),
          input("from", "From (tight)", k.from),
          input("to", "To (loose)", k.to),
          remove));
      if (remove) remove.addEventListener("click", () => { row.remove(); renumber(); });
      knobs.appendChild(row);
    }
    // After a removal the rows are numbered again, so a field error finds its row.
    function renumber() {
      const rows = readKnobs();
      clear(knobs);
      for (const k of rows) knobRow(k);
    }
    function readKnobs() {
      return [...knobs.querySelectorAll("fieldset.knob")].map((row) => {
        const v = (part) => $('[id$="-' + part + '"]', row).value.trim();
        return { tenant: v("tenant"), key: v("key"), from: v("from"), to: v("to") };
      });
    }
    knobRow({ tenant: "batch", key: "cpus", from: "0.05", to: "1" });
    addKnob.addEventListener("click", () => knobRow({ tenant: "batch", key: "weight", from: "1", to: "10000" }));

    const el = h("div", { id: "tune-form", class: "indent" },
      h("p", { class: "muted small", text: "Finds the loosest setting of each knob at which the victim's SLO still holds, starting from the " + (t.preset || "tune-cpu") + " preset (a service victim beside a batch aggressor)." }),
      h("div", { class: "row" },
        field("tune.probe", "Victim's probe", probe),
        h("div", { class: "field", dataset: { field: "tune.slo" } },
          h("label", { for: "tune-metric", text: "SLO" }),
          h("div", { class: "row" }, metric, op, bound))),
      field("tune.stressors", "Aggressor's stressors (one or more)", stressors),
      h("div", { class: "field" }, h("span", { text: "Knobs: a tenant's limit, searched between two settings" }), knobs, h("div", {}, addKnob)),
      field("tune.resolution", "Resolution (share of each knob's range)", resolution));

    function clearErrors() {
      for (const e of el.querySelectorAll(".field-error")) e.remove();
      for (const e of el.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
      for (const e of el.querySelectorAll(".invalid")) e.classList.remove("invalid");
    }
    /** Shows `message` at `name`'s field (a stressor's at the stressors); false when the
     *  form has no such field. */
    function showError(name, message) {
      const target = $('[data-field="' + name + '"]', el) || $('[data-field="' + name.replace(/\[\d+\]$/, "") + '"]', el);
      if (!target) return false;
      target.classList.add("invalid");
      for (const i of target.querySelectorAll("input, select")) i.setAttribute("aria-invalid", "true");
      target.appendChild(h("p", { class: "field-error error", role: "alert", text: message }));
      const first = target.querySelector("input, select");
      if (first) first.focus();
      return true;
    }
    function body() {
      const b = Number(bound.value);
      if (bound.value.trim() === "" || !Number.isFinite(b)) {
        showError("tune.slo", "tune.slo: the bound is a number above 0, e.g. 10");
        return null;
      }
      const out = {
        probe: probe.value,
        slo: { metric: metric.value, op: op.value, bound: b },
        stressors: [...stressors.selectedOptions].map((o) => o.value),
        knobs: readKnobs(),
      };
      if (!out.stressors.length) {
        showError("tune.stressors", "tune.stressors: choose at least one stressor");
        return null;
      }
      if (resolution.value.trim() !== "") {
        const r = Number(resolution.value);
        if (!Number.isFinite(r)) {
          showError("tune.resolution", "tune.resolution: a number above 0 and below 0.5, e.g. 0.05");
          return null;
        }
        out.resolution = r;
      }
      return out;
    }
    return { el, body, showError, clearErrors };
  }


  function launchPage() {
    const view = { name: "launch", waitingFor: null, timer: null };
    state.view = view;
    const s = state.session;

    const sourcePreset = h("input", { type: "radio", name: "source", id: "source-preset", value: "preset", checked: true });
    const sourceScenario = h("input", { type: "radio", name: "source", id: "source-scenario", value: "scenario" });
    const sourceTune = h("input", { type: "radio", name: "source", id: "source-tune", value: "tune" });
    const tune = tuneFields(s);
    const showTune = () => { tune.el.hidden = !sourceTune.checked; };
    for (const r of [sourcePreset, sourceScenario, sourceTune]) r.addEventListener("change", showTune);
    showTune();
    const preset = h("select", { id: "preset", name: "preset" },
      (s.presets || []).map((p) => h("option", { value: p.name, title: p.summary || "", text: p.name + (p.summary ? " — " + p.summary : "") })));
    const platform = h("select", { id: "platform", name: "platform" },
      h("option", { value: "", text: "as the scenario says" }),
      (s.platforms || []).map((p) => h("option", {
        value: p.name, disabled: !p.available, title: p.available ? "" : (p.why || "unavailable here"),
        text: p.name + (p.available ? "" : " (unavailable here)"),
      })));
    const unavailable = (s.platforms || []).filter((p) => !p.available);
    const platformWhy = unavailable.length
      ? h("details", { id: "platform-why", class: "small" },
        h("summary", { text: "Why " + unavailable.map((p) => p.name).join(", ") + (unavailable.length > 1 ? " are" : " is") + " unavailable" }),
        h("ul", {}, unavailable.map((p) => h("li", {}, h("strong", { text: p.name + ": " }), p.why || "no reason given"))))
      : null;
    const platforms = h("div", { id: "platforms", class: "row", role: "group", "aria-labelledby": "platforms-label" },
      (s.platforms || []).map((p) => h("span", { class: "choice" },
        h("input", { type: "checkbox", id: "platforms-" + p.name, name: "platforms", value: p.name, disabled: !p.available }),
        h("label", { for: "platforms-" + p.name, text: p.name }))));
    const seed = h("input", { id: "seed", name: "seed", type: "number", min: 0, step: 1, inputmode: "numeric", placeholder: "the scenario's" });
    const hosts = h("textarea", { id: "hosts", name: "hosts", rows: 4, spellcheck: "false", placeholder: "10.0.0.7:7878\n10.0.0.8:7878 web-2 m5.large" });
    const hostsToken = h("input", { id: "hosts-token", name: "hosts-token", type: "password", autocomplete: "off" });
    const scenario = h("textarea", { id: "scenario", name: "scenario", rows: 10, spellcheck: "false", placeholder: 'name = "my-scenario"\nkind = "matrix"\n…' });
    const scenarioName = h("input", { id: "scenario-name", name: "name", type: "text", value: "scenario.toml" });
    const file = h("input", { id: "scenario-file", type: "file", accept: ".toml,text/plain" });
    const submit = h("button", { id: "launch-submit", type: "submit", class: "primary", text: "Launch" });
    const errorEl = h("p", { id: "launch-error", class: "error", role: "alert", hidden: true });
    const problems = h("ul", { id: "problems", class: "problems", hidden: true });
    const linesView = h("ol", { id: "scenario-lines", class: "lines", hidden: true, "aria-label": "The scenario, line by line" });
    const result = h("p", { id: "launch-result", role: "status", hidden: true });

    preset.addEventListener("change", () => { sourcePreset.checked = true; });
    scenario.addEventListener("input", () => {
      sourceScenario.checked = scenario.value.trim() !== "" || sourceScenario.checked;
    });
    file.addEventListener("change", async () => {
      const f = file.files && file.files[0];
      if (!f) return;
      scenario.value = await f.text();
      scenarioName.value = f.name;
      sourceScenario.checked = true;
    });

    function clearProblems() {
      errorEl.hidden = true;
      problems.hidden = true;
      clear(problems);
      linesView.hidden = true;
      clear(linesView);
    }

    function showProblems(text, list) {
      const byLine = new Map();
      for (const p of list) {
        const line = Number(p.line) || 0;
        const li = h("li", { dataset: { line: String(line) }, tabindex: 0 },
          h("span", { class: "where", text: "line " + line + (p.column ? ", column " + p.column : "") + ": " }),
          h("span", { class: "field", text: p.field ? p.field + ": " : "" }),
          h("span", { class: "message", text: p.message || "" }),
          p.fix ? h("span", { class: "fix", text: " — " + p.fix }) : null);
        li.addEventListener("click", () => focusLine(line));
        li.addEventListener("keydown", (e) => { if (e.key === "Enter") focusLine(line); });
        problems.appendChild(li);
        if (!byLine.has(line)) byLine.set(line, []);
        byLine.get(line).push(p);
      }
      problems.hidden = list.length === 0;
      if (text !== null) {
        const lines = text.split("\n");
        if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
        lines.forEach((ln, i) => {
          const n = i + 1;
          const ps = byLine.get(n);
          const item = h("li", { id: "scenario-line-" + n, class: ps ? "bad" : null, dataset: { line: String(n) } },
            h("code", { text: ln === "" ? " " : ln }),
            ps ? ps.map((p) => h("div", { class: "line-problem", text: "↑ " + (p.column ? "column " + p.column + ": " : "") + (p.field ? p.field + ": " : "") + (p.message || "") })) : null);
          linesView.appendChild(item);
        });
        linesView.hidden = false;
      }
    }

    function focusLine(line) {
      const item = $("#scenario-line-" + line);
      if (item) item.scrollIntoView({ block: "center" });
      if (sourceScenario.checked && line > 0) {
        const lines = scenario.value.split("\n");
        let start = 0;
        for (let i = 0; i < line - 1 && i < lines.length; i++) start += lines[i].length + 1;
        const end = start + (lines[line - 1] || "").length;
        scenario.focus();
        scenario.setSelectionRange(start, end);
      }
    }

    const form = h("form", { id: "launch-form", class: "card", novalidate: true },
      h("fieldset", {},
        h("legend", { text: "What to run" }),
        h("div", { class: "choice" }, sourcePreset, h("label", { for: "source-preset", text: "A preset" })),
        h("div", { class: "field indent" }, h("label", { for: "preset", text: "Preset" }), preset),
        h("div", { class: "choice" }, sourceScenario, h("label", { for: "source-scenario", text: "A scenario (TOML): paste it or open a file" })),
        h("div", { class: "field indent" },
          h("label", { for: "scenario", text: "Scenario" }), scenario,
          h("div", { class: "row" },
            h("span", {}, h("label", { for: "scenario-file", text: "Open a file " }), file),
            h("span", {}, h("label", { for: "scenario-name", text: "Name " }), scenarioName))),
        h("div", { class: "choice" }, sourceTune, h("label", { for: "source-tune", text: "A tune: the loosest isolation setting at which a victim's SLO holds" })),
        tune.el),
      h("fieldset", {},
        h("legend", { text: "Options" }),
        h("div", { class: "row" },
          h("span", { class: "field" }, h("label", { for: "platform", text: "Platform" }), platform),
          h("span", { class: "field" }, h("label", { for: "seed", text: "Seed" }), seed)),
        h("div", { class: "field" },
          h("span", { id: "platforms-label", text: "Or several platforms, each in turn (the run's page then shows the table across them)" }),
          platforms),
        platformWhy),
      h("fieldset", {},
        h("legend", { text: "Where" }),
        h("p", { class: "muted small", text: "Here, or on every host of a fleet at once through its host agent (isobench agent --listen ADDR:PORT): one line per host, ADDR:PORT, then optionally its name and its type. The run's page then shows the fleet table." }),
        h("div", { class: "field" }, h("label", { for: "hosts", text: "Hosts (empty: run here)" }), hosts),
        h("div", { class: "field" }, h("label", { for: "hosts-token", text: "The agents' token" }), hostsToken)),
      h("div", { class: "actions" }, submit),
      errorEl, problems, linesView, result);

    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearProblems();
      tune.clearErrors();
      result.hidden = true;
      const body = {};
      const useScenario = sourceScenario.checked;
      if (sourceTune.checked) {
        body.tune = tune.body();
        if (!body.tune) return;
      } else if (useScenario) {
        if (!scenario.value.trim()) {
          errorEl.textContent = "Paste a scenario or open a file, or choose a preset.";
          errorEl.hidden = false;
          return;
        }
        body.scenario = scenario.value;
        body.name = scenarioName.value.trim() || "scenario.toml";
      } else {
        body.preset = preset.value;
      }
      if (platform.value) body.platform = platform.value;
      const several = [...platforms.querySelectorAll("input:checked")].map((c) => c.value);
      if (several.length) body.platforms = several;
      if (seed.value.trim() !== "") {
        const n = Number(seed.value);
        if (!Number.isInteger(n) || n < 0) {
          errorEl.textContent = "The seed is a whole number, 0 or more.";
          errorEl.hidden = false;
          return;
        }
        body.seed = n;
      }
      const hostLines = hosts.value.split("\n").map((l) => l.trim()).filter(Boolean);
      if (hostLines.length) {
        body.hosts = hostLines.map((l) => {
          const [address, name, type] = l.split(/\s+/);
          const host = { address, token: hostsToken.value };
          if (name) host.name = name;
          if (type) host.type = type;
          return host;
        });
      }
      submit.disabled = true;
      const sent = useScenario ? scenario.value : null;
      try {
        const job = await api("/jobs", { method: "POST", json: body });
        state.jobs.set(job.id, job);
        updateQueueCount();
        result.textContent = "";
        append(result, ["Queued as ", h("a", { href: "#/queue", text: job.id }),
          job.position ? " (position " + job.position + ")" : "", ". Its run opens here when it starts…"]);
        result.hidden = false;
        view.waitingFor = job.id;
        poll();
      } catch (ex) {
        errorEl.textContent = ex.message;
        errorEl.hidden = false;
        const at = ex.body && ex.body.field;
        if (sourceTune.checked && at && tune.showError(at, ex.message)) errorEl.hidden = true;
        const list = (ex.body && ex.body.problems) || [];
        if (list.length && !(sourceTune.checked && at)) showProblems(sent, list);
        if (ex.status === 413) errorEl.textContent = "The scenario is too large (the limit is 1 MiB).";
      } finally {
        submit.disabled = false;
      }
    });

    // Once the queued job has a run, its page opens; the event stream usually tells first,
    // this poll covers a stream that is reconnecting.
    function openWhenStarted() {
      const j = view.waitingFor && state.jobs.get(view.waitingFor);
      if (!j) return false;
      if (j.run) { go("#/runs/" + encodeURIComponent(j.run)); return true; }
      if (FINAL_JOB_STATES.has(j.state)) {
        result.textContent = "Job " + j.id + " ended " + j.state + (j.error ? ": " + j.error : "") + " before its run started.";
        view.waitingFor = null;
        return true;
      }
      return false;
    }
    async function poll() {
      if (state.view !== view || !view.waitingFor) return;
      if (openWhenStarted()) return;
      try {
        const j = await api("/jobs/" + encodeURIComponent(view.waitingFor));
        if (j && j.id) state.jobs.set(j.id, Object.assign({}, state.jobs.get(j.id) || {}, j));
      } catch (e) { /* the stream or the next poll will tell */ }
      if (state.view === view && !openWhenStarted()) view.timer = setTimeout(poll, 1000);
    }
    view.update = (kind) => { if (kind === "job" || kind === "run") openWhenStarted(); };
    view.leave = () => clearTimeout(view.timer);

    setMain(h("div", { class: "page-head" }, h("h1", { text: "Launch a run" })), form);
  }

  // ---------- queue ----------

  function queuePage() {
    const view = { name: "queue", pending: false };
    state.view = view;
    const active = h("table", { id: "queue-table", class: "data" },
      h("thead", {}, h("tr", {}, ["#", "Job", "What", "State", "Progress", "Queued", "Run", "Actions"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody"));
    const finished = h("table", { id: "finished-table", class: "data" },
      h("thead", {}, h("tr", {}, ["Job", "What", "State", "Exit", "Ended", "Run"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody"));
    const activeEmpty = h("p", { class: "muted", text: "Nothing running or queued." });
    const finishedEmpty = h("p", { class: "muted", text: "No finished jobs yet." });

    async function act(promise, what) {
      try {
        const res = await promise;
        if (res && Array.isArray(res.jobs)) for (const j of res.jobs) state.jobs.set(j.id, j);
        else if (res && res.id) state.jobs.set(res.id, res);
        await load();
      } catch (e) {
        toast(what + " failed: " + e.message);
        load();
      }
    }

    function render() {
      view.pending = false;
      const jobs = [...state.jobs.values()];
      const order = { running: 0, stopping: 0, queued: 1 };
      const live = jobs.filter((j) => ACTIVE_JOB_STATES.has(j.state)).sort((a, b) =>
        (order[a.state] - order[b.state]) || ((a.position || 0) - (b.position || 0)) || String(a.created_at).localeCompare(String(b.created_at)));
      const done = jobs.filter((j) => !ACTIVE_JOB_STATES.has(j.state)).sort((a, b) =>
        String(b.ended_at || b.created_at).localeCompare(String(a.ended_at || a.created_at)));
      const queued = live.filter((j) => j.state === "queued");
      const tb = clear(active.tBodies[0]);
      for (const j of live) {
        const qi = queued.indexOf(j);
        const id = encodeURIComponent(j.id);
        const actions = h("td", { class: "actions" });
        if (j.state === "queued") {
          actions.append(
            h("button", { type: "button", class: "move-up", disabled: qi <= 0, "aria-label": "Move " + j.id + " up", title: "Move up", text: "↑",
              onclick: () => act(api("/jobs/" + id + "/move", { method: "POST", json: { position: qi } }), "Moving") }),
            h("button", { type: "button", class: "move-down", disabled: qi >= queued.length - 1, "aria-label": "Move " + j.id + " down", title: "Move down", text: "↓",
              onclick: () => act(api("/jobs/" + id + "/move", { method: "POST", json: { position: qi + 2 } }), "Moving") }),
            h("button", { type: "button", class: "cancel", "aria-label": "Cancel " + j.id, text: "Cancel",
              onclick: () => act(api("/jobs/" + id, { method: "DELETE" }), "Cancelling") }));
        } else if (j.state === "running") {
          actions.append(h("button", { type: "button", class: "stop danger", "aria-label": "Stop " + j.id, text: "Stop",
            onclick: () => act(api("/jobs/" + id + "/stop", { method: "POST" }), "Stopping") }));
        }
        const p = j.progress;
        tb.appendChild(h("tr", { dataset: { job: j.id } },
          h("td", { class: "num", text: j.state === "queued" ? String(j.position || qi + 1) : "▶" }),
          h("td", { class: "mono", text: j.id }),
          h("td", { text: jobWhat(j) }),
          h("td", {}, badge(j.state)),
          h("td", {}, p && p.of ? [h("progress", { max: p.of, value: Math.min(p.n, p.of), "aria-label": "Progress of " + j.id }), " ", progressText(p)] : "—"),
          h("td", {}, timeEl(j.created_at)),
          h("td", {}, j.run ? h("a", { href: "#/runs/" + encodeURIComponent(j.run), class: "mono", text: j.run }) : "—"),
          actions));
      }
      activeEmpty.hidden = live.length > 0;
      const fb = clear(finished.tBodies[0]);
      for (const j of done) {
        fb.appendChild(h("tr", { dataset: { job: j.id } },
          h("td", { class: "mono", text: j.id }),
          h("td", { text: jobWhat(j) }),
          h("td", {}, badge(j.state), j.error ? h("div", { class: "small error", text: j.error }) : null),
          h("td", { class: "num", text: j.exit_code === null || j.exit_code === undefined ? "—" : String(j.exit_code) }),
          h("td", {}, timeEl(j.ended_at)),
          h("td", {}, j.run ? h("a", { href: "#/runs/" + encodeURIComponent(j.run), class: "mono", text: j.run }) : "—")));
      }
      finishedEmpty.hidden = done.length > 0;
    }

    async function load() {
      try {
        const data = await api("/jobs");
        if (state.view !== view) return;
        const seen = new Set();
        for (const j of (data && data.jobs) || []) { state.jobs.set(j.id, j); seen.add(j.id); }
        // Jobs the server no longer lists (older than its last 50) leave the table.
        for (const id of [...state.jobs.keys()]) if (!seen.has(id) && !ACTIVE_JOB_STATES.has(state.jobs.get(id).state)) state.jobs.delete(id);
        updateQueueCount();
        render();
      } catch (e) {
        if (e.status !== 401) toast("Could not load the queue: " + e.message);
      }
    }

    view.update = (kind) => {
      if (kind !== "job" || view.pending) return;
      view.pending = true;
      requestAnimationFrame(render);
    };

    setMain(
      h("div", { class: "page-head" }, h("h1", { text: "Queue" }), h("div", { class: "actions" }, h("a", { class: "button primary", href: "#/launch", text: "Launch a run" }))),
      h("section", { class: "card" }, h("h2", { text: "Running and queued" }), activeEmpty, h("div", { class: "table-wrap" }, active)),
      h("section", { class: "card" }, h("h2", { text: "Finished" }), finishedEmpty, h("div", { class: "table-wrap" }, finished)));
    render();
    load();
  }

  // ---------- compare ----------

  function comparePage(runsParam) {
    const view = { name: "compare" };
    state.view = view;
    const input = h("input", { id: "compare-runs", name: "runs", type: "text", size: 60, placeholder: "RUN_ID, RUN_ID, …", value: runsParam || "" });
    const picker = h("fieldset", { id: "compare-picker" }, h("legend", { text: "Or tick runs" }));
    const out = h("pre", { id: "compare-text", class: "compare", hidden: true });
    const err = h("p", { id: "compare-error", class: "error", role: "alert", hidden: true });
    const submit = h("button", { id: "compare-submit", type: "submit", class: "primary", text: "Compare" });
    const form = h("form", { id: "compare-form", class: "card" },
      h("label", { for: "compare-runs", text: "Runs to compare (two to eight different ids, separated by commas; the first is the reference)" }), input,
      picker, h("div", { class: "actions" }, submit), err);

    function ids() {
      return input.value.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
    }

    function fillPicker(runs) {
      const chosen = new Set(ids());
      for (const r of runs.slice(0, 30)) {
        const cb = h("input", { type: "checkbox", id: "cmp-" + r.id, value: r.id, checked: chosen.has(r.id) });
        cb.addEventListener("change", () => {
          const now = ids().filter((x) => x !== r.id);
          if (cb.checked) now.push(r.id);
          input.value = now.join(",");
        });
        picker.appendChild(h("div", { class: "choice" }, cb,
          h("label", { for: "cmp-" + r.id }, h("span", { class: "mono", text: r.id }), " " + (r.scenario || "") + " ", badge(r.status))));
      }
    }

    async function compare() {
      const list = ids();
      err.hidden = true;
      if (list.length < 2) {
        err.textContent = "Pick two to eight different runs.";
        err.hidden = false;
        return;
      }
      submit.disabled = true;
      try {
        const data = await api("/compare?runs=" + encodeURIComponent(list.join(",")));
        if (state.view !== view) return;
        out.textContent = (data && data.text) || "";
        out.hidden = false;
      } catch (e) {
        err.textContent = e.message;
        err.hidden = false;
        out.hidden = true;
      } finally {
        submit.disabled = false;
      }
    }

    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const list = ids();
      const want = "#/compare?runs=" + encodeURIComponent(list.join(","));
      if (location.hash !== want) history.replaceState(null, "", want);
      compare();
    });

    setMain(h("div", { class: "page-head" }, h("h1", { text: "Compare runs" })), form, out);
    (async () => {
      try {
        const data = await api("/runs");
        if (state.view === view) fillPicker((data && data.runs) || []);
      } catch (e) { /* the form still takes ids */ }
    })();
    if (ids().length >= 2) compare();
  }

  // ---------- start ----------

  async function boot() {
    try {
      state.session = await api("/session", { noLogin: true });
    } catch (e) {
      if (e.status === 401) return showLogin();
      setMain(h("p", { class: "error", text: "The server did not answer: " + e.message + ". " }),
        h("button", { type: "button", text: "Try again", onclick: boot }));
      return;
    }
    const info = $("#server-info");
    info.textContent = "v" + (state.session.version || "?");
    info.title = "database: " + (state.session.db || "?");
    try {
      const data = await api("/jobs");
      for (const j of (data && data.jobs) || []) state.jobs.set(j.id, j);
      updateQueueCount();
    } catch (e) { /* the stream sends the jobs too */ }
    connectEvents();
    window.addEventListener("hashchange", route);
    route();
  }

  // Relative times ("3 min ago") stay true while the page is open.
  setInterval(() => {
    for (const t of document.querySelectorAll("time[datetime]")) t.textContent = fmtRelative(t.getAttribute("datetime"));
  }, 30000);

  boot();
})();
