// The playground's page. Program output, file names and messages are
// always set as text (textContent, value), never parsed as HTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const code = $("code"), gutter = $("gutter"), tabs = $("tabs"), output = $("output");
  const badge = $("badge"), progress = $("progress"), diagList = $("diagnostics");
  const testsTable = $("tests"), coverage = $("coverage");
  const buttons = ["run", "test", "check", "format", "share"].map($);

  let files = [{ name: "prog.go", data: "" }];
  let active = 0;
  let markers = {}; // file name -> {line: message}
  let escaped = false; // Escape pressed: the next Tab moves focus
  let busy = false;
  let token = sessionStorage.getItem("playground-token") || "";

  // txtar: "-- name --" lines start files; text before the first is prog.go.
  function parseTxtar(text) {
    const out = [];
    let cur = null;
    for (const line of text.split(/(?<=\n)/)) {
      const m = /^-- (.+) --\r?\n?$/.exec(line);
      if (m) { cur = { name: m[1].trim(), data: "" }; out.push(cur); continue; }
      if (!cur) {
        if (line.trim() === "") continue;
        cur = { name: "prog.go", data: "" }; out.push(cur);
      }
      cur.data += line;
    }
    return out.length ? out : [{ name: "prog.go", data: "" }];
  }
  function formatTxtar(fs) {
    if (fs.length === 1 && fs[0].name === "prog.go") return fs[0].data;
    return fs.map((f) => "-- " + f.name + " --\n" + f.data + (f.data && !f.data.endsWith("\n") ? "\n" : "")).join("");
  }
  function text() { files[active].data = code.value; return formatTxtar(files); }

  function load(txt) {
    files = parseTxtar(txt);
    active = 0;
    markers = {};
    showFile(0, true);
  }

  function renderTabs() {
    tabs.replaceChildren();
    files.forEach((f, i) => {
      const wrap = document.createElement("span");
      wrap.className = "tab";
      const b = document.createElement("button");
      b.type = "button";
      b.setAttribute("role", "tab");
      b.setAttribute("aria-selected", String(i === active));
      b.setAttribute("aria-controls", "code");
      b.tabIndex = i === active ? 0 : -1;
      b.textContent = f.name + (markers[f.name] ? " •" : "");
      b.dataset.file = f.name;
      b.addEventListener("click", () => showFile(i));
      b.addEventListener("keydown", (e) => {
        if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
          const n = (i + (e.key === "ArrowRight" ? 1 : files.length - 1)) % files.length;
          showFile(n);
          tabs.querySelectorAll("[role=tab]")[n].focus();
        }
      });
      wrap.append(b);
      if (files.length > 1) {
        const x = document.createElement("button");
        x.type = "button";
        x.className = "close";
        x.textContent = "×";
        x.setAttribute("aria-label", "Remove " + f.name);
        x.addEventListener("click", () => {
          files[active].data = code.value;
          files.splice(i, 1);
          showFile(Math.min(active, files.length - 1), true);
        });
        wrap.append(x);
      }
      tabs.append(wrap);
    });
  }

  function showFile(i, skipSave) {
    if (!skipSave && files[active]) files[active].data = code.value;
    active = i;
    code.value = files[i].data;
    renderTabs();
    renderGutter();
  }

  function renderGutter() {
    const n = code.value.split("\n").length;
    const marks = markers[files[active].name] || {};
    gutter.replaceChildren();
    for (let l = 1; l <= n; l++) {
      const d = document.createElement("div");
      d.textContent = String(l);
      if (marks[l]) {
        d.className = "marked";
        d.title = marks[l];
        d.dataset.line = String(l);
        d.addEventListener("click", () => jump(files[active].name, l));
      }
      gutter.append(d);
    }
    gutter.scrollTop = code.scrollTop;
  }

  function jump(name, line, col) {
    const i = files.findIndex((f) => f.name === name);
    if (i < 0) return;
    if (i !== active) showFile(i);
    const lines = code.value.split("\n");
    let pos = 0;
    for (let l = 1; l < line && l <= lines.length; l++) pos += lines[l - 1].length + 1;
    pos += Math.max(0, (col || 1) - 1);
    code.focus();
    code.setSelectionRange(pos, pos);
    code.scrollTop = Math.max(0, (line - 5) * 20);
    gutter.scrollTop = code.scrollTop;
  }

  function clearResults() {
    output.replaceChildren();
    diagList.replaceChildren();
    coverage.replaceChildren();
    testsTable.hidden = true;
    testsTable.tBodies[0].replaceChildren();
    badge.textContent = "";
    badge.className = "badge";
    progress.textContent = "";
    markers = {};
    renderTabs();
    renderGutter();
  }

  function append(kind, s) {
    const span = document.createElement("span");
    if (kind === "stderr") span.className = "stderr";
    if (kind === "note") span.className = "note";
    span.textContent = s;
    output.append(span);
    output.scrollTop = output.scrollHeight;
  }

  function headers() {
    const h = { "Content-Type": "application/json" };
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  async function failed(res) {
    if (res.status === 401) { $("auth").hidden = false; $("token").focus(); }
    const msg = (await res.text()).trim();
    return res.status + " " + res.statusText + (msg ? ": " + msg : "");
  }

  // call posts an action and handles its NDJSON events as they arrive.
  async function call(action) {
    if (busy) return;
    busy = true;
    buttons.forEach((b) => (b.disabled = true));
    clearResults();
    badge.textContent = action + "…";
    badge.className = "badge running";
    const started = performance.now();
    document.body.dataset.state = "running";
    try {
      const body = { files: text(), version: $("version").value };
      if (action === "run") body.stdin = $("stdin").value;
      if (action === "test") { body.race = $("race").checked; body.cover = $("cover").checked; }
      const res = await fetch("/api/" + action, { method: "POST", headers: headers(), body: JSON.stringify(body) });
      if (!res.ok) { showError(await failed(res), started); return; }
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (value) buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line) handle(JSON.parse(line), started);
        }
        if (done) break;
      }
    } catch (e) {
      showError(String(e), started);
    } finally {
      busy = false;
      buttons.forEach((b) => (b.disabled = false));
      document.body.dataset.state = "idle";
    }
  }

  function showError(msg, started) {
    append("stderr", msg + "\n");
    setBadge("error", started);
  }

  function setBadge(outcome, started, ms) {
    const took = ms !== undefined ? ms : Math.round(performance.now() - started);
    badge.textContent = outcome + " · " + (took >= 1000 ? (took / 1000).toFixed(2) + " s" : took + " ms");
    badge.className = "badge " + (outcome === "ok" ? "ok" : "bad");
    badge.dataset.outcome = outcome;
  }

  function handle(ev, started) {
    switch (ev.kind) {
      case "status": progress.textContent = ev.text; break;
      case "stdout": case "stderr": progress.textContent = ""; append(ev.kind, ev.text); break;
      case "error": progress.textContent = ""; showError(ev.text, started); break;
      case "done": done(ev, started); break;
    }
  }

  function done(ev, started) {
    progress.textContent = "";
    setBadge(ev.outcome, started, ev.duration_ms);
    if (ev.files) {
      const keep = files[active].name;
      load(ev.files);
      const i = files.findIndex((f) => f.name === keep);
      if (i > 0) showFile(i, true);
    }
    for (const d of ev.diagnostics || []) {
      if (d.file && d.line) {
        (markers[d.file] = markers[d.file] || {})[d.line] = d.message;
      }
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = (d.file ? d.file + ":" + d.line + (d.column ? ":" + d.column : "") + ": " : "") + d.message;
      b.addEventListener("click", () => jump(d.file, d.line, d.column));
      li.append(b);
      diagList.append(li);
    }
    if (ev.tests && ev.tests.length) showTests(ev.tests);
    for (const c of ev.coverage || []) {
      const li = document.createElement("li");
      li.textContent = c.package + ": " + (c.no_statements ? "no statements" : c.percent.toFixed(1) + "% of statements");
      coverage.append(li);
    }
    renderTabs();
    renderGutter();
  }

  function showTests(tests) {
    const tb = testsTable.tBodies[0];
    for (const t of tests) {
      const tr = document.createElement("tr");
      const name = document.createElement("td");
      name.textContent = t.name;
      const st = document.createElement("td");
      st.textContent = t.status;
      st.className = t.status;
      const time = document.createElement("td");
      time.textContent = (t.elapsed_ms / 1000).toFixed(2) + " s";
      tr.append(name, st, time);
      tr.dataset.status = t.status;
      tb.append(tr);
      if (t.output) {
        const more = document.createElement("tr");
        const td = document.createElement("td");
        td.colSpan = 3;
        const pre = document.createElement("pre");
        pre.textContent = t.output;
        td.append(pre);
        more.append(td);
        more.className = "testoutput";
        more.hidden = t.status !== "fail";
        const toggle = document.createElement("button");
        toggle.type = "button";
        toggle.textContent = "output";
        toggle.setAttribute("aria-expanded", String(!more.hidden));
        toggle.addEventListener("click", () => {
          more.hidden = !more.hidden;
          toggle.setAttribute("aria-expanded", String(!more.hidden));
        });
        name.append(toggle);
        tb.append(more);
      }
    }
    testsTable.hidden = false;
  }

  async function share() {
    const res = await fetch("/api/share", { method: "POST", headers: headers(), body: text() });
    if (!res.ok) { clearResults(); showError(await failed(res), performance.now()); return; }
    const j = await res.json();
    const url = new URL(j.url, location.href).href;
    $("sharelink").hidden = false;
    $("shareurl").value = url;
    $("shareurl").focus();
    $("shareurl").select();
    history.replaceState(null, "", j.url);
  }

  // loadExample replaces the editor's files with an example's; the body's
  // data-example names the example loaded last.
  async function loadExample(name) {
    document.body.dataset.example = "";
    const res = await fetch("/static/examples/" + encodeURIComponent(name) + ".txtar");
    if (res.ok) { load(await res.text()); clearResults(); document.body.dataset.example = name; }
  }

  async function versions() {
    const sel = $("version");
    try {
      const res = await fetch("/api/versions", { method: "POST", headers: headers(), body: "{}" });
      if (!res.ok) { progress.textContent = await failed(res); return; }
      const j = await res.json();
      sel.replaceChildren();
      const own = document.createElement("option");
      own.value = "";
      own.textContent = j.current ? j.current.replace(/^go/, "") : "default";
      sel.append(own);
      for (const v of j.others || []) {
        const o = document.createElement("option");
        o.value = v;
        o.textContent = v.replace(/^go/, "");
        sel.append(o);
      }
      const want = new URLSearchParams(location.search).get("v");
      if (want) for (const o of sel.options) if (o.textContent === want.replace(/^go/, "")) sel.value = o.value;
    } catch (e) {
      progress.textContent = String(e);
    }
  }

  code.addEventListener("input", renderGutter);
  code.addEventListener("scroll", () => { gutter.scrollTop = code.scrollTop; });
  code.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { escaped = true; return; }
    if (e.key === "Tab" && !escaped && !e.shiftKey && !e.ctrlKey && !e.altKey && !e.metaKey) {
      e.preventDefault();
      const s = code.selectionStart;
      code.setRangeText("\t", s, code.selectionEnd, "end");
      renderGutter();
    }
    escaped = false;
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.shiftKey && !e.ctrlKey && !e.metaKey) { e.preventDefault(); call("run"); }
    else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); call("format"); }
    else if ((e.key === "s" || e.key === "S") && (e.ctrlKey || e.metaKey)) { e.preventDefault(); share(); }
  });
  $("run").addEventListener("click", () => call("run"));
  $("test").addEventListener("click", () => call("test"));
  $("check").addEventListener("click", () => call("check"));
  $("format").addEventListener("click", () => call("format"));
  $("share").addEventListener("click", share);
  $("examples").addEventListener("change", (e) => { if (e.target.value) loadExample(e.target.value); });
  $("addfile").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("newname").value.trim();
    if (!name || files.some((f) => f.name === name)) return;
    files[active].data = code.value;
    files.push({ name, data: name.endsWith(".go") ? "package main\n" : "" });
    $("newname").value = "";
    showFile(files.length - 1, true);
  });
  $("auth").addEventListener("submit", (e) => {
    e.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem("playground-token", token);
    $("auth").hidden = true;
    versions();
  });

  async function start() {
    const m = /^\/p\/([A-Za-z0-9_-]+)$/.exec(location.pathname);
    if (m) {
      const res = await fetch("/api/share/" + m[1], { headers: headers() });
      if (res.ok) load(await res.text());
      else { load(""); append("stderr", await failed(res) + "\n"); }
    } else {
      const res = await fetch("/static/examples/hello.txtar");
      load(res.ok ? await res.text() : "");
    }
    await versions();
    document.body.dataset.ready = "1";
  }
  start();
})();
