// The Delta view: reads /delta/api/* (same origin, Airflow's login cookie) and draws with uPlot.
// Location hash: #<asset|connection>/<id>/<history|health|maintenance>.
"use strict";

const state = { tables: [], kind: null, id: null, tab: "history", before: null };
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function bytes(n) {
  if (n === null || n === undefined) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + units[i];
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "none";
  const days = seconds / 86400;
  if (days >= 1 && Number.isInteger(days)) return days + (days === 1 ? " day" : " days");
  const hours = seconds / 3600;
  if (hours >= 1 && Number.isInteger(hours)) return hours + (hours === 1 ? " hour" : " hours");
  return seconds + " s";
}

function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

function setting(s) {
  if (!s) return "?";
  const value = "seconds" in s ? duration(s.seconds) : s.value;
  return `${s.name} = ${value} (${s.source})`;
}

async function api(path) {
  // Airflow 3.1's UI keeps its token in local storage (and drops the _token cookie); newer ones
  // keep the cookie, which the request carries as well.
  let token = null;
  try { token = window.localStorage.getItem("token"); } catch (err) { token = null; }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const response = await fetch("api/" + path, { credentials: "same-origin", headers });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail || body);
    throw new Error(`${response.status}: ${detail}`);
  }
  return body;
}

function showMessage(text) {
  const box = $("#message");
  box.hidden = !text;
  box.textContent = text || "";
}

function tiLink(a) {
  // The task instance in Airflow's UI (the page is in an iframe of it: open at the top).
  let href = `/dags/${encodeURIComponent(a.dag_id)}/runs/${encodeURIComponent(a.run_id)}/tasks/${encodeURIComponent(a.task_id)}`;
  if (a.map_index !== null && a.map_index >= 0) href += `/mapped/${a.map_index}`;
  if (a.try_number) href += `?try_number=${a.try_number}`;
  return el("a", { href, target: "_top", class: "ti" },
    `${a.dag_id} / ${a.task_id} / ${a.run_id}` + (a.map_index >= 0 ? ` [${a.map_index}]` : "") +
    (a.try_number ? ` / try ${a.try_number}` : ""));
}

function base() { return `${state.kind === "asset" ? "assets" : "connections"}/${encodeURIComponent(state.id)}`; }

// --- history -------------------------------------------------------------------------------

// VACUUM START records what it is about to delete (sizeOfDataToDelete); only END has deleted it.
function vacuumBytesVerb(e) { return e.operation === "VACUUM START" ? "to delete" : "freed"; }

function metricsText(e) {
  const parts = [];
  if (e.rows_added !== null) parts.push(`+${e.rows_added} rows`);
  if (e.files_added !== null) parts.push(`+${plural(e.files_added, "file")}`);
  if (e.files_removed !== null) parts.push(`-${plural(e.files_removed, "file")}`);
  if (e.bytes_removed !== null && e.operation.startsWith("VACUUM")) parts.push(`${bytes(e.bytes_removed)} ${vacuumBytesVerb(e)}`);
  if (e.operation === "RESTORE") parts.push("to " + ("version" in e.parameters ? `v${e.parameters.version}` : e.parameters.timestamp));
  return parts.join(", ");
}

// "Restore to before this run": asked of the API on click (it reads the run's commits).
function restoreTarget(t) {
  const out = el("span", { class: "note" });
  const button = el("button", { class: "restore-target" }, "restore target");
  button.onclick = async () => {
    button.disabled = true;
    try {
      const r = await api(`${base()}/restore-target?dag_id=${encodeURIComponent(t.dag_id)}&run_id=${encodeURIComponent(t.run_id)}`);
      out.textContent = ` before this run: v${r.version_before} (its first commit is v${r.first_version}) — ` +
        `DeltaRestoreOperator(table_uri=${JSON.stringify(r.table)}, before_run_id=${JSON.stringify(r.run_id)}, before_dag_id=${JSON.stringify(r.dag_id)})`;
    } catch (err) { out.textContent = " " + err.message; }
  };
  return el("div", {}, button, out);
}

function commitItem(e, checkpoints) {
  const kind = e.kind;
  const label = kind === "retry" ? (e.rerun_of !== undefined ? `re-run (replaces v${e.rerun_of})` : `try ${e.airflow.try_number}`) : kind;
  return el("li", { class: `kind-${kind}`, "data-version": e.version, "data-kind": kind },
    el("span", { class: "version" }, `v${e.version}`),
    el("span", { class: "time" }, e.timestamp),
    el("span", { class: `badge ${kind}` }, label),
    checkpoints.has(e.version) ? el("span", { class: "badge checkpoint" }, "checkpoint") : null,
    el("b", {}, e.operation),
    el("span", { class: "metrics" }, metricsText(e)),
    e.airflow ? el("div", {}, "by ", tiLink(e.airflow), partitionKey(e.airflow)) : el("div", { class: "note" }, e.engine ? `by ${e.engine}` : "outside Airflow"),
    partitionsLine(e),
    e.restore_target ? restoreTarget(e.restore_target) : null,
  );
}

// The Airflow asset partition key of the run that wrote a commit, when it had one.
function partitionKey(a) {
  return a.partition_key ? el("span", { class: "badge partition-key", title: "the run's partition key" }, `partition ${a.partition_key}`) : null;
}

// The partitions whose data a commit changed (read from its file actions).
function partitionsLine(e) {
  if (!("partitions" in e)) return null;
  if (e.partitions === null) return el("div", { class: "note partitions" }, "partitions: not listed (a large commit)");
  if (!e.partitions.length) return null;
  const shown = e.partitions.map((p) => Object.entries(p).map(([k, v]) => `${k}=${v === null ? "null" : v}`).join("/"));
  const more = e.partitions_count > shown.length ? ` (+${e.partitions_count - shown.length} more)` : "";
  return el("div", { class: "partitions" }, `partitions: ${shown.join(", ")}${more}`);
}

function skipItem(s) {
  return el("li", { class: "kind-skip", "data-kind": "skip" },
    el("span", { class: "time" }, s.timestamp),
    el("span", { class: "badge skip" }, "skipped"),
    `nothing committed: version ${s.version} already holds this run's commit` + (s.operation ? ` (${s.operation})` : ""),
    el("div", {}, "by ", tiLink(s.airflow)),
  );
}

function barsChart(target, title, labels, series) {
  if (!window.uPlot || !labels.length) return;
  const xs = labels.map((_, i) => i);
  const opts = {
    title, width: Math.min(900, Math.max(360, window.innerWidth - 60)), height: 200,
    scales: { x: { time: false, range: [-0.6, xs.length - 0.4] } },
    axes: [{ values: (u, splits) => splits.map((i) => labels[i] ?? "") }, {}],
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, fill: s.color + "99", paths: uPlot.paths.bars({ size: [0.7, 60] }) }))],
    legend: { show: true },
  };
  new uPlot(opts, [xs, ...series.map((s) => s.values)], target);
}

async function showHistory(content) {
  const page = await api(`${base()}/history?limit=20` + (state.before !== null ? `&before=${state.before}` : ""));
  const checkpoints = new Set(page.checkpoints);
  const entries = page.entries;
  const newest = entries.length ? entries[0].version : -1;
  const oldest = entries.length ? entries[entries.length - 1].version : -1;
  const skips = page.skips.filter((s) => s.version >= oldest && s.version <= newest);
  content.append(el("h2", {}, `History of ${page.table}: versions ${oldest}–${newest} of ${page.earliest_version}–${page.latest_version}`));
  const chart = el("div", { class: "chart", id: "history-chart" });
  content.append(chart);
  const ordered = [...entries].reverse();
  barsChart(chart, "Rows and files added per version", ordered.map((e) => "v" + e.version), [
    { label: "rows added", color: "#0969da", values: ordered.map((e) => e.rows_added || 0) },
    { label: "files removed", color: "#cf222e", values: ordered.map((e) => e.files_removed || 0) },
  ]);
  // Commits and skips on one timeline, newest first.
  const items = [
    ...entries.map((e) => ({ at: e.timestamp, node: commitItem(e, checkpoints), order: e.version })),
    ...skips.map((s) => ({ at: s.timestamp, node: skipItem(s), order: s.version + 0.5 })),
  ].sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : b.order - a.order));
  content.append(el("ul", { class: "timeline", id: "timeline" }, items.map((i) => i.node)));
  const pager = el("p", {});
  if (state.before !== null) pager.append(el("button", { id: "newer" }, "Newest"), " ");
  if (page.next_before !== null) pager.append(el("button", { id: "older" }, "Older versions"));
  content.append(pager);
  const newer = $("#newer"), older = $("#older");
  if (newer) newer.onclick = () => { state.before = null; render(); };
  if (older) older.onclick = () => { state.before = page.next_before; render(); };
}

// --- health --------------------------------------------------------------------------------

function card(label, value, id, wide) {
  return el("div", { class: "card" + (wide ? " wide" : ""), id }, el("div", { class: "value" }, value), el("div", { class: "label" }, label));
}

async function showHealth(content) {
  const h = await api(`${base()}/health`);
  const target = h.target_file_size;
  content.append(el("h2", {}, `Health of ${h.table} at version ${h.version}`));
  content.append(el("div", { class: "cards" },
    card("active files", h.active_files, "active-files"),
    card("active bytes", bytes(h.active_bytes), "active-bytes"),
    card(`small files (< ${bytes(target.value)}, ${target.name}: ${target.source})`, `${h.small_files} (${bytes(h.small_bytes)})`, "small-files"),
    card(`partitions (${h.partition_columns.join(", ") || "not partitioned"})`, h.partitions, "partitions"),
    card(`commits since the last checkpoint (${h.last_checkpoint_version === null ? "none yet" : "v" + h.last_checkpoint_version})`, h.commits_since_checkpoint, "log-length"),
    card(`versions retained (from v${h.earliest_version})`, h.versions_retained, "versions-retained"),
    card("log size", bytes(h.log_bytes), "log-bytes"),
  ));
  if (h.consumers.length) {
    content.append(el("h2", {}, "Consumer cursors"), el("table", { class: "grid", id: "consumers" },
      el("tr", {}, el("th", {}, "consumer"), el("th", {}, "partition"), el("th", {}, "source table id"), el("th", {}, "consumed up to version"), el("th", {}, "last moved")),
      h.consumers.map((c) => el("tr", {}, el("td", {}, c.consumer), el("td", {}, c.partition === null ? "all" : c.partition), el("td", {}, c.source_table_id), el("td", {}, c.version), el("td", {}, c.last_updated || "?")))));
  }
  const chart = el("div", { class: "chart", id: "size-chart" });
  content.append(el("h2", {}, "File sizes"), chart);
  barsChart(chart, `Files per size (target ${bytes(target.value)})`, h.histogram.map((b) => "<" + bytes(b.to)), [
    { label: "files", color: "#0969da", values: h.histogram.map((b) => b.files) },
  ]);
  const dry = el("div", { class: "cards", id: "vacuum-dry-run" });
  const button = el("button", { id: "dry-run" }, "What would VACUUM free? (dry run)");
  content.append(el("h2", {}, "VACUUM"), button, dry);
  button.onclick = async () => {
    button.disabled = true;
    dry.replaceChildren(el("span", { class: "note" }, "listing the table…"));
    try {
      const v = await api(`${base()}/vacuum-dry-run`);
      dry.replaceChildren(
        card("files VACUUM would delete (dry run)", v.num_files, "dry-files"),
        card("bytes it would free", bytes(v.num_bytes), "dry-bytes"),
        card("retention", `${duration(v.retention.seconds)} (${v.retention.source})`, "dry-retention"),
        card("files older than", v.delete_before, "dry-before", true),
      );
      if (v.files.length) dry.append(el("div", { class: "card wide" }, el("div", { class: "label" }, "files"), el("pre", {}, v.files.join("\n") + (v.more_files ? `\n… and ${v.more_files} more` : ""))));
    } catch (err) { dry.replaceChildren(el("div", { class: "refused" }, String(err.message))); }
    button.disabled = false;
  };
  const p = h.protocol;
  content.append(el("h2", {}, `Protocol: reader ${p.min_reader_version}, writer ${p.min_writer_version}`));
  const ops = h.features.length ? Object.keys(h.features[0].operations) : []; // the registry's operations, in order
  const rows = h.features.map((f) => el("tr", {},
    el("td", {}, f.name), el("td", {}, f.reader ? "reader + writer" : "writer"), el("td", {}, f.in_use ? "yes" : "no"),
    ops.map((op) => el("td", { class: f.operations[op] === "supported" ? "" : "refused" }, f.operations[op]))));
  content.append(h.features.length
    ? el("table", { class: "grid", id: "features" }, el("tr", {}, el("th", {}, "feature"), el("th", {}, "kind"), el("th", {}, "in use"), ops.map((o) => el("th", {}, o))), rows)
    : el("p", { id: "features" }, "No table features: the legacy protocol versions alone."));
}

// --- maintenance ---------------------------------------------------------------------------

function due(d) { return el("span", { class: d.due ? "due" : "notdue" }, d.due ? "due now" : "not due"); }

async function showMaintenance(content) {
  const m = await api(`${base()}/maintenance`);
  const c = m.checkpoint, l = m.cleanup, v = m.vacuum;
  content.append(el("h2", {}, `Maintenance of ${m.table} at version ${m.version}`));
  content.append(el("div", { class: "cards" },
    el("div", { class: "card wide", id: "maint-checkpoint" },
      el("div", { class: "value" }, "Checkpoint ", due(c)),
      el("div", {}, c.last ? `last: version ${c.last.version} (${c.last.kind}, ${plural(c.last.parts, "part")}) written ${c.last.timestamp}` : "no checkpoint yet"),
      el("div", {}, c.reason),
      el("div", {}, `next due at version ${c.next_due_at_version}; ${setting(c.interval)}`)),
    el("div", { class: "card wide", id: "maint-cleanup" },
      // Cleanup runs after a checkpoint when the table allows it: "enabled", not "due".
      el("div", { class: "value" }, "Log cleanup ", el("span", { class: l.due ? "notdue" : "due" }, l.due ? "enabled" : "disabled")),
      el("div", {}, l.cleaned_up ? `expired log files were removed: the log starts at version ${l.earliest_retained_version}` : `nothing cleaned up yet: the log starts at version ${l.earliest_retained_version}`),
      el("div", {}, `${l.reason}; ${setting(l.enabled)}`),
      el("div", {}, `retention: ${setting(l.retention)}`),
      el("div", {}, l.next_due ? `the oldest commit (${l.oldest_commit_time}) expires ${l.next_due}` + (l.checkpoint_needed ? "; cleanup then needs a newer checkpoint" : "") : "")),
    el("div", { class: "card wide", id: "maint-vacuum" },
      el("div", { class: "value" }, "VACUUM ", due(v)),
      el("div", {}, v.reason),
      el("div", {}, `interval ${duration(v.interval_seconds)}` + (v.next_due ? `; next due ${v.next_due}` : "")),
      el("div", {}, `retention: ${setting(v.retention)}`),
      el("div", {}, v.last_vacuum_info_version !== null ? `_last_vacuum_info: files of versions up to ${v.last_vacuum_info_version} were vacuumed` : "no _last_vacuum_info")),
  ));
  content.append(el("h2", {}, "Data retention and PURGE"), retentionCard(m.data_retention));
  content.append(el("h2", {}, `VACUUMs in the last ${v.lookback_commits} commits`));
  content.append(v.recent.length
    ? el("ul", { class: "timeline", id: "vacuums" }, v.recent.map((e) => el("li", { class: "kind-maintenance", "data-version": e.version },
        el("span", { class: "version" }, `v${e.version}`), el("span", { class: "time" }, e.timestamp), el("b", {}, e.operation),
        el("span", { class: "metrics" }, [
          e.parameters.status ? `status ${e.parameters.status}` : null,
          e.files_removed !== null ? `${plural(e.files_removed, "file")} deleted` : null,
          e.bytes_removed !== null ? `${bytes(e.bytes_removed)} ${vacuumBytesVerb(e)}` : null,
          e.parameters.specifiedRetentionMillis ? `retention ${duration(Number(e.parameters.specifiedRetentionMillis) / 1000)}` : null,
          e.parameters.defaultRetentionMillis ? `table default ${duration(Number(e.parameters.defaultRetentionMillis) / 1000)}` : null,
        ].filter(Boolean).join(", ")),
        e.airflow ? el("div", {}, "by ", tiLink(e.airflow)) : null)))
    : el("p", { id: "vacuums" }, "none"));
}

function removedLine(what, e) {
  return el("div", {}, `${what} at version ${e.version} (${e.timestamp}): `, [
    e.files_removed !== null ? `${plural(e.files_removed, "file")} removed` : null,
    e.bytes_removed !== null ? bytes(e.bytes_removed) : null,
  ].filter(Boolean).join(", "), e.airflow ? [" by ", tiLink(e.airflow)] : null);
}

function retentionCard(r) {
  const p = r.policy, run = r.last_run, purge = r.last_purge;
  return el("div", { class: "cards" },
    el("div", { class: "card wide", id: "maint-retention" },
      el("div", { class: "value" }, "Data retention"),
      r.error ? el("div", { class: "refused" }, r.error)
        : p ? el("div", {}, `keep ${p.keep} of ${p.column} (at most ${Math.round(p.max_deleted_fraction * 100)}% of the rows per run), from ${r.property}`)
        : el("div", {}, `no policy: set the table property ${r.property}, or data_retention on DeltaMaintenanceOperator`),
      run ? [removedLine("last run", run),
        el("div", {}, `${run.deleted_rows === null ? "an unknown number of" : run.deleted_rows} row(s) older than ${run.cutoff} deleted (${run.parameters.predicate || ""})`)]
        : el("div", {}, `no retention run in the last ${r.lookback_commits} commits`)),
    el("div", { class: "card wide", id: "maint-purge" },
      el("div", { class: "value" }, "PURGE"),
      purge ? [removedLine("last purge", purge), el("div", {}, `${plural(purge.deletion_vectors_removed ?? 0, "deletion vector")} purged: the deleted rows are in no live file`)]
        : el("div", {}, `no purge in the last ${r.lookback_commits} commits`)));
}

// --- navigation ----------------------------------------------------------------------------

async function render() {
  const content = $("#content");
  content.replaceChildren();
  content.removeAttribute("data-loaded");
  showMessage("");
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === state.tab);
  if (!state.id) { content.append(el("p", {}, "No Delta table is known yet: they appear after the provider's first commit, or as delta connections.")); return; }
  try {
    await { history: showHistory, health: showHealth, maintenance: showMaintenance }[state.tab](content);
  } catch (err) {
    showMessage(String(err.message || err));
  }
  content.setAttribute("data-loaded", state.tab);
}

function fromHash() {
  const [kind, id, tab] = location.hash.replace(/^#/, "").split("/").map(decodeURIComponent);
  if (kind && id) { state.kind = kind; state.id = id; }
  if (tab) state.tab = tab;
}

function toHash() { history.replaceState(null, "", `#${state.kind}/${encodeURIComponent(state.id)}/${state.tab}`); }

async function start() {
  fromHash();
  try {
    state.tables = (await api("tables")).tables;
  } catch (err) { showMessage(String(err.message || err)); return; }
  const select = $("#table");
  for (const t of state.tables) select.append(el("option", { value: `${t.kind}/${t.id}` }, `${t.kind === "asset" ? "asset" : "connection"} ${t.name}` + (t.uri && t.uri !== t.name ? ` (${t.uri})` : "")));
  if (!state.id && state.tables.length) { state.kind = state.tables[0].kind; state.id = state.tables[0].id; }
  if (state.id) select.value = `${state.kind}/${state.id}`;
  select.onchange = () => { [state.kind, state.id] = select.value.split(/\/(.*)/s); state.before = null; toHash(); render(); };
  for (const a of document.querySelectorAll("#tabs a")) a.onclick = (ev) => { ev.preventDefault(); state.tab = a.dataset.tab; toHash(); render(); };
  if (state.id) toHash();
  // Links and tests may point the page at another table or tab.
  window.addEventListener("hashchange", () => {
    fromHash();
    state.before = null;
    if (state.id) select.value = `${state.kind}/${state.id}`;
    render();
  });
  render();
}

start();
