// isorag evidence explorer: the answer with its evidence, each matched subgraph drawn beside the pattern node for
// node (SVG), the per-stage timing bar, entity search and a neighbourhood browser (sigma.js on WebGL, paged: no
// node cap), claims and verification jobs. Talks only to the /v1 API of the server it came from. Text from the
// KG is always set as text (textContent, SVG text nodes), never parsed as HTML.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const PAGE = 500;
  const state = { key: sessionStorage.getItem("isorag-key") || "", kg: null, drawn: [], big: null };

  // -- talking to the API ------------------------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, problem) {
      super(problem.detail || problem.title || `HTTP ${status}`);
      this.status = status; this.problem = problem;
    }
  }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (state.key) h["Authorization"] = "Bearer " + state.key;
    return h;
  }

  async function api(path, opts) {
    opts = opts || {};
    const init = { method: opts.method || "GET", headers: headers(opts.headers) };
    if (opts.json !== undefined) { init.body = JSON.stringify(opts.json); init.headers["Content-Type"] = "application/json"; }
    else if (opts.body !== undefined) init.body = opts.body;
    const res = await fetch(path, init);
    if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => ({ detail: res.statusText })));
    return opts.raw ? res : res.json();
  }

  function kgPath(rest) { return `/v1/kgs/${encodeURIComponent(state.kg)}${rest}`; }

  function message(text, kind) {
    const box = $("message");
    box.hidden = !text; box.textContent = text || ""; box.className = kind || "";
  }

  function fail(e) {
    if (e instanceof ApiError && e.status === 401) {
      message(`The API key was refused (401): ${e.message}. Enter a valid key above.`);
    } else if (e instanceof ApiError) {
      const where = e.problem.where ? ` [${e.problem.where}]` : "";
      message(`${e.problem.error_type || "Error"} (${e.status})${where}: ${e.message}`);
    } else {
      message(String(e && e.message || e));
    }
  }

  function el(tag, attrs, text) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // -- key, KGs, stats -------------------------------------------------------------------------------------
  async function start() {
    message("");
    try {
      const who = await api("/v1/whoami");
      const list = (await api("/v1/kgs")).kgs;
      const sel = $("kg");
      sel.replaceChildren(...list.map((k) => el("option", { value: k.kg }, k.kg)));
      const want = new URLSearchParams(location.hash.slice(1)).get("kg") || sessionStorage.getItem("isorag-kg");
      if (want && list.some((k) => k.kg === want)) sel.value = want;
      state.kg = sel.value || null;
      if (!state.kg) { message(`Key ${who.id} may read no KG that exists yet.`, "info"); return; }
      await info();
    } catch (e) { fail(e); }
  }

  async function info() {
    sessionStorage.setItem("isorag-kg", state.kg);
    const st = await api(kgPath("/stats"));
    const v = st.version || {};
    $("kg-info").textContent = `version ${v.seq}${v.at ? " (" + v.at + ")" : ""} · ${st.neo4j.entities.toLocaleString()} ` +
      `entities · ${st.neo4j.triples.toLocaleString()} triples · ${st.neo4j.relations} relations · ` +
      (st.agree ? "stores agree" : "STORES DISAGREE");
    $("stats").textContent = JSON.stringify(st, null, 2);
  }

  // -- the timing bar --------------------------------------------------------------------------------------
  const COLORS = ["#2f5fd0", "#d0662f", "#1f7a3a", "#8a3ab9", "#b3261e", "#00838f", "#7a5b00", "#5b6475"];
  const PARENTS = new Set(["total", "retrieve", "scoring"]);

  function timingBar(box, timings) {
    box.replaceChildren();
    const total = timings.total || 0;
    if (!total) return;
    const leaves = Object.entries(timings).filter(([k, v]) => !PARENTS.has(k) && typeof v === "number" && v > 0);
    const sum = leaves.reduce((a, [, v]) => a + v, 0);
    if (total > sum) leaves.push(["other", total - sum]);
    leaves.forEach(([k, ms], i) => {
      const s = el("span", { title: `${k} ${ms.toFixed(1)} ms`, "data-stage": k });
      s.style.width = `${(100 * ms) / Math.max(total, sum)}%`;
      s.style.background = COLORS[i % COLORS.length];
      s.textContent = ms / total > 0.08 ? `${k} ${ms.toFixed(0)}` : "";
      box.appendChild(s);
    });
    box.title = `total ${total.toFixed(1)} ms`;
  }

  // -- pattern and subgraph, node for node ------------------------------------------------------------------
  const isUnknown = (t) => /(^|\s)UNKNOWN(\s|$)/.test(t);

  function layout(nodes, triples) {
    // a path is drawn on a line (in walk order), anything else on a circle
    const deg = {}; nodes.forEach((n) => (deg[n] = 0));
    triples.forEach(([h, , t]) => { deg[h]++; deg[t]++; });
    const pos = {};
    const ends = nodes.filter((n) => deg[n] === 1);
    const isPath = nodes.length > 1 && triples.length === nodes.length - 1 && nodes.every((n) => deg[n] <= 2) && ends.length === 2;
    if (isPath) {
      const order = [ends[0]]; const seen = new Set(order);
      while (order.length < nodes.length) {
        const last = order[order.length - 1];
        const next = triples.map(([h, , t]) => (h === last ? t : t === last ? h : null)).find((x) => x && !seen.has(x));
        if (!next) break;
        order.push(next); seen.add(next);
      }
      order.forEach((n, i) => (pos[n] = { x: 60 + (i * 380) / Math.max(1, order.length - 1), y: 115 + (i % 2 ? 35 : -35) * (order.length > 2 ? 1 : 0) }));
    } else {
      nodes.forEach((n, i) => {
        const a = (2 * Math.PI * i) / nodes.length - Math.PI / 2;
        pos[n] = nodes.length === 1 ? { x: 250, y: 115 } : { x: 250 + 170 * Math.cos(a), y: 115 + 80 * Math.sin(a) };
      });
    }
    return pos;
  }

  function svgEl(tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // draws nodes {id, label, sub, cls, eid} and edges {from, to, label, sub} at pos; returns the svg
  function drawSmall(nodes, edges, pos, onClick) {
    const svg = svgEl("svg", { class: "small-graph", viewBox: "0 0 500 230", role: "img" });
    const defs = svgEl("defs");
    const marker = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "19", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
    marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8a93a6" }));
    defs.appendChild(marker); svg.appendChild(defs);
    for (const e of edges) {
      const a = pos[e.from], b = pos[e.to];
      const g = svgEl("g", { class: "e", "data-relation": e.label });
      g.appendChild(svgEl("line", { class: "edge", x1: a.x, y1: a.y, x2: b.x, y2: b.y, "marker-end": "url(#arrow)" }));
      const mx = (a.x + b.x) / 2, my = (a.y + b.y) / 2 - 6;
      g.appendChild(svgEl("text", { x: mx, y: my, "text-anchor": "middle" }, e.label));
      if (e.sub) g.appendChild(svgEl("text", { class: "dist", x: mx, y: my + 14, "text-anchor": "middle" }, e.sub));
      svg.appendChild(g);
    }
    for (const n of nodes) {
      const p = pos[n.id];
      const g = svgEl("g", { class: "n", "data-node": n.id });
      if (n.eid !== undefined) g.setAttribute("data-eid", String(n.eid));
      g.appendChild(svgEl("circle", { class: `node ${n.cls}`, cx: p.x, cy: p.y, r: 9 }));
      g.appendChild(svgEl("text", { x: p.x, y: p.y - 14, "text-anchor": "middle" }, n.label));
      if (n.sub) g.appendChild(svgEl("text", { class: "dist", x: p.x, y: p.y + 23, "text-anchor": "middle" }, n.sub));
      if (onClick && n.eid !== undefined) g.addEventListener("click", () => onClick(n));
      svg.appendChild(g);
    }
    return svg;
  }

  function drawPairs(box, pattern, subgraphs, answers) {
    box.replaceChildren();
    state.drawn = state.drawn.filter((d) => d.box !== box);
    if (!pattern) return;
    const triples = pattern.triples;
    const nodes = [...new Set(triples.flatMap(([h, , t]) => [h, t]))];
    const pos = layout(nodes, triples);
    const answerIds = new Set((answers || []).map((a) => a.eid));
    const patNodes = nodes.map((n) => ({ id: n, label: n, cls: isUnknown(n) ? "unknown" : "known" }));
    const patEdges = triples.map(([h, r, t]) => ({ from: h, to: t, label: r }));
    if (!subgraphs.length) {
      const pair = el("div", { class: "pair" });
      pair.appendChild(el("h3", {}, "pattern: no subgraph of the KG matches it"));
      const fig = el("figure"); fig.appendChild(drawSmall(patNodes, patEdges, pos)); pair.appendChild(fig);
      box.appendChild(pair);
      return;
    }
    subgraphs.forEach((sg, i) => {
      const pair = el("div", { class: "pair", "data-index": String(i) });
      pair.appendChild(el("h3", {}, `graph [${i + 1}] · GSD ${sg.gsd.toFixed(4)}`));
      const left = el("figure"); left.appendChild(drawSmall(patNodes, patEdges, pos));
      left.appendChild(el("figcaption", {}, "pattern"));
      const byEid = {};
      const sgNodes = nodes.map((n) => {
        const ent = sg.mapping[n];
        if (ent) byEid[ent.eid] = n;
        const d = (sg.node_distances || {})[n];
        const cls = (isUnknown(n) ? "unknown" : "known") + (ent && answerIds.has(ent.eid) && isUnknown(n) ? " answer" : "");
        return { id: n, label: ent ? ent.name : "?", sub: d === undefined ? "" : `d ${d.toFixed(3)}`, cls, eid: ent && ent.eid };
      });
      const sgEdges = sg.triples.map((t) => {
        const d = (sg.edge_distances || {})[String(t.pattern_edge)];
        return { from: byEid[t.head_eid], to: byEid[t.tail_eid], label: t.relation, sub: d === undefined ? "" : `d ${d.toFixed(3)}`,
                 head: t.head, tail: t.tail };
      }).filter((e) => e.from && e.to);
      const right = el("figure");
      right.appendChild(drawSmall(sgNodes, sgEdges, pos, (n) => { showTab("explore"); browse(n.eid, true); }));
      right.appendChild(el("figcaption", {}, "matched subgraph (click a node to browse around it)"));
      pair.append(left, right);
      box.appendChild(pair);
      state.drawn.push({ box, index: i, gsd: sg.gsd, nodes: sgNodes.map((n) => ({ node: n.id, name: n.label, eid: n.eid })),
                         edges: sgEdges.map((e) => [e.head, e.label, e.tail]), pattern: triples });
    });
  }

  // -- ask (server-sent events) --------------------------------------------------------------------------------
  function parsePattern(text) {
    text = text.trim();
    if (!text) return undefined;
    try { return JSON.parse(text); } catch (e) { throw new Error(`the pattern is not JSON: ${e.message}`); }
  }

  async function* events(res) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
        let kind = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) kind = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (data) yield [kind, JSON.parse(data)];
      }
    }
  }

  async function ask(ev) {
    ev.preventDefault();
    message("");
    const body = { question: $("question").value, stream: true };
    try {
      const p = parsePattern($("ask-pattern").value);
      if (p !== undefined) body.pattern = p;
      const k = parseInt($("ask-k").value, 10);
      if (k) body.k = k;
      $("answer").hidden = false; $("answer-text").textContent = "…"; $("answer-entities").textContent = "";
      $("answer-meta").textContent = ""; $("timing").replaceChildren(); $("subgraphs").replaceChildren();
      $("evidence-box").hidden = true;
      const res = await api(kgPath("/ask"), { method: "POST", json: body, raw: true });
      let pattern = null, text = "";
      for await (const [kind, data] of events(res)) {
        if (kind === "pattern") { pattern = data.pattern; drawPairs($("subgraphs"), pattern, [], []); }
        else if (kind === "subgraphs") drawPairs($("subgraphs"), pattern, data.subgraphs, []);
        else if (kind === "token") { text += data.text; $("answer-text").textContent = text; }
        else if (kind === "error") fail(new ApiError(data.status, data));
        else if (kind === "answer") showAnswer(data.answer);
      }
    } catch (e) { $("answer").hidden = true; fail(e); }
  }

  function showAnswer(a) {
    $("answer-text").textContent = a.failed_stage ? `failed at ${a.failed_stage}` : (a.text || "(no answer)");
    $("answer-entities").textContent = a.answers.length ?
      "answer entities: " + a.answers.map((x) => `${x.name} (GSD ${x.gsd.toFixed(3)})`).join(", ") : "";
    timingBar($("timing"), a.timings);
    const meta = [`KG version ${a.kg_version}`, `pattern ${a.pattern_source || "?"}` +
      (a.pattern_probability != null ? ` (p ${a.pattern_probability.toFixed(3)})` : ""),
      `answer by ${a.answer_source || "?"}`, a.exact === false ? "search cut short: not exact" : "exact top-k",
      `total ${(a.timings.total || 0).toFixed(1)} ms`];
    $("answer-meta").textContent = meta.join(" · ") + (a.warnings.length ? " · " + a.warnings.join("; ") : "");
    if (a.pattern) drawPairs($("subgraphs"), a.pattern, a.subgraphs, a.answers);
    $("evidence").textContent = a.evidence || "";
    $("evidence-box").hidden = !a.evidence;
  }

  // -- the neighbourhood browser (sigma.js, WebGL); entity ids are strings (64-bit: beyond JavaScript's numbers) -------------------------------------------------------------
  function bigGraph() {
    if (state.big) return state.big;
    const graph = new graphology.MultiGraph();
    const renderer = new Sigma(graph, $("graph"), { renderEdgeLabels: false, allowInvalidContainer: true,
      labelRenderedSizeThreshold: 7, defaultEdgeColor: "#c3c9d4", defaultNodeColor: "#8a93a6" });
    renderer.on("clickNode", ({ node }) => browse(graph.getNodeAttribute(node, "eid"), false));
    state.big = { graph, renderer, pages: {}, last: null };
    return state.big;
  }

  function place(big, centre, i, total) {
    // neighbours on rings around their centre, outwards; a ring holds more the farther out it is
    const c = big.graph.getNodeAttributes(centre);
    let ring = 1, first = 0, cap = 24;
    while (i >= first + cap) { first += cap; ring++; cap = 24 * ring; }
    const a = (2 * Math.PI * (i - first)) / Math.min(cap, Math.max(1, total - first)) + ring * 0.3;
    const r = 30 * ring * (c.scale || 1);
    return { x: c.x + r * Math.cos(a), y: c.y + r * Math.sin(a) };
  }

  async function browse(eid, fresh) {
    message("");
    try {
      const big = bigGraph();
      if (fresh) { big.graph.clear(); big.pages = {}; }
      const key = String(eid);
      const page = big.pages[key] || { offset: 0, done: false };
      if (page.done) { $("graph-info").textContent = `all ${page.degree} triples of this entity are shown`; return; }
      const t0 = performance.now();
      const data = await api(kgPath(`/entities/${eid}/neighbourhood?limit=${PAGE}&offset=${page.offset}`));
      addPage(big, data);
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      big.lastDrawMs = performance.now() - t0;
      big.last = key;
      const p = big.pages[key];
      $("graph-more").hidden = p.done;
      $("graph-info").textContent = `${big.graph.order.toLocaleString()} nodes, ${big.graph.size.toLocaleString()} edges · ` +
        `${data.entity.name}: ${Math.min(p.offset, data.entity.degree).toLocaleString()} of ${data.entity.degree.toLocaleString()} triples shown`;
    } catch (e) { fail(e); }
  }

  function addPage(big, data) {
    const g = big.graph, c = data.entity, key = String(c.eid);
    if (!g.hasNode(key)) g.addNode(key, { label: c.name, eid: c.eid, x: 0, y: 0, size: 7, color: "#2f5fd0", scale: 1 });
    g.mergeNodeAttributes(key, { color: "#2f5fd0", size: 7, scale: Math.max(1, Math.sqrt(c.degree) / 4) });
    data.neighbours.forEach((n, i) => {
      const k = String(n.eid);
      if (!g.hasNode(k)) g.addNode(k, Object.assign({ label: n.name, eid: n.eid, size: 3 }, place(big, key, data.offset + i, c.degree)));
    });
    data.triples.forEach((t) => {
      const id = `${t.head_eid}|${t.relation}|${t.tail_eid}`;
      if (!g.hasEdge(id)) g.addDirectedEdgeWithKey(id, String(t.head_eid), String(t.tail_eid), { label: t.relation, size: 1 });
    });
    big.pages[key] = { offset: data.next_offset === null ? data.offset + data.triples.length : data.next_offset,
                       done: data.next_offset === null, degree: c.degree };
  }

  // -- search ------------------------------------------------------------------------------------------------
  let searchOffset = 0;
  async function search(ev, more) {
    if (ev) ev.preventDefault();
    message("");
    if (!more) { searchOffset = 0; $("search-results").replaceChildren(); }
    try {
      const q = encodeURIComponent($("search").value);
      const data = await api(kgPath(`/entities?q=${q}&limit=20&offset=${searchOffset}`));
      for (const e of data.entities) {
        const li = el("li");
        const b = el("button", { type: "button", "data-eid": String(e.eid) }, `${e.name} (${e.degree})`);
        b.addEventListener("click", () => browse(e.eid, true));
        li.appendChild(b); $("search-results").appendChild(li);
      }
      if (!data.entities.length && !more) $("search-results").appendChild(el("li", { class: "muted" }, "no entity has that in its name"));
      searchOffset = data.next_offset || 0;
      $("search-more").hidden = data.next_offset === null;
    } catch (e) { fail(e); }
  }

  // -- claims and jobs -------------------------------------------------------------------------------------------
  async function verify(ev) {
    ev.preventDefault();
    message("");
    try {
      const body = { claim: $("claim").value };
      const p = parsePattern($("claim-pattern").value);
      if (p !== undefined) body.pattern = p;
      const v = await api(kgPath("/verify"), { method: "POST", json: body });
      $("verdict").hidden = false;
      $("verdict-label").textContent = v.label; $("verdict-label").className = `verdict ${v.label}`;
      $("verdict-reason").textContent = v.reason;
      timingBar($("verdict-timing"), v.timings);
      $("verdict-meta").textContent = `method ${v.method} · GSD ${v.gsd == null ? "-" : v.gsd.toFixed(4)} · KG version ${v.kg_version}`;
      drawPairs($("claim-subgraphs"), v.pattern, v.subgraphs, []);
    } catch (e) { $("verdict").hidden = true; fail(e); }
  }

  async function submitJob(ev) {
    ev.preventDefault();
    message("");
    const file = $("job-file").files[0];
    if (!file) { message("choose a claims file first"); return; }
    try {
      const fmt = file.name.toLowerCase().endsWith(".csv") ? "csv" : "jsonl";
      const job = await api(kgPath(`/jobs?format=${fmt}`), { method: "POST", body: await file.text(),
                                                               headers: { "Content-Type": "application/x-ndjson" } });
      await pollJobs(job.id);
    } catch (e) { fail(e); }
  }

  async function pollJobs(watch) {
    try {
      const jobs = (await api(kgPath("/jobs"))).jobs;
      const rows = jobs.map((j) => {
        const tr = el("tr", { "data-job": j.id });
        tr.append(el("td", {}, j.id), el("td", {}, j.status + (j.error ? `: ${j.error}` : "")),
                  el("td", {}, `${j.done} / ${j.claims}`));
        const td = el("td"); const b = el("button", { type: "button" }, "verdicts");
        b.addEventListener("click", () => jobResults(j.id)); td.appendChild(b); tr.appendChild(td);
        return tr;
      });
      $("jobs").querySelector("tbody").replaceChildren(...rows);
      const active = jobs.find((j) => j.id === watch && (j.status === "queued" || j.status === "running"));
      if (active) setTimeout(() => pollJobs(watch), 800);
      else if (watch) await jobResults(watch);
    } catch (e) { fail(e); }
  }

  async function jobResults(id) {
    const res = await api(kgPath(`/jobs/${id}/results`), { raw: true });
    const lines = (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    const rows = lines.map((r) => {
      const tr = el("tr", { "data-id": r.id });
      const ev = (r.subgraphs || [])[0];
      tr.append(el("td", {}, r.id), el("td", {}, r.claim), el("td", { class: `verdict ${r.label}` }, r.failed_stage ? "FAILED" : r.label),
                el("td", {}, r.gold || ""), el("td", {}, r.gsd == null ? "" : r.gsd.toFixed(3)),
                el("td", {}, ev ? ev.triples.map((t) => `(${t.head}, ${t.relation}, ${t.tail})`).join(" ") : ""));
      return tr;
    });
    $("job-results").querySelector("tbody").replaceChildren(...rows);
    $("job-results").hidden = false;
  }

  // -- tabs and wiring ----------------------------------------------------------------------------------------
  function showTab(name) {
    document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
    document.querySelectorAll("main > section").forEach((s) => (s.hidden = s.id !== `tab-${name}`));
    if (name === "explore" && state.big) state.big.renderer.refresh();
    if (name === "claims" && state.kg) pollJobs(null);
  }

  function wire() {
    $("key").value = state.key;
    $("key-form").addEventListener("submit", (ev) => {
      ev.preventDefault(); state.key = $("key").value.trim(); sessionStorage.setItem("isorag-key", state.key); start();
    });
    $("kg").addEventListener("change", () => { state.kg = $("kg").value; info().catch(fail); });
    document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
    $("ask-form").addEventListener("submit", ask);
    $("search-form").addEventListener("submit", (ev) => search(ev, false));
    $("search-more").addEventListener("click", () => search(null, true));
    $("graph-more").addEventListener("click", () => state.big && state.big.last && browse(state.big.last, false));
    $("graph-clear").addEventListener("click", () => { if (state.big) { state.big.graph.clear(); state.big.pages = {}; } $("graph-more").hidden = true; });
    $("claim-form").addEventListener("submit", verify);
    $("job-form").addEventListener("submit", submitJob);
    start();
  }

  // what is drawn, for tests and the benchmark: the matched subgraphs and the neighbourhood graph
  window.explorer = {
    drawn: () => state.drawn.map(({ index, gsd, nodes, edges, pattern }) => ({ index, gsd, nodes, edges, pattern })),
    big: () => state.big && { nodes: state.big.graph.order, edges: state.big.graph.size, lastDrawMs: state.big.lastDrawMs,
                              names: state.big.graph.mapNodes((n, a) => a.label) },
    browse: (eid) => browse(eid, true),
    // every page of an entity's neighbourhood, drawn: {ms, nodes} (benchmarks/serve.py times this)
    browseAll: async (eid) => {
      const t0 = performance.now();
      await browse(eid, true);
      while (state.big && state.big.pages[String(eid)] && !state.big.pages[String(eid)].done) await browse(eid, false);
      return { ms: performance.now() - t0, nodes: state.big ? state.big.graph.order : 0 };
    },
    // mean time of a zoom step of the neighbourhood view, drawn (ms)
    zoomFrameMs: async (steps) => {
      if (!state.big) return null;
      const cam = state.big.renderer.getCamera();
      const t0 = performance.now();
      for (let i = 0; i < steps; i++) {
        cam.setState({ ratio: cam.getState().ratio / 1.1 });
        state.big.renderer.refresh();
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      }
      return (performance.now() - t0) / steps;
    },
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire); else wire();
})();
