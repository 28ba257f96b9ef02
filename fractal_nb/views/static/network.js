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
  const zoomIn = button("+", "Zoom in, around the selected question or the centre: deeper questions get labels");
  const zoomOut = button("−", "Zoom out, around the selected question or the centre");
  const zoomToSelection = button(
    "Zoom to selection",
    "Bring the selected question to the centre, close enough that its whole label reads",
  );
  zoomToSelection.disabled = true;
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
  const outlineView = createOutline(outline, {
    questions,
    childrenOf,
    root: () => root,
    selected: () => selectedQuestion(),
    matched: () => matched,
    select,
  });
  const emptyBounds = { left: 0, right: 0, top: 0, bottom: 0 };
  let placed = { at: new Map(), bounds: emptyBounds, k: K_MAX, readable: true, form: WHOLE };
  // The layout depends on the questions, the open branches, the mode and the canvas, not on the
  // selection, the links drawn or the search: it is placed again only when one of those changed.
  let shapeVersion = 0; // bumped whenever questions arrive or a branch opens or closes
  let placedFor = "";
  const reshaped = () => {
    shapeVersion += 1;
  };
  const looks = new Map(); // node id -> how it is drawn (tree_paint.js)
  const painter = createPainter({
    look: (id) => looks.get(id),
    scale: () => (network ? network.getScale() : 1),
    colors: () => colors,
  });

  // The outline beside the canvas only where it costs no label (issue 38: beside a 565-question tree it
  // left 1 label): until the reader presses Outline, the view shows it only while it is OUTLINE_MIN_WIDTH
  // wide and the tree's fitted view labels as many questions beside the outline as without it. The
  // first snapshot decides; later ones and a growing tree only hide it (a run's tree grows, and an
  // outline that came and went under the reader would move the tree each time). The reader's choice holds.
  let outlineChosen = false;
  let outlineDecided = false;
  function placeOutline() {
    if (outlineChosen || !el.clientWidth || (outlineDecided && outline.hidden)) return;
    const wasHidden = outline.hidden;
    let show = el.clientWidth >= OUTLINE_MIN_WIDTH && root !== null;
    if (show) {
      const tall = canvasSize()[1];
      outline.hidden = true; // the canvas's width alone and beside the outline (a layout, not a paint)
      const alone = canvas.clientWidth;
      outline.hidden = false;
      const beside = canvas.clientWidth;
      const tree = visibleTree();
      show = layoutFor(tree, beside, tall).labelled >= layoutFor(tree, alone, tall).labelled;
    }
    outlineDecided = true;
    outline.hidden = !show;
    outlineButton.setAttribute("aria-pressed", String(show));
    if (show && wasHidden) outlineView.render();
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
  // MIN_LABEL_PX, one level shallower (the seed questions always show).
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
      if (seedsRead(visibleTree(), width, tall)) break;
      autoDepth = depth - 1;
    }
  }

  // Where the tree opens closed, and whether the outline stays beside it, for the questions now (the
  // outline changes the canvas's width, and so where branches close).
  function arrange() {
    chooseAutoDepth();
    const beside = !outline.hidden;
    placeOutline();
    if (beside !== !outline.hidden) chooseAutoDepth();
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

  // The short form of a question's label in ``count`` lines of ``chars`` characters (a layout may
  // choose it, to label more questions at the fit or to read the seed questions on a narrow canvas:
  // tree_layout.js chooseLayout): its marks as signs, its text wrapped narrower and clipped; zooming in
  // shows the whole label in the same box, and the tooltip and the details keep the whole text.
  function questionShortLines(q, everything, count, chars) {
    const marks = `${q.weak ? "⚠ " : ""}${q.unsupported ? "✗ " : ""}${q.track ? "▣ " : ""}`;
    const lines = shortLines(`${marks}${q.label.replace(/\n/g, " ")}`, chars, count);
    const hidden = !everything && isClosed(q.id) ? countBelow(q.id) : 0;
    if (hidden) lines.push(`▸ ${hidden} more`);
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
    const box = (key, id, lines) => {
      if (!boxes.has(key)) boxes.set(key, boxOf(lines(), id === root));
      return boxes.get(key);
    };
    return {
      root: root && questions.has(root) ? root : null,
      kids: (id) => (!everything && isClosed(id) ? [] : childrenOf(id)),
      depth: (id) => questions.get(id).depth,
      gated: (id) => questions.get(id).status === "gated",
      box: (id) => box(id, id, () => questionLines(questions.get(id), everything)),
      shortBox: (id, count, chars) =>
        box(`\u0001${count}x${chars}${id}`, id, () => questionShortLines(questions.get(id), everything, count, chars)),
      answers: (id) =>
        mode === "graph"
          ? questions.get(id).answers.map((a) => ({ id: a.id, ...box(a.id, a.id, () => answerLines(a)) }))
          : [],
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
      dot: c.border, // a dot keeps its status colour and shape (a weak or unsupported mark is on the box only)
      dotShape: dotShape(q.status),
      font: c.font,
      borderWidth: q.root ? 3 : q.status === "gated" ? 3 : 1.5,
      dashes: q.status === "gated" ? [6, 3] : q.status === "pruned" ? [2, 3] : null,
      bold: q.root,
      ring: matched.has(q.id),
    };
    // A short label that cut the text shows its whole label once that reads in the box; one that holds
    // every word (wrapped narrower: a notebook's seeds) keeps its lines, the larger text.
    const full = shortAt(placed.form, q.depth) ? questionLines(q, false) : null;
    const words = (text) => text.join(" ").split(/\s+/).join(" ");
    if (full && words(full) !== words(lines)) look.whole = { lines: full, font: fontToFit(full, p.w, p.h, p.s) };
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

  // The layout of ``tree`` (the visible tree now) for a canvas, kept while the shape and the canvas
  // stay (the outline's choice and the drawing ask for the same one).
  const layouts = new Map();
  function layoutFor(tree, width, tall) {
    const key = `${shapeVersion}|${autoDepth}|${mode}|${width}x${tall}`;
    let layout = layouts.get(key);
    if (!layout) {
      if (layouts.size >= 4) layouts.clear();
      layout = chooseLayout(tree, width, tall);
      layouts.set(key, layout);
    }
    return layout;
  }

  function items() {
    const [width, tall] = canvasSize();
    const key = `${shapeVersion}|${autoDepth}|${mode}|${width}x${tall}`;
    if (key !== placedFor) {
      placed = layoutFor(visibleTree(), width, tall);
      placedFor = key;
    }
    looks.clear();
    const nodeItems = [];
    const edgeItems = [];
    for (const [id, p] of placed.at) {
      if (p.answer) continue;
      const q = questions.get(id);
      looks.set(id, questionLook(q, p, p.lines));
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
          lines: a.lines,
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

  // What the reader looks at, to keep it where it is and at its size when the layout changes under a
  // view the reader zoomed or panned (the tree grew, the canvas changed width): the selected question if
  // it is labelled on the canvas, else the labelled question on the canvas drawn smallest, the nearest
  // the centre of those. Keeping its label's size keeps the zoom a label needs: zoomed-in labels do not
  // turn back into dots as the tree grows (issue 38). Its id, place on the canvas and label size there.
  function anchor() {
    const scale = network.getScale();
    const [width, tall] = canvasSize();
    const centre = network.getViewPosition();
    const onCanvas = (p) => {
      const at = network.canvasToDOM({ x: p.x, y: p.y });
      return at.x >= 0 && at.y >= 0 && at.x <= width && at.y <= tall ? at : null;
    };
    const readsAt = (p) => LEVEL_FONT * p.s * scale >= MIN_LABEL_PX;
    const chosen = placed.at.get(el.dataset.selected) ? el.dataset.selected : selectedQuestion();
    const mine = placed.at.get(chosen);
    let best = mine && readsAt(mine) && onCanvas(mine) ? chosen : null;
    if (!best) {
      let smallest = Infinity;
      let nearest = Infinity;
      for (const [id, p] of placed.at) {
        if (p.answer || !readsAt(p) || !onCanvas(p)) continue;
        const distance = Math.hypot(p.x - centre.x, p.y - centre.y);
        if (p.s < smallest * 0.99 || (p.s <= smallest * 1.01 && distance < nearest)) {
          [smallest, nearest, best] = [Math.min(smallest, p.s), distance, id];
        }
      }
    }
    if (!best) return null;
    const p = placed.at.get(best);
    return { id: best, at: network.canvasToDOM({ x: p.x, y: p.y }), px: LEVEL_FONT * p.s * scale };
  }

  // Put ``kept`` (see anchor) back where it was on the canvas, at its size there, in the new layout.
  function hold(kept) {
    const p = placed.at.get(kept.id);
    if (!p) return;
    const [width, tall] = canvasSize();
    const scale = kept.px / (LEVEL_FONT * p.s);
    const inside = kept.at.x >= 0 && kept.at.y >= 0 && kept.at.x <= width && kept.at.y <= tall;
    const at = inside ? kept.at : { x: width / 2, y: tall / 2 };
    network.moveTo({
      position: { x: p.x + (width / 2 - at.x) / scale, y: p.y + (tall / 2 - at.y) / scale },
      scale,
      animation: false,
    });
  }

  function redraw() {
    const kept = follow || !placed.at.size ? null : anchor();
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
    else if (kept) hold(kept);
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
    network.on("click", (params) => {
      select(params.nodes.length ? String(params.nodes[0]) : "", false);
      // A click shows its result: on a page with the details below the tree (the exported page), they
      // come into view (issue 38: they opened below the fold).
      if (details && !panel.hidden) panel.scrollIntoView({ block: "nearest" });
    });
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

  // Bring node ``id`` to the canvas's centre, zoomed in (never out) until its label reads: MIN_LABEL_PX
  // and a little more, its whole label where it has a short one. The reader stops following the fit.
  function focusOn(id) {
    setFollow(false);
    const look = looks.get(id);
    const readable = (MIN_LABEL_PX + 3) / (look?.whole ? look.whole.font : LEVEL_FONT * (look?.s || 1));
    network.focus(id, { scale: Math.max(network.getScale(), readable), animation: false });
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
    const present = Boolean(shown && nodes.get(shown));
    zoomToSelection.disabled = !present;
    if (present) {
      network.selectNodes([shown]);
      if (focus) focusOn(shown);
    } else {
      network.unselectAll();
    }
    if (details) showDetails(question);
    outlineView.mark(question);
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
      const [depth, label, status] = q ? [q.depth, q.label, q.status] : [null, null, null];
      return { id: l.id, depth, label, lines: l.lines, status, px: l.px, left, top, right, bottom };
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
        const q = questions.get(id);
        const shape = looks.get(id)?.dotShape ?? null;
        return { id, depth: q?.depth ?? null, parent: q?.parent ?? null, status: q?.status ?? null, shape, x, y };
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
    if (open) for (const q of matches.slice(0, 100)) outlineView.openTo(q.id);
    outlineView.markMatches();
    if (network) {
      if (open) for (const q of matches) openAbove(q.id);
      redraw();
    }
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
    // The dots' shapes are the chips' signs (network.css, tree_paint.js dotShape).
    const dots = "● ○ ◆ ✖ ⊘ a dot, shaped as its status: too small to label here, zoom in";
    legend.appendChild(element("span", "fractal-link-key", dots));
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
      if (!network) draw();
      arrange();
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
      if (questions.size > before) arrange();
      seq = Math.max(seq, message.seq);
    } else {
      return;
    }
    redraw();
    if (!outline.hidden) outlineView.render(); // its content changed (a redraw alone does not change it)
    el.dataset.seq = String(seq);
    setCounts(message);
    if (search.value || statusFilter.value !== "any status") find(false);
  }

  fitButton.addEventListener("click", () => {
    setFollow(true);
    if (network) fitView();
  });
  // + and −: overview, then detail. The zoom keeps one point where it is on the canvas: the selected
  // node (brought to the centre first when it is off the canvas), or the canvas's centre; so the reader
  // zooms into where they look, not into the root the fitted view centres on (issue 38).
  const zoom = (factor) => {
    if (!network) return;
    setFollow(false);
    const next = network.getScale() * factor;
    const [width, tall] = canvasSize();
    const chosen = el.dataset.selected && nodes.get(el.dataset.selected) ? placed.at.get(el.dataset.selected) : null;
    let position = network.getViewPosition();
    if (chosen) {
      const at = network.canvasToDOM({ x: chosen.x, y: chosen.y });
      const inside = at.x >= 0 && at.y >= 0 && at.x <= width && at.y <= tall;
      position = inside
        ? { x: chosen.x + (width / 2 - at.x) / next, y: chosen.y + (tall / 2 - at.y) / next }
        : { x: chosen.x, y: chosen.y };
    }
    network.moveTo({ position, scale: next, animation: false });
  };
  zoomIn.addEventListener("click", () => zoom(1.4));
  zoomOut.addEventListener("click", () => zoom(1 / 1.4));
  zoomToSelection.addEventListener("click", () => {
    const id = el.dataset.selected;
    if (network && id && nodes.get(id)) focusOn(id);
  });
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
    outlineChosen = true;
    outline.hidden = !outline.hidden;
    outlineButton.setAttribute("aria-pressed", String(!outline.hidden));
    if (!outline.hidden) outlineView.render();
    // The canvas changed width: the resize watch below lays the tree out again for it (keeping what the
    // reader looks at in place when they zoomed).
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
  // the tree out again for the new shape and, while the view follows, fits it; else it keeps what the
  // reader looks at in place (redraw).
  let resizing = 0;
  const sizeWatch = new ResizeObserver(() => {
    if (!network || resizing) return;
    resizing = requestAnimationFrame(() => {
      resizing = 0;
      placeOutline();
      redraw();
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
      const at = placeTree(visibleTree(true), { k: K_MIN, labelled: new Set(), form: WHOLE }).at;
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
