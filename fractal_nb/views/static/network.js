// The question tree: vis-network fed by snapshots and deltas of question items from Python.
//
// One item per question (its answers and synthesis folded in: views/question_tree.py),
// laid out here as a left-to-right tree with cross-branch links drawn over it; the
// full question/answer graph is one toggle away. Large trees open collapsed below
// the depth whose rows fit the canvas at a readable zoom; double-click a
// question (or use the outline) to open or close its branch.
//
// vis-network is not in this file: the widget gets the build the pyvis package
// installed from Python (once per page); the exported page inlines the same build.
// Model text reaches the page only as vis `title` strings (shown with innerText)
// or through textContent: never as HTML.

const VIS_KEY = "__fractalNbVis";
// The statuses a question item shows (views/question_tree.py VIEW_STATUSES): "failed" is a question the
// model failed on, whether still recoverable (the store's "error") or saturated as "error" by a harvest.
const STATUSES = ["open", "gated", "claimed", "answered", "synthesized", "saturated", "failed"];
const WEAK = "⚠ weak synthesis"; // joined without the model, or built on failed, budget-cut or joined sub-questions
// An answer the store found unsupported: the graph has sources and its citations failed or are missing
// (docs/architecture.md, "Evidence in the faces").
const UNSUPPORTED = "✗ unsupported answer";
const COLUMN = 250; // px between depths
const ROW = 80; // px between leaves: a box of four lines (three of label, "▸ N more") and a gap
const READABLE_SCALE = 0.75; // the zoom at which 12 px labels still read
const TITLE_CHARS = 600;

function loadVis(source) {
  if (!globalThis[VIS_KEY]) {
    const module = { exports: {} };
    // `define` shadowed so a page with RequireJS does not capture the UMD build.
    new Function("module", "exports", "define", source)(module, module.exports, undefined);
    globalThis[VIS_KEY] = module.exports;
  }
  return globalThis[VIS_KEY];
}

function clipText(text, limit) {
  if (!text) return "";
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Colours come from CSS (network.css), so JupyterLab's theme decides them.
function palette(el) {
  const style = getComputedStyle(el);
  const read = (name) => style.getPropertyValue(name).trim();
  const colors = { bg: read("--fractal-bg"), text: read("--fractal-text"), tree: read("--fractal-tree-edge") };
  colors.convergence = read("--fractal-convergence");
  colors.contradiction = read("--fractal-contradiction");
  for (const status of [...STATUSES, "answer"]) {
    colors[status] = {
      fill: read(`--fractal-${status}-fill`),
      border: read(`--fractal-${status}-border`),
      font: read(`--fractal-${status}-font`),
    };
  }
  el.dataset.palette = colors.open.fill; // which palette the canvas was last painted with
  return colors;
}

function groups(colors) {
  const result = {};
  for (const status of [...STATUSES, "answer"]) {
    const c = colors[status];
    result[status] = {
      shape: "box",
      color: {
        background: c.fill,
        border: c.border,
        highlight: { background: c.fill, border: colors.text },
        hover: { background: c.fill, border: colors.text },
      },
      font: { color: c.font, size: 12, face: "system-ui, sans-serif", multi: false },
      borderWidth: status === "gated" ? 3 : 1.5,
      shapeProperties: { borderDashes: status === "gated" ? [6, 3] : false, borderRadius: 5 },
      margin: { top: 5, bottom: 5, left: 7, right: 7 },
    };
  }
  return result;
}

function options(colors) {
  return {
    autoResize: true,
    physics: { enabled: false },
    layout: { improvedLayout: false, hierarchical: { enabled: false } },
    interaction: {
      hover: true,
      tooltipDelay: 150,
      hideEdgesOnDrag: true,
      keyboard: { enabled: true, bindToWindow: false }, // arrows pan, +/- zoom when the canvas has focus
    },
    groups: groups(colors),
    nodes: { shape: "box" },
    edges: { smooth: false, color: { color: colors.tree }, width: 1, arrows: { to: { enabled: false } } },
  };
}

// Why a synthesis is weak, from the store's weak mark (docs/architecture.md, "Facts, assumptions, unknowns").
function weakWhy(q) {
  const reasons = q.weak_reasons && q.weak_reasons.length ? q.weak_reasons : ["sub-findings joined without the model"];
  return clipText(`built on ${reasons.join("; ")}`, 300);
}

// A question's hover box: plain text, bounded (network.css caps its height too).
function questionTitle(q) {
  const lines = [`question · ${q.status}${q.reason ? ` (${q.reason})` : ""}${q.owner && q.status === "claimed" ? ` · ${q.owner}` : ""}`];
  if (q.error) lines.push(`Failed: ${clipText(q.error, 200)}`);
  if (q.weak) lines.push(`${WEAK}: ${weakWhy(q)}`);
  if (q.track) lines.push(`track: ${clipText(q.track, 120)}`);
  if (q.unsupported) lines.push(`${UNSUPPORTED}: its citations failed the check or are missing`);
  lines.push("", clipText(q.text, 300));
  if (q.answers.length) lines.push("", `Answer: ${clipText(q.answers[q.answers.length - 1].text, 300)}`);
  if (q.synthesis) lines.push("", `Synthesis: ${clipText(q.synthesis, 300)}`);
  return clipText(lines.join("\n"), TITLE_CHARS);
}

export function createView(
  el,
  { height = "520px", send = () => {}, onSelect = () => {}, details = false, vis: given = null } = {},
) {
  el.classList.add("fractal-network");
  Object.assign(el.dataset, { drawn: "0", seq: "0", selected: "", follow: "1", past: "0" });

  const toolbar = element("div", "fractal-toolbar");
  const button = (label, title) => {
    const b = element("button", "", label);
    b.type = "button";
    b.title = title;
    toolbar.appendChild(b);
    return b;
  };
  const fitButton = button("Fit", "Show the whole tree, and follow it as it grows");
  const zoomIn = button("+", "Zoom in");
  const zoomOut = button("−", "Zoom out");
  const modeButton = button("Q/A graph", "Toggle between the question tree and the full question/answer graph");
  const expandButton = button("Expand all", "Open every collapsed branch");
  const outlineButton = button("Outline", "Show or hide the syntheses as an outline beside the graph");
  outlineButton.setAttribute("aria-pressed", "true");
  const search = element("input");
  search.type = "search";
  search.placeholder = "Search questions…";
  search.setAttribute("aria-label", "Search questions");
  toolbar.appendChild(search);
  const statusFilter = element("select");
  statusFilter.setAttribute("aria-label", "Filter by status");
  for (const value of ["any status", ...STATUSES, "weak", "unsupported"]) {
    const label = value === "weak" ? "weak synthesis" : value === "unsupported" ? "unsupported answer" : value;
    statusFilter.appendChild(new Option(label, value));
  }
  toolbar.appendChild(statusFilter);
  const found = element("select");
  found.setAttribute("aria-label", "Matching questions");
  found.hidden = true;
  toolbar.appendChild(found);

  // The history slider's past (a snapshot marked ``past``): said above the canvas while it shows.
  const pastNote = element("div", "fractal-past");
  pastNote.setAttribute("role", "status");
  pastNote.hidden = true;
  const body = element("div", "fractal-body");
  const canvas = element("div", "fractal-canvas");
  canvas.style.height = height;
  const outline = element("div", "fractal-outline");
  outline.style.height = height;
  body.append(canvas, outline);
  const legend = element("div", "fractal-legend");
  const panel = element("div", "fractal-details");
  panel.hidden = true;
  el.append(toolbar, pastNote, body, legend);
  if (details) el.appendChild(panel);

  let vis = given || globalThis[VIS_KEY] || null;
  let network = null;
  let nodes = null;
  let edges = null;
  let colors = null;
  let root = null;
  let seq = 0;
  let resyncing = false; // a hello for a missed delta is out: the snapshot answers it
  let past = false; // showing a past snapshot: deltas are the present's, held until a live snapshot
  let follow = true; // fit as the tree grows, until the reader pans or zooms
  const setFollow = (on) => {
    follow = on;
    el.dataset.follow = on ? "1" : "0";
  };
  let mode = "tree";
  let counts = {};
  let status = "";
  const questions = new Map();
  const links = new Map();
  const children = new Map(); // question id -> child question ids, in creation order
  const opened = new Set(); // opened by the reader beyond the automatic depth
  const closed = new Set(); // closed by the reader
  let autoDepth = Infinity;

  function childrenOf(id) {
    return children.get(id) || [];
  }

  function index(items) {
    for (const q of items) {
      const known = questions.get(q.id);
      if (!known && q.parent !== null) {
        const list = children.get(q.parent) || [];
        list.push(q.id);
        children.set(q.parent, list);
      }
      if (q.root) root = q.id;
      questions.set(q.id, q);
    }
  }

  // The depth below which branches start closed: the deepest level whose rows still fit the
  // canvas at a readable zoom (labels at about 3/4 size), the seed questions at least.
  function chooseAutoDepth() {
    const budget = Math.max(8, Math.floor((canvas.clientHeight || 520) / (ROW * READABLE_SCALE)));
    const byDepth = new Map(); // depth -> [questions there, of them with no sub-question]
    let deepest = 0;
    for (const q of questions.values()) {
      const [all, leaves] = byDepth.get(q.depth) || [0, 0];
      byDepth.set(q.depth, [all + 1, leaves + (childrenOf(q.id).length ? 0 : 1)]);
      deepest = Math.max(deepest, q.depth);
    }
    let leavesAbove = 0;
    autoDepth = Infinity;
    for (let depth = 1; depth <= deepest; depth += 1) {
      const [all, leaves] = byDepth.get(depth) || [0, 0];
      if (depth > 1 && leavesAbove + all > budget) {
        autoDepth = depth - 1; // rows if closed at depth - 1 fitted; this level does not
        return;
      }
      leavesAbove += leaves;
    }
  }

  function isClosed(id) {
    if (closed.has(id)) return true;
    if (opened.has(id)) return false;
    const q = questions.get(id);
    return q.depth >= autoDepth && childrenOf(id).length > 0;
  }

  function countBelow(id) {
    let total = 0;
    const stack = [...childrenOf(id)];
    while (stack.length) {
      const next = stack.pop();
      total += 1;
      stack.push(...childrenOf(next));
    }
    return total;
  }

  // Left-to-right tidy tree of the visible questions: leaves take rows, parents sit mid-way.
  function layout(everything = false) {
    const at = new Map();
    if (!root || !questions.has(root)) return at;
    let row = 0;
    const stack = [[root, false]];
    const span = new Map();
    while (stack.length) {
      const [id, done] = stack.pop();
      const q = questions.get(id);
      const kids = !everything && isClosed(id) ? [] : childrenOf(id);
      if (!done && kids.length) {
        stack.push([id, true]);
        for (let i = kids.length - 1; i >= 0; i -= 1) stack.push([kids[i], false]);
        continue;
      }
      const y = kids.length ? (span.get(kids[0]) + span.get(kids[kids.length - 1])) / 2 : (row++) * ROW;
      span.set(id, y);
      // In the Q/A graph each answer takes a column of its own between its question and the next depth.
      at.set(id, { x: q.depth * COLUMN * (mode === "graph" ? 2 : 1), y });
    }
    return at;
  }

  function questionNode(q, position) {
    const hidden = isClosed(q.id) ? countBelow(q.id) : 0;
    let label = hidden ? `${q.label}\n▸ ${hidden} more` : q.label;
    if (q.track) label = `▣ ${clipText(q.track, 24)}\n${label}`;
    if (q.unsupported) label = `${UNSUPPORTED}\n${label}`;
    if (q.weak) label = `${WEAK}\n${label}`;
    const node = {
      id: q.id,
      label,
      title: questionTitle(q),
      group: q.status,
      x: position.x,
      y: position.y,
      borderWidth: q.root ? 3 : undefined,
      font: q.root ? { size: 14, bold: true } : undefined,
    };
    if (q.weak) {
      // A weak synthesis keeps its status colour, drawn with the failed border, dashed.
      const fill = colors[q.status].fill;
      node.color = {
        background: fill,
        border: colors.failed.border,
        highlight: { background: fill, border: colors.text },
        hover: { background: fill, border: colors.text },
      };
      node.borderWidth = 3;
      node.shapeProperties = { borderDashes: [4, 3], borderRadius: 5 };
    } else if (q.unsupported) {
      // An unsupported answer: the status colour kept, a dotted border in the failed colour.
      const fill = colors[q.status].fill;
      node.color = {
        background: fill,
        border: colors.failed.border,
        highlight: { background: fill, border: colors.text },
        hover: { background: fill, border: colors.text },
      };
      node.borderWidth = 3;
      node.shapeProperties = { borderDashes: [1, 3], borderRadius: 5 };
    }
    return node;
  }

  function items() {
    const at = layout();
    const nodeItems = [];
    const edgeItems = [];
    for (const [id, position] of at) {
      const q = questions.get(id);
      nodeItems.push(questionNode(q, position));
      if (q.parent !== null && at.has(q.parent)) {
        if (mode === "graph" && q.via) {
          edgeItems.push({ id: `${q.via}>${id}`, from: q.via, to: id });
        } else {
          edgeItems.push({ id: `${q.parent}>${id}`, from: q.parent, to: id });
        }
      }
      if (mode === "graph") {
        q.answers.forEach((answer, i) => {
          const unsupported = answer.support === "unsupported";
          const text = clipText(answer.text, 60).replace(/(.{1,26})(\s|$)/g, "$1\n").trim();
          nodeItems.push({
            id: answer.id,
            label: unsupported ? `${UNSUPPORTED}\n${text}` : text,
            title: clipText(`answer${answer.support ? ` · ${answer.support}` : ""}\n\n${answer.text}`, TITLE_CHARS),
            group: "answer",
            x: position.x + COLUMN,
            y: position.y + i * (ROW / 2),
            ...(unsupported
              ? {
                  color: { background: colors.answer.fill, border: colors.failed.border },
                  borderWidth: 3,
                  shapeProperties: { borderDashes: [1, 3], borderRadius: 5 },
                }
              : {}),
          });
          edgeItems.push({ id: `${id}>${answer.id}`, from: id, to: answer.id, dashes: [2, 2] });
        });
      }
    }
    const shown = new Set(nodeItems.map((n) => n.id));
    for (const link of links.values()) {
      const [from, to] = mode === "graph" ? [link.from_node, link.to_node] : [link.from_question, link.to_question];
      if (!shown.has(from) || !shown.has(to) || from === to) continue;
      const color = link.type === "contradiction" ? colors.contradiction : colors.convergence;
      edgeItems.push({
        id: link.id,
        from,
        to,
        title: clipText(`${link.type}: ${link.note}`, TITLE_CHARS),
        color: { color, opacity: 0.6 },
        width: 1.8,
        dashes: link.type === "contradiction" ? [2, 5] : [8, 4],
        smooth: { enabled: true, type: "curvedCW", roundness: 0.25 },
      });
    }
    return [nodeItems, edgeItems];
  }

  function redraw() {
    const [nodeItems, edgeItems] = items();
    const keepNodes = new Set(nodeItems.map((n) => n.id));
    const keepEdges = new Set(edgeItems.map((e) => e.id));
    nodes.remove(nodes.getIds().filter((id) => !keepNodes.has(id)));
    edges.remove(edges.getIds().filter((id) => !keepEdges.has(id)));
    nodes.update(nodeItems);
    edges.update(edgeItems);
    el.dataset.visibleCount = String(nodes.length);
    el.dataset.edgeCount = String(edges.length);
    if (follow) network.fit({ animation: false });
  }

  function draw() {
    colors = palette(el);
    nodes = new vis.DataSet([]);
    edges = new vis.DataSet([]);
    network = new vis.Network(canvas, { nodes, edges }, options(colors));
    el.visNetwork = network; // for the browser console (and the browser tests)
    network.once("afterDrawing", () => {
      el.dataset.drawn = "1";
    });
    network.on("dragEnd", (params) => {
      if (!params.nodes.length) setFollow(false);
    });
    network.on("zoom", () => setFollow(false));
    network.on("click", (params) => select(params.nodes.length ? String(params.nodes[0]) : "", false));
    network.on("doubleClick", (params) => {
      const id = params.nodes.length ? String(params.nodes[0]) : "";
      if (!questions.has(id) || !childrenOf(id).length) return;
      if (isClosed(id)) {
        closed.delete(id);
        opened.add(id);
      } else {
        opened.delete(id);
        closed.add(id);
      }
      redraw();
    });
  }

  // Repaint only when the palette changed (a <body> class also changes for other reasons).
  function retheme() {
    if (!network) return;
    const next = palette(el);
    if (JSON.stringify(next) === JSON.stringify(colors)) return;
    colors = next;
    network.setOptions(options(colors));
    redraw();
    network.redraw();
  }

  // Open every closed question above ``id``, so a found or chosen question is on screen;
  // whether anything opened (the caller redraws once).
  function openAbove(id) {
    let q = questions.get(id);
    let changed = false;
    while (q && q.parent !== null) {
      if (isClosed(q.parent)) {
        closed.delete(q.parent);
        opened.add(q.parent);
        changed = true;
      }
      q = questions.get(q.parent);
    }
    return changed;
  }

  function select(id, focus) {
    el.dataset.selected = id;
    onSelect(id);
    if (!network) return;
    if (id && questions.has(id)) {
      if (openAbove(id)) redraw();
      network.selectNodes([id]);
      if (focus) {
        setFollow(false);
        network.focus(id, { scale: Math.max(network.getScale(), 0.9), animation: false });
      }
    } else if (id && nodes.get(id)) {
      network.selectNodes([id]);
    }
    if (details) showDetails(id);
    markOutline(id);
  }

  function showDetails(id) {
    const q = questions.get(id);
    panel.hidden = !q;
    if (!q) return;
    panel.replaceChildren();
    panel.appendChild(element("h4", "", `question · ${q.status}${q.reason ? ` (${q.reason})` : ""} · depth ${q.depth}`));
    if (q.error) panel.appendChild(element("p", "fractal-failed-note", `Failed: ${q.error}`));
    if (q.weak) {
      panel.appendChild(element("p", "fractal-weak-note", `${WEAK}: ${weakWhy(q)}. It stays weak until it is synthesized again on sound sub-questions.`));
    }
    if (q.track) panel.appendChild(element("p", "fractal-track", `Track: ${q.track}`));
    panel.appendChild(element("p", "", q.text));
    for (const answer of q.answers) {
      const unsupported = answer.support === "unsupported";
      panel.appendChild(element("p", unsupported ? "fractal-unsupported-note" : "", `Answer${unsupported ? ` (${UNSUPPORTED.slice(2)})` : ""}: ${answer.text}`));
    }
    for (const note of q.notes || []) panel.appendChild(element("p", "", `Note: ${note.text}`));
    if (q.synthesis) panel.appendChild(element("p", "", `Synthesis: ${q.synthesis}`));
    const subs = childrenOf(id).map((c) => questions.get(c));
    if (subs.length) {
      panel.appendChild(element("p", "", "Sub-questions:"));
      const list = element("ul");
      for (const sub of subs) list.appendChild(element("li", "", `${sub.text} (${sub.status})`));
      panel.appendChild(list);
    }
    panel.appendChild(element("p", "fractal-id", id));
  }

  // -- finding ---------------------------------------------------------------------------

  // The questions matching the search and the status filter, listed and selected; ``open``: the
  // reader asked (not a delta), so their branches open too.
  function find(open) {
    const text = search.value.trim().toLowerCase();
    const wanted = statusFilter.value === "any status" ? null : statusFilter.value;
    const matches = [];
    if (text || wanted) {
      for (const q of questions.values()) {
        const hit = (!text || `${q.text}\n${q.synthesis || ""}`.toLowerCase().includes(text))
          && (!wanted || (wanted === "weak" ? q.weak : wanted === "unsupported" ? q.unsupported > 0 : q.status === wanted));
        if (hit) matches.push(q);
      }
    }
    found.replaceChildren(new Option(`${matches.length} found: choose one…`, ""));
    for (const q of matches.slice(0, 500)) found.appendChild(new Option(clipText(q.label.replace(/\n/g, " "), 80), q.id));
    found.hidden = !(text || wanted);
    el.dataset.found = String(matches.length);
    if (network) {
      let opened = false;
      if (open) for (const q of matches) opened = openAbove(q.id) || opened;
      if (opened) redraw();
      network.selectNodes(matches.map((q) => q.id).filter((id) => nodes.get(id)));
    }
  }

  // -- the outline: question → synthesis → sub-questions, opened on demand -------------------

  function outlineEntry(id) {
    const q = questions.get(id);
    const entry = element("details");
    entry.dataset.id = id;
    const summary = element("summary");
    const chip = element("span", `fractal-chip fractal-${q.status}`, q.status);
    summary.append(chip);
    if (q.weak) summary.append(" ", element("span", "fractal-chip fractal-weak", WEAK));
    if (q.unsupported) summary.append(" ", element("span", "fractal-chip fractal-unsupported", UNSUPPORTED));
    if (q.track) summary.append(" ", element("span", "fractal-chip fractal-track", `track: ${q.track}`));
    summary.append(document.createTextNode(` ${q.label.replace(/\n/g, " ")}`));
    summary.addEventListener("click", () => select(id, true));
    entry.appendChild(summary);
    const finding = q.synthesis || (q.answers.length ? q.answers[q.answers.length - 1].text : "");
    if (finding) entry.appendChild(element("div", "fractal-finding", clipText(finding, 700)));
    const kids = childrenOf(id);
    if (kids.length) {
      entry.addEventListener("toggle", () => {
        if (entry.open && !entry.dataset.filled) {
          entry.dataset.filled = "1";
          for (const kid of kids) entry.appendChild(outlineEntry(kid));
        }
      });
    }
    return entry;
  }

  function renderOutline() {
    const openIds = new Set([...outline.querySelectorAll("details[open]")].map((d) => d.dataset.id));
    outline.replaceChildren(element("h5", "", "Outline: questions and their syntheses"));
    if (!root || !questions.has(root)) return;
    const top = outlineEntry(root);
    outline.appendChild(top);
    const reopen = (entry) => {
      if (entry.dataset.id === root || openIds.has(entry.dataset.id)) {
        entry.open = true;
        entry.dispatchEvent(new Event("toggle"));
        for (const child of entry.querySelectorAll(":scope > details")) reopen(child);
      }
    };
    reopen(top);
    markOutline(el.dataset.selected);
  }

  function markOutline(id) {
    for (const s of outline.querySelectorAll("summary.fractal-current")) s.classList.remove("fractal-current");
    const entry = id ? outline.querySelector(`details[data-id="${CSS.escape(id)}"] > summary`) : null;
    if (entry) entry.classList.add("fractal-current");
  }

  // -- the legend: shapes, colours and link styles, with the counts --------------------------

  function renderLegend() {
    legend.replaceChildren();
    for (const name of [...STATUSES, "weak", "unsupported", "answers"]) {
      const value = counts[name] || 0;
      if (!value && name !== "answers") continue;
      const text = name === "weak" ? `${WEAK} ${value}` : name === "unsupported" ? `${UNSUPPORTED}s ${value}` : `${name} ${value}`;
      legend.appendChild(element("span", `fractal-chip fractal-${name}`, text));
    }
    const key = (cls, text) => {
      const item = element("span", `fractal-link-key ${cls}`);
      item.append(element("i"), document.createTextNode(text));
      legend.appendChild(item);
    };
    key("fractal-tree", mode === "tree" ? "sub-question" : "question → answer → sub-question");
    key("fractal-convergence", "convergence");
    key("fractal-contradiction", "contradiction");
    legend.appendChild(element("span", "fractal-link-key", "▸ N more: double-click to open"));
    legend.appendChild(element("span", "fractal-graph-status", `graph ${status}`));
  }

  function setCounts(message) {
    counts = message.counts;
    status = message.status;
    el.dataset.nodeCount = String(counts.total ?? 0);
    el.dataset.gatedCount = String(counts.gated ?? 0);
    el.dataset.failedCount = String(counts.failed ?? 0);
    el.dataset.counts = JSON.stringify(counts);
    el.dataset.status = status;
    renderLegend();
  }

  // -- messages --------------------------------------------------------------------------------

  function apply(message) {
    if (message.type === "vis") {
      vis = loadVis(message.source);
      return;
    }
    if (!vis) return;
    if (message.type === "snapshot") {
      questions.clear();
      links.clear();
      children.clear();
      index(message.questions);
      for (const link of message.links) links.set(link.id, link);
      chooseAutoDepth();
      if (!network) draw();
      seq = message.seq;
      resyncing = false;
      past = Boolean(message.past);
      pastNote.hidden = !past;
      pastNote.textContent = past ? `Showing the past: ${message.past}. Live updates are held until Live.` : "";
      el.dataset.past = past ? "1" : "0";
    } else if (message.type === "delta") {
      if (!network || past) return; // the snapshot asked for covers it; the past takes no delta
      if (message.since > seq) {
        if (!resyncing) send({ type: "hello", need_vis: false }); // missed a delta: start over from a snapshot
        resyncing = true;
        return;
      }
      const before = questions.size;
      index(message.questions);
      for (const link of message.links) links.set(link.id, link);
      // Rows only accrue as a tree grows, so the deepest level that fits only gets shallower: a
      // level that filled up closes again (branches the reader opened stay open).
      if (questions.size > before) chooseAutoDepth();
      seq = Math.max(seq, message.seq);
    } else {
      return;
    }
    redraw();
    if (!outline.hidden) renderOutline(); // its content changed (a redraw alone does not change it)
    el.dataset.seq = String(seq);
    setCounts(message);
    if (search.value || statusFilter.value !== "any status") find(false);
  }

  fitButton.addEventListener("click", () => {
    setFollow(true);
    if (network) network.fit({ animation: false });
  });
  const zoom = (factor) => {
    if (!network) return;
    setFollow(false);
    network.moveTo({ scale: network.getScale() * factor });
  };
  zoomIn.addEventListener("click", () => zoom(1.4));
  zoomOut.addEventListener("click", () => zoom(1 / 1.4));
  modeButton.addEventListener("click", () => {
    mode = mode === "tree" ? "graph" : "tree";
    modeButton.setAttribute("aria-pressed", String(mode === "graph"));
    modeButton.textContent = mode === "graph" ? "Question tree" : "Q/A graph";
    if (network) redraw();
    renderLegend();
  });
  expandButton.addEventListener("click", () => {
    closed.clear();
    for (const id of questions.keys()) opened.add(id);
    if (network) redraw();
  });
  outlineButton.addEventListener("click", () => {
    outline.hidden = !outline.hidden;
    outlineButton.setAttribute("aria-pressed", String(!outline.hidden));
    if (!outline.hidden) renderOutline();
    if (network) network.redraw();
  });
  search.addEventListener("input", () => find(true));
  statusFilter.addEventListener("change", () => find(true));
  found.addEventListener("change", () => {
    if (found.value) select(found.value, true);
  });

  // JupyterLab switches themes by attributes on <body>; the canvas is repainted with the new colours.
  const themeWatch = new MutationObserver(retheme);
  themeWatch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name", "class"] });

  return {
    apply,
    select,
    // Where every question would be with all branches open (the layout's own check).
    layoutAll() {
      const at = layout(true);
      return { count: at.size, distinct: new Set([...at.values()].map((p) => `${p.x},${p.y}`)).size };
    },
    destroy() {
      themeWatch.disconnect();
      if (network) network.destroy();
    },
  };
}

function render({ model, el }) {
  const view = createView(el, {
    height: model.get("height"),
    send: (message) => model.send(message),
    onSelect: (id) => {
      model.set("selected", id);
      model.save_changes();
    },
  });
  const onMessage = (message) => view.apply(message);
  const onSelected = () => {
    const id = model.get("selected") || "";
    if (id !== el.dataset.selected) view.select(id, true);
  };
  model.on("msg:custom", onMessage);
  model.on("change:selected", onSelected);
  model.send({ type: "hello", need_vis: !globalThis[VIS_KEY] });
  return () => {
    model.off("msg:custom", onMessage);
    model.off("change:selected", onSelected);
    view.destroy();
  };
}

export default { render };
