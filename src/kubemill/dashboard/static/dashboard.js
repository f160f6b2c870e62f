// kubemill dashboard: small vanilla script. The server renders every page and pushes
// changes as Server-Sent Events; this file swaps the pushed fragments in, keeps ages and
// durations ticking, filters the jobs table and sends actions with the CSRF header.
"use strict";

const CSRF = document.querySelector('meta[name="csrf-token"]').content;

function say(text) {
  const live = document.getElementById("live");
  if (live) live.textContent = text;
}

// --- ages and durations ---------------------------------------------------------------------

function words(seconds) {
  seconds = Math.max(0, Math.floor(seconds));
  if (seconds < 60) return seconds + "s";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m" + (seconds < 600 ? (seconds % 60) + "s" : "");
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h" + (seconds < 36000 ? Math.floor((seconds % 3600) / 60) + "m" : "");
  return Math.floor(seconds / 86400) + "d";
}

function tick(root) {
  const now = Date.now();
  (root || document).querySelectorAll("time[data-age]").forEach((el) => {
    el.textContent = words((now - Date.parse(el.getAttribute("datetime"))) / 1000);
  });
  (root || document).querySelectorAll("[data-duration]").forEach((el) => {
    const end = el.dataset.end ? Date.parse(el.dataset.end) : now;
    el.textContent = words((end - Date.parse(el.dataset.start)) / 1000);
  });
  (root || document).querySelectorAll(".lives").forEach((lives) => {
    // The job's span so far: from its first start to its end, or now while it runs.
    const from = Date.parse(lives.dataset.from);
    const to = lives.dataset.to ? Date.parse(lives.dataset.to) : now;
    const span = Math.max(to - from, 1);
    lives.querySelectorAll(".life-bar").forEach((bar) => {
      const start = Date.parse(bar.dataset.start);
      const end = bar.dataset.end ? Date.parse(bar.dataset.end) : to;
      const left = Math.min(100, Math.max(0, ((start - from) / span) * 100));
      const width = Math.max(0.5, Math.min(100 - left, ((end - start) / span) * 100));
      bar.style.left = left + "%";
      bar.style.width = width + "%";
    });
  });
  (root || document).querySelectorAll("time:not([data-age])").forEach((el) => {
    if (el.dataset.shown) return;
    const when = new Date(el.getAttribute("datetime"));
    if (isNaN(when)) return;
    // Today's times as 10:54:28; older ones with their date.
    const today = new Date().toDateString() === when.toDateString();
    el.textContent = today ? when.toLocaleTimeString() : when.toLocaleString();
    el.dataset.shown = "1";
  });
}

// --- a pushed stream, reconnecting ---------------------------------------------------------

function stream(url, handlers) {
  const source = new EventSource(url);
  source.onopen = () => say("live");
  source.onerror = () => say(source.readyState === EventSource.CLOSED ? "disconnected" : "reconnecting…");
  for (const [event, handle] of Object.entries(handlers)) {
    source.addEventListener(event, (e) => handle(JSON.parse(e.data), source));
  }
  return source;
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Kubemill-CSRF": CSRF },
    body: JSON.stringify(body || {}),
    credentials: "same-origin",
  });
  let data = {};
  try { data = await response.json(); } catch (e) { data = { ok: false, message: await response.text() }; }
  return data;
}

// --- jobs ------------------------------------------------------------------------------------

function filterRows() {
  const chosen = {};
  document.querySelectorAll("[data-filter]").forEach((s) => { chosen[s.dataset.filter] = s.value; });
  let shown = 0;
  document.querySelectorAll("#job-rows tr[data-name]").forEach((row) => {
    const ok = Object.entries(chosen).every(([k, v]) => !v || row.dataset[k] === v);
    row.hidden = !ok;
    if (ok) shown += 1;
  });
  const params = new URLSearchParams(Object.entries(chosen).filter(([, v]) => v));
  history.replaceState(null, "", params.toString() ? "?" + params : location.pathname);
  return shown;
}

function refreshOptions(options) {
  document.querySelectorAll("[data-filter]").forEach((select) => {
    const key = select.dataset.filter;
    const current = select.value;
    const values = new Set(options[key] || []);
    if (current) values.add(current);
    const wanted = ["", ...[...values].sort()];
    const have = [...select.options].map((o) => o.value);
    if (wanted.join("\n") === have.join("\n")) return;
    select.replaceChildren(...wanted.map((v) => {
      const option = new Option(v || "all", v, false, v === current);
      return option;
    }));
  });
}

// One <tr> from the row HTML the server rendered.
function parseRow(html) {
  const template = document.createElement("template");
  template.innerHTML = "<table><tbody>" + html + "</tbody></table>";
  return template.content.querySelector("tr");
}

// Put the pushed rows in place: the whole table on a stream's first message, else only the
// rows that changed, were added (at their place, newest first) or were removed.
function patchRows(body, data) {
  const columns = document.querySelectorAll("table.jobs thead th").length;
  const patched = [];
  if (data.full) {
    body.replaceChildren(...data.rows.map((r) => parseRow(r.html)));
    patched.push(...body.children);
  } else {
    const byKey = new Map();
    body.querySelectorAll("tr[data-key]").forEach((row) => byKey.set(row.dataset.key, row));
    for (const key of data.removed) {
      const row = byKey.get(key);
      if (row) row.remove();
    }
    for (const pushed of data.rows) {
      const row = parseRow(pushed.html);
      const old = byKey.get(pushed.key);
      if (old && old.isConnected) {
        old.replaceWith(row);
      } else {
        // Rows are newest first: before the first row that sorts after this one.
        let next = null;
        for (const other of body.querySelectorAll("tr[data-order]")) {
          if (other.dataset.order < pushed.order) { next = other; break; }
        }
        body.insertBefore(row, next);
      }
      patched.push(row);
    }
  }
  const empty = body.querySelector("tr.empty");
  const any = body.querySelector("tr[data-name]") !== null;
  if (any && empty) empty.remove();
  if (!any && !empty) {
    body.append(parseRow('<tr class="empty"><td colspan="' + columns + '">No jobs yet.</td></tr>'));
  }
  return patched;
}

function jobsPage() {
  document.querySelectorAll("[data-filter]").forEach((s) => s.addEventListener("change", filterRows));
  let failing = false;
  stream("/api/stream/jobs", {
    jobs: (data) => {
      const body = document.getElementById("job-rows");
      const patched = patchRows(body, data);
      if (data.options) refreshOptions(data.options);
      filterRows();
      for (const row of patched) tick(row);
      // Say a failed listing, and once, that the next one worked again.
      if (data.error) say(data.error);
      else if (failing) say("live");
      failing = Boolean(data.error);
    },
  });
}

// --- metrics over steps ----------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
const PLOT = { width: 320, height: 120, pad: 6 };

// A metric as people read it: 4 significant digits (0.1667, 12.35, 1), not 0.16666666666666666.
function short(value) {
  return String(Number(value.toPrecision(4)));
}

function svgElement(name, attributes) {
  const el = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) el.setAttribute(key, value);
  return el;
}

// One small line plot per metric, from the reports the server put in data-points
// ([{step, metrics}], oldest first). Drawn again whenever the section is pushed.
function drawPlots(root) {
  (root || document).querySelectorAll(".plots[data-points]").forEach((box) => {
    const points = JSON.parse(box.dataset.points);
    const names = [...new Set(points.flatMap((p) => Object.keys(p.metrics)))].sort();
    box.replaceChildren();
    for (const name of names) {
      const series = points.filter((p) => name in p.metrics).map((p) => [p.step, p.metrics[name]]);
      const steps = series.map((s) => s[0]);
      const values = series.map((s) => s[1]);
      const [x0, x1] = [Math.min(...steps), Math.max(...steps)];
      const [y0, y1] = [Math.min(...values), Math.max(...values)];
      const { width, height, pad } = PLOT;
      const x = (step) => pad + ((step - x0) / Math.max(x1 - x0, 1e-12)) * (width - 2 * pad);
      const y = (value) => height - pad - ((value - y0) / Math.max(y1 - y0, 1e-12)) * (height - 2 * pad);
      const last = values[values.length - 1];
      const figure = document.createElement("figure");
      figure.className = "plot";
      const label = `${name} over steps ${x0} to ${x1}: from ${short(values[0])} to ${short(last)}`;
      const svg = svgElement("svg", {
        viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, "data-metric": name,
      });
      svg.append(svgElement("rect", { class: "plot-frame", x: 0, y: 0, width, height }));
      svg.append(svgElement("polyline", {
        class: "plot-line",
        points: series.map(([s, v]) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
      }));
      if (series.length === 1) {
        svg.append(svgElement("circle", { class: "plot-dot", cx: x(steps[0]), cy: y(last), r: 3 }));
      }
      const caption = document.createElement("figcaption");
      caption.textContent =
        `${name}: ${short(last)} at step ${x1} (min ${short(y0)}, max ${short(y1)};` +
        ` ${series.length} reports from step ${x0})`;
      figure.append(svg, caption);
      box.append(figure);
    }
  });
}

// --- one job ---------------------------------------------------------------------------------

function jobPage() {
  drawPlots();
  const result = document.getElementById("action-result");
  // One listener for the buttons, which the stream replaces as the job's state changes.
  document.querySelector('[data-section="actions"]').addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || button.disabled) return;
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    button.disabled = true;
    result.textContent = button.textContent + "…";
    const data = await post(button.dataset.url);
    result.textContent = data.message || (data.ok ? "done" : "failed");
    result.className = data.ok ? "" : "problems";
    if (data.ok && data.deleted) window.location.assign("/");
  });
  stream(document.body.dataset.stream, {
    job: (data) => {
      for (const [key, html] of Object.entries(data.sections)) {
        const el = document.querySelector(`[data-section="${key}"]`);
        if (el) { el.innerHTML = html; tick(el); drawPlots(el); }
      }
      document.body.dataset.state = data.state;
    },
    gone: (data, source) => {
      source.close();
      say("this job was deleted");
      document.body.dataset.state = "Deleted";
    },
  });
}

// --- logs ------------------------------------------------------------------------------------

const LOG_KEEP = 50000;

function logsPage() {
  const log = document.getElementById("log");
  const state = document.getElementById("log-state");
  const follow = document.getElementById("follow");
  const search = document.getElementById("log-search");
  const select = document.querySelector("[data-replica-select]");
  const many = !select.value;
  select.addEventListener("change", () => {
    const url = new URL(location.href);
    if (select.value) url.searchParams.set("replica", select.value); else url.searchParams.delete("replica");
    location.assign(url);
  });
  function matches(line) {
    const q = search.value;
    return !q || line.toLowerCase().includes(q.toLowerCase());
  }
  const counted = document.getElementById("log-count");
  const download = document.querySelector("a[download]");
  let skipped = 0;
  let ended = false;
  function note(...parts) {
    const row = document.createElement("div");
    row.className = "skipped";
    row.setAttribute("role", "note");
    row.append(...parts);
    return row;
  }
  function gap(before, after) {
    // A note in the log where lines are missing, with the download's link.
    const link = document.createElement("a");
    link.href = download.getAttribute("href");
    link.textContent = "download the log";
    log.append(note(before, link, after));
    if (follow.checked) log.scrollTop = log.scrollHeight;
  }
  let lines = 0;
  let dropped = 0;
  let earlier = null;
  function count() {
    const shown = search.value ? log.querySelectorAll("div:not([hidden]):not(.skipped)").length : lines;
    const gaps = (dropped ? `, ${dropped} earlier not kept here` : "") + (skipped ? `, ${skipped} skipped` : "");
    counted.textContent = (search.value ? `${shown} of ${lines} lines match` : `${lines} lines`) + gaps;
  }
  function keepTheLast() {
    // A page holds at most LOG_KEEP lines (a log followed for hours would hold gigabytes):
    // the oldest go, and a note at the top says how many and where to get them.
    if (lines <= LOG_KEEP) return;
    if (!earlier) {
      earlier = document.createElement("div");
      earlier.className = "skipped";
      earlier.setAttribute("role", "note");
      log.prepend(earlier);
    }
    let row = earlier.nextElementSibling;
    while (lines > LOG_KEEP && row) {
      const next = row.nextElementSibling;
      if (!row.classList.contains("skipped")) { row.remove(); lines -= 1; dropped += 1; }
      row = next;
    }
    const link = document.createElement("a");
    link.href = download.getAttribute("href");
    link.textContent = "download the log";
    earlier.replaceChildren(`… ${dropped} earlier lines are no longer kept on this page; `, link, " for every line the job keeps");
  }
  search.addEventListener("input", () => {
    log.querySelectorAll("div:not(.skipped)").forEach((row) => { row.hidden = !matches(row.textContent); });
    count();
  });
  state.textContent = "following…";
  const source = stream(document.body.dataset.stream, {
    lines: (batch) => {
      const frag = document.createDocumentFragment();
      for (const line of batch) {
        if (line.rotatedAway) {
          const kib = Math.ceil(line.rotatedAway / 1024);
          frag.append(note(`… ${kib} KiB of this log were rotated away before they could be read here; the job no longer keeps them`));
        }
        const row = document.createElement("div");
        if (many) {
          const rep = document.createElement("span");
          rep.className = "rep";
          rep.textContent = line.replica + " | ";
          row.append(rep);
        }
        row.append(document.createTextNode(line.text));
        row.hidden = !matches(line.text);
        frag.append(row);
      }
      log.append(frag);
      lines += batch.length;
      keepTheLast();
      count();
      if (follow.checked) log.scrollTop = log.scrollHeight;
    },
    skipped: (data) => {
      // The server read on past lines this page had not taken in time: say where and how many.
      gap(`… ${data.lines} lines skipped here: this page did not keep up with the log; `, " for every line the job keeps");
      skipped += data.lines;
      count();
    },
    end: (data, source) => {
      ended = true;
      source.close();
      const missing = skipped + dropped;
      state.textContent = missing ? `the job has ended: ${missing} lines are not shown here (download the log for them)` : "the job has ended: every line is shown";
      say("");
    },
    failed: (data, source) => { ended = true; source.close(); state.textContent = data.message; },
  });
  // A stream that breaks is not reopened: the server would start again from the log's last
  // lines, repeating some and leaving out what was written meanwhile. Say where it broke.
  source.addEventListener("error", () => {
    if (ended) return;
    ended = true;
    source.close();
    gap("… the connection to the server was lost here: later lines are not shown; reload the page to follow again, or ", " for every line the job keeps");
    state.textContent = "disconnected";
    say("disconnected");
  });
}

// --- submit ----------------------------------------------------------------------------------

function submitPage() {
  const text = document.getElementById("manifest");
  const file = document.getElementById("manifest-file");
  const result = document.getElementById("submit-result");
  file.addEventListener("change", async () => {
    if (file.files.length) text.value = await file.files[0].text();
  });
  document.querySelectorAll("button[data-submit]").forEach((button) => {
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const data = await post("/api/submit", {
          manifest: text.value,
          validateOnly: button.dataset.submit === "validate",
        });
        result.innerHTML = data.html || (data.message ? "<p></p>" : "");
        if (!data.html && data.message) result.firstChild.textContent = data.message;
        if (data.created && data.url) window.location.assign(data.url);
      } finally {
        button.disabled = false;
      }
    });
  });
}

const PAGES = { jobs: jobsPage, job: jobPage, logs: logsPage, submit: submitPage };
document.addEventListener("DOMContentLoaded", () => {
  tick();
  setInterval(() => tick(), 1000);
  const page = PAGES[document.body.dataset.page];
  if (page) page();
});
