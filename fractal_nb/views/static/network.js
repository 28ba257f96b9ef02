// The question tree: vis-network fed by snapshots and deltas of question items from Python.
//
// One item per question (its answers and synthesis folded in: views/question_tree.py, or the
// store's store/question_items.py for a whole graph),
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
// model failed on, whether still recoverable (the store's "error") or saturated as "error" by a harvest;
// "pruned" one a person pruned (saturated as "pruned"): dropped, not settled.
const STATUSES = ["open", "gated", "claimed", "answered", "synthesized", "saturated", "failed", "pruned"];
const WEAK = "⚠ weak synthesis"; // joined without the model, or built on failed, budget-cut or joined sub-questions
// An answer the store found unsupported: the graph has sources and its citations failed or are missing
// (docs/architecture.md, "Evidence in the faces").
const UNSUPPORTED = "✗ unsupported answer";
// Past this many questions the tree opens closed below the deepest level that keeps it under it
// (the rest are a double-click, a search or Expand all away).
const VISIBLE_CAP = 600;
const OUTLINE_MIN_WIDTH = 900; // px of the view under which it opens without the outline beside the tree
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
  colors.accent = read("--fractal-match");
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

function options(colors, renderer) {
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
    nodes: { shape: "custom", ctxRenderer: renderer },
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
  { height = "520px", send = () => {}, onSelect = () => {}, details = false, status: showStatus = true, vis: given = null } = {},
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
  const zoomIn = button("+", "Zoom in: deeper questions get their labels");
  const zoomOut = button("−", "Zoom out");
  const modeButton = button("Q/A graph", "Toggle between the question tree and the full question/answer graph");
  const expandButton = button("Expand all", "Open every collapsed branch");
  const linksButton = button("All links", "Draw every convergence and contradiction, not only the selected question's");
  linksButton.setAttribute("aria-pressed", "false");
  const outlineButton = button("Outline", "Show or hide the syntheses as an outline beside the graph");
  outlineButton.setAttribute("aria-pressed", "true");
  const search = element("input");
  search.type = "search";
  search.placeholder = "Search all text…";
  search.title = "Words in any order; case and punctuation ignored; questions, answers and syntheses";
  search.setAttribute("aria-label", "Search questions, answers and syntheses");
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

  // The history slider's past (a snapshot marked ``past``): said above the canvas while it shows,
  // with the one click back to the live graph (the Voila app shows no slider to find Live on).
  const pastNote = element("div", "fractal-past");
  pastNote.setAttribute("role", "status");
  pastNote.hidden = true;
  const pastText = element("span");
  const backToLive = element("button", "fractal-past-live", "Back to live");
  backToLive.type = "button";
  backToLive.addEventListener("click", () => send({ type: "live" }));
  pastNote.append(pastText, backToLive);
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
  let allLinks = false; // every cross-branch link drawn, or only the selected question's
  let counts = {};
  let status = "";
  const questions = new Map();
  const links = new Map();
  const children = new Map(); // question id -> child question ids, in creation order
  const questionOf = new Map(); // answer id -> its question id
  const opened = new Set(); // opened by the reader beyond the automatic depth
  const closed = new Set(); // closed by the reader
  let autoDepth = Infinity;
  let matched = new Set(); // questions the search and filter found
  let placed = { at: new Map(), bounds: { left: 0, right: 0, top: 0, bottom: 0 }, k: K_MAX, readable: true };
  // The layout depends on the questions, the open branches, the mode and the canvas, not on the
  // selection, the links drawn or the search: it is placed again only when one of those changed.
  let shapeVersion = 0; // bumped whenever questions arrive or a branch opens or closes
  let placedFor = "";
  let placedTree = null;
  const reshaped = () => {
    shapeVersion += 1;
  };
  const looks = new Map(); // node id -> how it is drawn (tree_paint.js)
  const painter = createPainter({
    look: (id) => looks.get(id),
    scale: () => (network ? network.getScale() : 1),
    colors: () => colors,
  });

  // The outline beside the canvas only where both fit: a view narrower than OUTLINE_MIN_WIDTH (the
  // panel's, beside its tabs) opens with the tree alone; the Outline button shows it (the reader decides).
  function placeOutline() {
    const width = el.clientWidth;
    if (width && width < OUTLINE_MIN_WIDTH) {
      outline.hidden = true;
      outlineButton.setAttribute("aria-pressed", "false");
    }
  }

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
      q.label = questionLabel(q.text);
      for (const answer of q.answers) questionOf.set(answer.id, q.id);
      questions.set(q.id, q);
    }
    reshaped();
  }

  function canvasSize() {
    return [canvas.clientWidth || 800, canvas.clientHeight || parseInt(height, 10) || 520];
  }

  // Where branches start closed: with more than VISIBLE_CAP questions, below the deepest level that
  // keeps the tree under it; then, while the fitted tree would draw the seed questions' labels under
  // SEED_TARGET_PX, one level shallower (the seed questions always show).
  function chooseAutoDepth() {
    const byDepth = new Map();
    let deepest = 0;
    for (const q of questions.values()) {
      byDepth.set(q.depth, (byDepth.get(q.depth) || 0) + 1);
      deepest = Math.max(deepest, q.depth);
    }
    autoDepth = Infinity;
    let shown = byDepth.get(0) || 0;
    for (let depth = 1; depth <= deepest; depth += 1) {
      shown += byDepth.get(depth) || 0;
      if (depth > 1 && shown > VISIBLE_CAP) {
        autoDepth = depth - 1;
        break;
      }
    }
    const [width, tall] = canvasSize();
    for (let depth = Math.min(autoDepth, deepest); depth > 1; depth -= 1) {
      if (chooseLayout(visibleTree(), width, tall).readable) break;
      autoDepth = depth - 1;
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

  // A question's label lines: its marks, its wrapped text, and how much a closed branch hides.
  function questionLines(q, everything) {
    const lines = q.label.split("\n");
    const hidden = !everything && isClosed(q.id) ? countBelow(q.id) : 0;
    if (hidden) lines.push(`▸ ${hidden} more`);
    if (q.track) lines.unshift(`▣ ${clipText(q.track, 24)}`);
    if (q.unsupported) lines.unshift(UNSUPPORTED);
    if (q.weak) lines.unshift(WEAK);
    return lines;
  }

  function answerLines(answer) {
    const text = clipText(answer.text.replace(TAG, ""), 60);
    const lines = (text.match(/.{1,26}(\s|$)|\S+/g) || [""]).map((line) => line.trim()).filter(Boolean);
    return answer.support === "unsupported" ? [UNSUPPORTED, ...lines] : lines;
  }

  // The visible tree as tree_layout.js takes it (``everything``: every branch open).
  function visibleTree(everything = false) {
    const boxes = new Map();
    const box = (id, lines) => {
      if (!boxes.has(id)) boxes.set(id, boxOf(lines, id === root));
      return boxes.get(id);
    };
    return {
      root: root && questions.has(root) ? root : null,
      kids: (id) => (!everything && isClosed(id) ? [] : childrenOf(id)),
      depth: (id) => questions.get(id).depth,
      box: (id) => box(id, questionLines(questions.get(id), everything)),
      answers: (id) =>
        mode === "graph" ? questions.get(id).answers.map((a) => ({ id: a.id, ...box(a.id, answerLines(a)) })) : [],
      lines: (id) => boxes.get(id).lines,
    };
  }

  function questionLook(q, p, lines) {
    const c = colors[q.status];
    const look = {
      lines,
      w: p.w,
      h: p.h,
      s: p.s,
      fill: c.fill,
      border: c.border,
      dot: c.border, // a dot keeps its status colour (a weak or unsupported mark is on the box only)
      font: c.font,
      borderWidth: q.root ? 3 : q.status === "gated" ? 3 : 1.5,
      dashes: q.status === "gated" ? [6, 3] : q.status === "pruned" ? [2, 3] : null,
      bold: q.root,
      ring: matched.has(q.id),
    };
    if (q.weak) {
      // A weak synthesis keeps its status colour, drawn with the failed border, dashed.
      Object.assign(look, { border: colors.failed.border, borderWidth: 3, dashes: [4, 3] });
    } else if (q.unsupported) {
      // An unsupported answer: the status colour kept, a dotted border in the failed colour.
      Object.assign(look, { border: colors.failed.border, borderWidth: 3, dashes: [1, 3] });
    }
    return look;
  }

  // The selected question (its id, or its answer's question's): its links are the ones drawn.
  function selectedQuestion() {
    const id = el.dataset.selected;
    return questionOf.get(id) || id;
  }

  function items() {
    const [width, tall] = canvasSize();
    const key = `${shapeVersion}|${autoDepth}|${mode}|${width}x${tall}`;
    if (key !== placedFor) {
      placedTree = visibleTree();
      placed = chooseLayout(placedTree, width, tall);
      placedFor = key;
    }
    const tree = placedTree;
    looks.clear();
    const nodeItems = [];
    const edgeItems = [];
    for (const [id, p] of placed.at) {
      if (p.answer) continue;
      const q = questions.get(id);
      looks.set(id, questionLook(q, p, tree.lines(id)));
      nodeItems.push({ id, x: p.x, y: p.y, title: questionTitle(q), size: Math.max(p.w, p.h) / 2 });
      const edgeWidth = 1.2 * p.s;
      if (q.parent !== null && placed.at.has(q.parent)) {
        const from = mode === "graph" && q.via && placed.at.has(q.via) ? q.via : q.parent;
        edgeItems.push({ id: `${from}>${id}`, from, to: id, width: edgeWidth });
      }
      for (const answer of mode === "graph" ? q.answers : []) {
        const a = placed.at.get(answer.id);
        const unsupported = answer.support === "unsupported";
        looks.set(answer.id, {
          lines: tree.lines(answer.id),
          w: a.w,
          h: a.h,
          s: a.s,
          fill: colors.answer.fill,
          border: unsupported ? colors.failed.border : colors.answer.border,
          font: colors.answer.font,
          borderWidth: unsupported ? 3 : 1.5,
          dashes: unsupported ? [1, 3] : null,
          bold: false,
          ring: false,
        });
        nodeItems.push({
          id: answer.id,
          x: a.x,
          y: a.y,
          title: clipText(`answer${answer.support ? ` · ${answer.support}` : ""}\n\n${answer.text}`, TITLE_CHARS),
          size: Math.max(a.w, a.h) / 2,
        });
        edgeItems.push({ id: `${id}>${answer.id}`, from: id, to: answer.id, dashes: [2 * p.s, 2 * p.s], width: edgeWidth });
      }
    }
    // Cross-branch links over the tree only where the reader asks: the selected question's, or all.
    const chosen = selectedQuestion();
    for (const link of links.values()) {
      const [from, to] = mode === "graph" ? [link.from_node, link.to_node] : [link.from_question, link.to_question];
      if (!looks.has(from) || !looks.has(to) || from === to) continue;
      if (!allLinks && link.from_question !== chosen && link.to_question !== chosen) continue;
      const color = link.type === "contradiction" ? colors.contradiction : colors.convergence;
      edgeItems.push({
        id: link.id,
        from,
        to,
        title: clipText(`${link.type}: ${link.note}`, TITLE_CHARS),
        color: { color, opacity: allLinks ? 0.45 : 0.85 },
        width: 1.8 * WORLD,
        dashes: (link.type === "contradiction" ? [2, 5] : [8, 4]).map((v) => v * WORLD),
        smooth: { enabled: true, type: "curvedCW", roundness: 0.25 },
      });
    }
    return [nodeItems, edgeItems];
  }

  // Show the whole placed tree, centred, at the zoom that fits it (never past MAX_FIT_SCALE).
  function fitView() {
    const b = placed.bounds;
    const [width, tall] = canvasSize();
    network.moveTo({
      position: { x: (b.left + b.right) / 2, y: (b.top + b.bottom) / 2 },
      scale: fitScale(b, width, tall),
      animation: false,
    });
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
    el.dataset.linkCount = String(edgeItems.filter((e) => links.has(e.id)).length);
    el.dataset.k = placed.k.toFixed(2);
    if (follow) fitView();
    network.redraw();
  }

  function draw() {
    colors = palette(el);
    nodes = new vis.DataSet([]);
    edges = new vis.DataSet([]);
    network = new vis.Network(canvas, { nodes, edges }, options(colors, painter.renderer));
    el.visNetwork = network; // for the browser console (and the browser tests)
    el.fractalFrame = frame;
    network.on("beforeDrawing", () => painter.start());
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
      reshaped();
      redraw();
    });
  }

  // Repaint only when the palette changed (a <body> class also changes for other reasons).
  function retheme() {
    if (!network) return;
    const next = palette(el);
    if (JSON.stringify(next) === JSON.stringify(colors)) return;
    colors = next;
    network.setOptions(options(colors, painter.renderer));
    redraw();
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
        reshaped();
      }
      q = questions.get(q.parent);
    }
    return changed;
  }

  function select(id, focus) {
    const before = selectedQuestion();
    el.dataset.selected = id;
    onSelect(id);
    if (!network) return;
    const question = questionOf.get(id) || id;
    const shown = questions.has(question) ? (mode === "graph" ? id : question) : id;
    if (questions.has(question)) {
      const grew = openAbove(question);
      if (grew || before !== question) redraw(); // its branch, and its links, drawn
    }
    if (shown && nodes.get(shown)) {
      network.selectNodes([shown]);
      if (focus) {
        setFollow(false);
        // Close enough that its label reads (MIN_LABEL_PX and a little more).
        const readable = (MIN_LABEL_PX + 3) / (LEVEL_FONT * (looks.get(shown)?.s || 1));
        network.focus(shown, { scale: Math.max(network.getScale(), readable), animation: false });
      }
    } else {
      network.unselectAll();
    }
    if (details) showDetails(question);
    markOutline(question);
  }

  // What the last frame drew, in page pixels: labels (each with its size on screen), dots, boxes drawn
  // without a label, and the share of the canvas the drawn tree spans across and down.
  function frame() {
    const drawn = painter.frame();
    const box = canvas.querySelector("canvas").getBoundingClientRect();
    const toPage = (x, y) => {
      const p = network.canvasToDOM({ x, y });
      return [box.left + p.x, box.top + p.y];
    };
    const labels = drawn.labels.map((l) => {
      const [left, top] = toPage(l.x - l.w / 2, l.y - l.h / 2);
      const [right, bottom] = toPage(l.x + l.w / 2, l.y + l.h / 2);
      const q = questions.get(l.id);
      return { id: l.id, depth: q ? q.depth : null, label: q ? q.label : null, px: l.px, left, top, right, bottom };
    });
    const spread = { left: Infinity, right: -Infinity, top: Infinity, bottom: -Infinity };
    for (const id of [...drawn.dots, ...drawn.labels.map((l) => l.id)]) {
      const p = placed.at.get(id);
      if (!p) continue;
      const [left, top] = toPage(p.x - p.w / 2, p.y - p.h / 2);
      const [right, bottom] = toPage(p.x + p.w / 2, p.y + p.h / 2);
      spread.left = Math.min(spread.left, Math.max(left, box.left));
      spread.right = Math.max(spread.right, Math.min(right, box.right));
      spread.top = Math.min(spread.top, Math.max(top, box.top));
      spread.bottom = Math.max(spread.bottom, Math.min(bottom, box.bottom));
    }
    const depths = {}; // the questions the view holds, by depth
    for (const q of questions.values()) depths[q.depth] = (depths[q.depth] || 0) + 1;
    // Every placed node's box (labelled or a dot, on screen or not): vis-network keeps no bounding box
    // for a custom shape, so the layout's own boxes are what the tests measure overlap and fit by.
    const placedBoxes = [...placed.at].map(([id, p]) => {
      const [left, top] = toPage(p.x - p.w / 2, p.y - p.h / 2);
      const [right, bottom] = toPage(p.x + p.w / 2, p.y + p.h / 2);
      return { id, left, top, right, bottom };
    });
    return {
      scale: network.getScale(),
      k: placed.k,
      depths,
      boxes: placedBoxes,
      canvas: { left: box.left, top: box.top, right: box.right, bottom: box.bottom },
      labels,
      dots: drawn.dots.length,
      dotsAt: drawn.dots.slice(0, 2000).map((id) => {
        const p = placed.at.get(id);
        const [x, y] = p ? toPage(p.x, p.y) : [null, null];
        return { id, depth: questions.get(id)?.depth ?? null, x, y };
      }),
      bare: drawn.bare.length,
      use: {
        x: Math.max(0, spread.right - spread.left) / box.width,
        y: Math.max(0, spread.bottom - spread.top) / box.height,
      },
    };
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

  // A question's searchable words: its text, answers and synthesis, lower case, punctuation as spaces.
  const haystacks = new WeakMap(); // question item -> its words (items are replaced when they change)
  function haystack(q) {
    let words = haystacks.get(q);
    if (words === undefined) {
      words = ` ${searchWords([q.text, ...q.answers.map((a) => a.text), q.synthesis || ""].join(" ")).join(" ")} `;
      haystacks.set(q, words);
    }
    return words;
  }

  // The questions matching the search (every word, in any order, as a word or the start of one) and the
  // status filter, listed, ringed in the tree and marked in the outline; ``open``: the reader asked (not
  // a delta), so their branches open too.
  function find(open) {
    const words = searchWords(search.value);
    const wanted = statusFilter.value === "any status" ? null : statusFilter.value;
    const matches = [];
    if (words.length || wanted) {
      for (const q of questions.values()) {
        const hit =
          (!words.length || words.every((w) => haystack(q).includes(` ${w}`))) &&
          (!wanted || (wanted === "weak" ? q.weak : wanted === "unsupported" ? q.unsupported > 0 : q.status === wanted));
        if (hit) matches.push(q);
      }
    }
    found.replaceChildren(new Option(`${matches.length} found: choose one…`, ""));
    for (const q of matches.slice(0, 500)) found.appendChild(new Option(clipText(q.label.replace(/\n/g, " "), 80), q.id));
    found.hidden = !(words.length || wanted);
    el.dataset.found = String(matches.length);
    matched = new Set(matches.map((q) => q.id));
    if (open) for (const q of matches.slice(0, 100)) openInOutline(q.id);
    markMatches();
    if (network) {
      if (open) for (const q of matches) openAbove(q.id);
      redraw();
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
    markOutline(selectedQuestion());
    markMatches();
  }

  // Open the outline down to ``id`` (each entry fills its sub-questions when it opens).
  function openInOutline(id) {
    if (outline.hidden || !questions.has(id)) return;
    const path = [];
    for (let q = questions.get(id); q && q.parent !== null; q = questions.get(q.parent)) path.unshift(q.parent);
    for (const above of path) {
      const entry = outline.querySelector(`details[data-id="${CSS.escape(above)}"]`);
      if (!entry) return;
      if (!entry.open) {
        entry.open = true;
        entry.dispatchEvent(new Event("toggle"));
      }
    }
  }

  function markMatches() {
    for (const s of outline.querySelectorAll("summary.fractal-match")) s.classList.remove("fractal-match");
    for (const id of matched) {
      const entry = outline.querySelector(`details[data-id="${CSS.escape(id)}"] > summary`);
      if (entry) entry.classList.add("fractal-match");
    }
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
    const whose = allLinks ? "" : " (the selected question's)";
    key("fractal-convergence", `convergence${whose}`);
    key("fractal-contradiction", `contradiction${whose}`);
    legend.appendChild(element("span", "fractal-link-key", "● too small to label here: zoom in"));
    legend.appendChild(element("span", "fractal-link-key", "▸ N more: double-click to open"));
    if (showStatus) legend.appendChild(element("span", "fractal-graph-status", `graph ${status}`));
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
      questionOf.clear();
      index(message.questions);
      for (const link of message.links) links.set(link.id, link);
      if (!network) {
        placeOutline();
        draw();
      }
      chooseAutoDepth();
      seq = message.seq;
      resyncing = false;
      past = Boolean(message.past);
      pastNote.hidden = !past;
      pastText.textContent = past ? `Showing the past: ${message.past}. Live updates are held. ` : "";
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
    if (network) fitView();
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
  linksButton.addEventListener("click", () => {
    allLinks = !allLinks;
    linksButton.setAttribute("aria-pressed", String(allLinks));
    if (network) redraw();
    renderLegend();
  });
  expandButton.addEventListener("click", () => {
    closed.clear();
    for (const id of questions.keys()) opened.add(id);
    reshaped();
    if (network) redraw();
  });
  outlineButton.addEventListener("click", () => {
    outline.hidden = !outline.hidden;
    outlineButton.setAttribute("aria-pressed", String(!outline.hidden));
    if (!outline.hidden) renderOutline();
    // The canvas changed width: the resize watch below lays the tree out again for it.
  });
  search.addEventListener("input", () => find(true));
  statusFilter.addEventListener("change", () => find(true));
  found.addEventListener("change", () => {
    if (found.value) select(found.value, true);
  });

  // A finding's or a chain entry's link (data-fractal-node, views/citations_html.py) anywhere on the
  // page shows its node here: selected, its branch open, in view.
  const onNodeLink = (event) => {
    const link = event.target instanceof Element ? event.target.closest("a[data-fractal-node]") : null;
    const id = link ? link.dataset.fractalNode : "";
    if (!id || !(questions.has(id) || questionOf.has(id))) return;
    event.preventDefault();
    el.scrollIntoView({ block: "nearest" });
    select(id, true);
  };
  document.addEventListener("click", onNodeLink);

  // Every change of the canvas's size (the outline shown or hidden, a window or a panel resized) lays
  // the tree out again for the new shape and, while the view follows, fits it.
  let resizing = 0;
  const sizeWatch = new ResizeObserver(() => {
    if (!network || resizing) return;
    resizing = requestAnimationFrame(() => {
      resizing = 0;
      if (follow) redraw();
    });
  });
  sizeWatch.observe(canvas);

  // JupyterLab switches themes by attributes on <body>; the canvas is repainted with the new colours.
  const themeWatch = new MutationObserver(retheme);
  themeWatch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name", "class"] });

  return {
    apply,
    select,
    frame,
    // Where every question would be with all branches open (the layout's own check).
    layoutAll() {
      const at = placeTree(visibleTree(true), K_MIN).at;
      return { count: at.size, distinct: new Set([...at.values()].map((p) => `${p.x},${p.y}`)).size };
    },
    destroy() {
      themeWatch.disconnect();
      sizeWatch.disconnect();
      document.removeEventListener("click", onNodeLink);
      if (network) network.destroy();
    },
  };
}

function render({ model, el }) {
  const view = createView(el, {
    height: model.get("height"),
    status: model.get("show_status"),
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
