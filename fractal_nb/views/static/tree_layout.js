// The question tree's layout: a two-sided tree, labelled wherever the fitted view has room, dots below
// (docs/architecture.md, "The live view's protocol", Layout). Pure geometry: no vis-network, no DOM but
// a canvas to measure text.
//
// The root sits in the middle; its seed questions go to the right and to the left (split where the two
// sides are most nearly the same height), each side a tidy tree growing outwards: a depth is a column,
// a question with no visible sub-question takes a row of its own, a parent sits mid-way along the rows
// of its branch.
//
// A question is drawn at one of two sizes. A labelled one (the seeds always, then as many more as the
// fitted view shows at MIN_LABEL_PX or more) at LEVEL_FONT, the root a little larger; any other at k
// times its parent's size, its box, gaps and rows scaled alike, so the branch under a labelled question
// is the same picture, only smaller: dots at the fit, labelled as the reader zooms in. chooseLayout
// picks which questions are labelled, k, the sides and the labels' form (whole, or two or one clipped
// lines below the seeds; where the seeds read no other way, the root and the seeds wrapped narrower in
// more lines, their text first) by counting the questions the fitted view labels (issue 38: 161 of 172
// were dots).

const LEVEL_FONT = 13; // CSS px of a labelled question's label at a zoom of 1 / WORLD
// World units per CSS px: the tree is drawn WORLD times larger than it reads, so that vis-network's
// wheel zoom (capped at 10) reaches deep labels (a question four dots below a label, at K_MIN^4 of its
// size), and its rounded positions (getPositions) stay apart.
const WORLD = 100;
const ROOT_GROWTH = 1.25; // the root's label, beside a seed question's
const LINE_HEIGHT = 1.25; // a line, as a share of the font size
const PAD_X = 8; // inside a box, at a labelled question's size
const PAD_Y = 5;
const COLUMN_GAP = 34; // between a column and the next, at the size of the deeper column's largest box
const ROW_GAP = 10; // between rows of the same column, at their size
const MIN_LABEL_PX = 11; // a label is drawn only when it renders at >= 11 px on screen
// The layout keeps its labels a little over MIN_LABEL_PX at the fit, so that rounding in the zoom never
// turns one into a dot.
const LABEL_TARGET_PX = MIN_LABEL_PX * 1.002;
const K_MIN = 0.2;
const K_MAX = 0.85;
const MAX_FIT_SCALE = 1.3 / WORLD; // a small tree is not blown up past 1.3 times its size
const FIT_MARGIN = 0.95; // the fitted tree leaves this share of the canvas around it
const FONT_FACE = "system-ui, -apple-system, 'Segoe UI', sans-serif";

let textMeasure = null;
const widths = new Map(); // line (bold ones marked) -> its width at LEVEL_FONT

// The width of one line of a label at LEVEL_FONT, measured once with the canvas's own font metrics.
function lineWidth(line, bold = false) {
  const key = bold ? `\u0001${line}` : line;
  let width = widths.get(key);
  if (width === undefined) {
    textMeasure = textMeasure || document.createElement("canvas").getContext("2d");
    textMeasure.font = `${bold ? "600 " : ""}${LEVEL_FONT}px ${FONT_FACE}`;
    width = textMeasure.measureText(line).width;
    if (widths.size > 50000) widths.clear();
    widths.set(key, width);
  }
  return width;
}

// A label's box at a labelled question's size: {lines, w, h} (``bold``: the root's label).
function boxOf(lines, bold = false) {
  const w = Math.max(24, ...lines.map((line) => lineWidth(line, bold))) + 2 * PAD_X;
  const h = lines.length * LEVEL_FONT * LINE_HEIGHT + 2 * PAD_Y;
  return { lines, w, h };
}

// The font (world px) at which ``lines`` fill, inside its padding, a box of ``w`` x ``h`` drawn at size
// ``s``: a short label's box shows the whole label once the reader zooms in far enough to read it.
function fontToFit(lines, w, h, s) {
  const widest = Math.max(1, ...lines.map((line) => lineWidth(line)));
  return Math.min((h - 2 * PAD_Y * s) / (lines.length * LINE_HEIGHT), ((w - 2 * PAD_X * s) * LEVEL_FONT) / widest);
}

// The visible tree read once into arrays, so that placing it is cheap enough to try a few hundred
// times while choosing a layout. ``tree``: {root, kids(id) -> visible child ids, depth(id), box(id) ->
// {lines, w, h} at a labelled question's size, shortBox(id, lines, chars) (its short form in that many
// lines), gated(id), answers(id) -> [{id, lines, w, h}] (the Q/A graph: boxes beside their question;
// else [])}. Questions are in pre-order (a parent before its sub-questions, which come in their
// order); 0 is the root.
function compileTree(tree) {
  const ids = [];
  const parent = [];
  const stack = tree.root ? [[tree.root, -1]] : [];
  while (stack.length) {
    const [id, above] = stack.pop();
    const at = ids.length;
    ids.push(id);
    parent.push(above);
    const kids = tree.kids(id);
    for (let i = kids.length - 1; i >= 0; i -= 1) stack.push([kids[i], at]);
  }
  const kids = ids.map(() => []);
  for (let i = 1; i < ids.length; i += 1) kids[parent[i]].push(i);
  const depth = ids.map((id) => tree.depth(id));
  const box = ids.map((id) => tree.box(id));
  const short = new Map(); // a short label's key -> each question's box in it, made when a form asks
  return {
    ids,
    parent,
    kids,
    depth,
    box,
    // Each question's box in the short label ``cut`` ({lines, chars}).
    shortBox(cut) {
      const key = `${cut.lines}x${cut.chars}`;
      if (!short.has(key)) short.set(key, ids.map((id) => tree.shortBox(id, cut.lines, cut.chars)));
      return short.get(key);
    },
    gated: ids.map((id) => tree.gated(id)),
    answers: ids.map((id) => tree.answers(id)),
  };
}

// The short label ``form`` gives a question at ``depth`` ({lines, chars}), or null: its whole label.
function shortAt(form, depth) {
  return (depth < 1 ? form.root : depth === 1 ? form.seeds : form.below) || null;
}

// A question's box at a labelled question's size in ``form``.
function boxIn(c, form, i) {
  const cut = shortAt(form, c.depth[i]);
  return cut ? c.shortBox(cut)[i] : c.box[i];
}

// Place a compiled tree. ``plan``: {k, labelled: Uint8Array (1: labelled, by index; the root and the
// seeds always are), form: the labels' form (see LABEL_FORMS)}; ``twoSided``: seed questions to the
// right and the left of the root (else all to the right). Returns arrays by index (x, y, w, h, s, side)
// with each question's lines, the answers' boxes, the bounds, and labelScale: the least size a
// labelled question has.
function arrangeTree(c, plan, twoSided) {
  const n = c.ids.length;
  const [x, y, w, h, s, foot, slot, span] = Array.from({ length: 8 }, () => new Float64Array(n));
  const side = new Int8Array(n);
  const lines = new Array(n);
  const answers = [];
  if (!n) return { x, y, w, h, s, side, lines, answers, bounds: boundsOf([]), labelScale: WORLD };
  let labelScale = WORLD * ROOT_GROWTH;
  for (let i = 0; i < n; i += 1) {
    const labelled = c.depth[i] <= 1 || plan.labelled[i];
    s[i] = i === 0 ? WORLD * ROOT_GROWTH : labelled ? WORLD : s[c.parent[i]] * plan.k;
    if (labelled) labelScale = Math.min(labelScale, s[i]);
  }
  for (let i = n - 1; i >= 0; i -= 1) {
    const box = boxIn(c, plan.form, i);
    const own = c.answers[i];
    const answersH = own.reduce((sum, a) => sum + a.h * s[i] + ROW_GAP * s[i] * 0.5, 0);
    const answersW = own.length ? COLUMN_GAP * s[i] * 0.6 + Math.max(...own.map((a) => a.w)) * s[i] : 0;
    lines[i] = box.lines;
    w[i] = box.w * s[i];
    h[i] = box.h * s[i];
    foot[i] = w[i] + answersW;
    slot[i] = Math.max(h[i], answersH) + ROW_GAP * s[i];
    let kidsSpan = 0;
    for (const kid of c.kids[i]) kidsSpan += span[kid];
    span[i] = Math.max(slot[i], kidsSpan);
  }

  // The seed questions split into a right and a left side of nearly equal height, in their order.
  const seeds = c.kids[0];
  const total = seeds.reduce((sum, i) => sum + span[i], 0);
  let cut = seeds.length;
  let best = Infinity;
  let running = 0;
  for (let i = 0; i <= seeds.length; i += 1) {
    const worse = Math.max(running, total - running);
    if (worse < best - 1e-9) {
      best = worse;
      cut = i;
    }
    if (i < seeds.length) running += span[seeds[i]];
  }
  if (seeds.length === 1 || !twoSided) cut = seeds.length;
  seeds.forEach((i, order) => {
    side[i] = order < cut ? 1 : -1;
  });
  for (let i = 1; i < n; i += 1) if (c.depth[i] >= 2) side[i] = side[c.parent[i]];

  // Each side's columns, by depth: as wide as their widest box, apart by a gap at their largest size.
  for (const sign of [1, -1]) {
    const columns = new Map();
    for (let i = 1; i < n; i += 1) {
      if (side[i] !== sign) continue;
      const column = columns.get(c.depth[i]) || { w: 0, s: 0 };
      columns.set(c.depth[i], { w: Math.max(column.w, foot[i]), s: Math.max(column.s, s[i]) });
    }
    const inner = new Map(); // depth -> the column's inner edge (towards the root), as a distance
    let edge = w[0] / 2;
    for (const d of [...columns.keys()].sort((a, b) => a - b)) {
      edge += COLUMN_GAP * columns.get(d).s;
      inner.set(d, edge);
      edge += columns.get(d).w;
    }
    // Top to bottom: a question in the middle of its branch's rows, its sub-questions along them.
    const from = new Float64Array(n);
    let top = -seeds.reduce((sum, i) => sum + (side[i] === sign ? span[i] : 0), 0) / 2;
    for (const i of seeds) {
      if (side[i] !== sign) continue;
      from[i] = top;
      top += span[i];
    }
    for (let i = 1; i < n; i += 1) {
      if (side[i] !== sign) continue;
      x[i] = sign * (inner.get(c.depth[i]) + w[i] / 2);
      y[i] = from[i] + span[i] / 2;
      let kidsSpan = 0;
      for (const kid of c.kids[i]) kidsSpan += span[kid];
      let next = from[i] + (span[i] - kidsSpan) / 2;
      for (const kid of c.kids[i]) {
        from[kid] = next;
        next += span[kid];
      }
    }
  }

  // Answers (the Q/A graph) beside their question, outwards; the root's below it.
  for (let i = 0; i < n; i += 1) {
    let top = side[i] === 0 ? y[i] + h[i] / 2 + ROW_GAP * s[i] : y[i] - (slot[i] - ROW_GAP * s[i]) / 2;
    for (const a of c.answers[i]) {
      const [aw, ah] = [a.w * s[i], a.h * s[i]];
      const ax = side[i] === 0 ? 0 : x[i] + side[i] * (w[i] / 2 + COLUMN_GAP * s[i] * 0.6 + aw / 2);
      answers.push({ id: a.id, x: ax, y: top + ah / 2, w: aw, h: ah, s: s[i], side: side[i], lines: a.lines, answer: true });
      top += ah + ROW_GAP * s[i] * 0.5;
    }
  }
  const boxes = [];
  for (let i = 0; i < n; i += 1) boxes.push({ x: x[i], y: y[i], w: w[i], h: h[i] });
  return { x, y, w, h, s, side, lines, answers, bounds: boundsOf([...boxes, ...answers]), labelScale };
}

// The placed tree as the view takes it: {at: Map(id -> {x, y, w, h, s, side, lines, answer?}), bounds}.
function placedOf(c, arranged) {
  const at = new Map();
  const { x, y, w, h, s, side, lines } = arranged;
  c.ids.forEach((id, i) => at.set(id, { x: x[i], y: y[i], w: w[i], h: h[i], s: s[i], side: side[i], lines: lines[i] }));
  for (const a of arranged.answers) at.set(a.id, a);
  return { at, bounds: arranged.bounds };
}

// Place ``tree`` (see compileTree) with ``plan`` ({k, labelled: Set of ids, form}): placedOf's shape.
function placeTree(tree, plan, twoSided = true) {
  const c = compileTree(tree);
  const labelled = Uint8Array.from(c.ids, (id) => (plan.labelled.has(id) ? 1 : 0));
  return placedOf(c, arrangeTree(c, { ...plan, labelled }, twoSided));
}

function boundsOf(boxes) {
  const b = { left: Infinity, right: -Infinity, top: Infinity, bottom: -Infinity };
  for (const p of boxes) {
    b.left = Math.min(b.left, p.x - p.w / 2);
    b.right = Math.max(b.right, p.x + p.w / 2);
    b.top = Math.min(b.top, p.y - p.h / 2);
    b.bottom = Math.max(b.bottom, p.y + p.h / 2);
  }
  if (b.left === Infinity) return { left: 0, right: 0, top: 0, bottom: 0 };
  return b;
}

// The zoom that shows ``bounds`` whole on a canvas of ``width`` x ``height`` CSS px.
function fitScale(bounds, width, height) {
  const w = Math.max(1, bounds.right - bounds.left);
  const h = Math.max(1, bounds.bottom - bounds.top);
  return Math.min(MAX_FIT_SCALE, (FIT_MARGIN * width) / w, (FIT_MARGIN * height) / h);
}

// A tree wider than the canvas's shape spreads its rows apart (gaps only: boxes keep their size, so
// nothing comes to overlap), up to MAX_STRETCH, so it spans the canvas down as well as across. It
// stops where the tree has the canvas's shape, so the fitted zoom, and every label's size, stays.
const MAX_STRETCH = 2.5;
function stretchRows(placed, width, height) {
  const b = placed.bounds;
  const wide = b.right - b.left;
  const tall = Math.max(1, b.bottom - b.top);
  const stretch = Math.min(MAX_STRETCH, (wide * height) / width / tall);
  if (!(stretch > 1.01)) return placed;
  for (const p of placed.at.values()) p.y *= stretch;
  return { ...placed, bounds: boundsOf(placed.at.values()) };
}

// Whether every labelled question of an arranged tree renders at LABEL_TARGET_PX or more, fitted.
function labelsRead(arranged, width, height) {
  return fitScale(arranged.bounds, width, height) * LEVEL_FONT * arranged.labelScale >= LABEL_TARGET_PX;
}

// How many questions the fitted view of an arranged tree labels, and how many of them are gated.
function labelledAtFit(c, arranged, width, height) {
  const least = MIN_LABEL_PX / (LEVEL_FONT * fitScale(arranged.bounds, width, height));
  let questions = 0;
  let gated = 0;
  for (let i = 0; i < c.ids.length; i += 1) {
    if (arranged.s[i] < least) continue;
    questions += 1;
    if (c.gated[i]) gated += 1;
  }
  return { questions, gated };
}

// Label as many questions below the seeds as the fitted view reads, on one shape of layout (sides and
// label form), greedily: each gated question first (a person must decide them), shallowest first; then
// the sub-questions of each labelled question, a family at once, breadth first (at each depth the
// larger branches first: they already take the rows a label needs), or one by one while they fit when
// the whole family does not. A label is kept only if every label still reads with it, the dots at
// their smallest (K_MIN); labels only take room, so one that does not fit now never will. Then the
// largest k (by bisection) that keeps them reading, so the dots are as large as the room allows and
// zooming in labels them sooner. ``readable``: the seed questions' labels read at all.
function bestPlan(c, width, height, twoSided, form) {
  const labelled = new Uint8Array(c.ids.length);
  const trial = (k) => arrangeTree(c, { k, labelled, form }, twoSided);
  let arranged = trial(K_MIN);
  if (!labelsRead(arranged, width, height)) return { arranged, k: K_MIN, readable: false, twoSided, form };
  const attempt = (questions) => {
    for (const i of questions) labelled[i] = 1;
    const next = trial(K_MIN);
    if (labelsRead(next, width, height)) {
      arranged = next;
      return true;
    }
    for (const i of questions) labelled[i] = 0;
    return false;
  };

  const below = new Int32Array(c.ids.length); // visible questions under each
  for (let i = c.ids.length - 1; i > 0; i -= 1) below[c.parent[i]] += 1 + below[i];
  const larger = (a, b) => below[b] - below[a];
  const gated = c.ids.map((_, i) => i).filter((i) => c.depth[i] >= 2 && c.gated[i]);
  for (const i of gated.sort((a, b) => c.depth[a] - c.depth[b])) attempt([i]);

  let level = [...c.kids[0]];
  while (level.length) {
    const next = [];
    for (const parent of level.sort(larger)) {
      const family = c.kids[parent].filter((kid) => !labelled[kid]);
      if (family.length && !attempt(family) && family.length > 1) {
        for (const kid of family.sort(larger)) if (!attempt([kid])) break;
      }
      next.push(...c.kids[parent].filter((kid) => labelled[kid] && c.kids[kid].length));
    }
    level = next;
  }

  let k = K_MIN;
  const widest = trial(K_MAX);
  if (labelsRead(widest, width, height)) {
    [k, arranged] = [K_MAX, widest];
  } else {
    let high = K_MAX;
    for (let i = 0; i < 6 && high - k > 0.02; i += 1) {
      const mid = (k + high) / 2;
      const wider = trial(mid);
      if (labelsRead(wider, width, height)) [k, arranged] = [mid, wider];
      else high = mid;
    }
  }
  return { arranged, k, readable: true, twoSided, form };
}

// The labels' forms: a short label ({lines, chars}: network.js questionShortLines) or null (whole) for
// the root, the seed questions and the questions below them. LABEL_FORMS, the more text first: whole
// labels, or below the seeds short ones of two lines or one. LAST_FORMS only where the seed questions
// read no other way (a notebook's panel: a canvas of 600 px beside its tabs): the seeds and the root
// wrapped narrower, in more lines, so that both sides of the tree fit and the seeds still read whole
// (issue 42: one clipped line of 20 characters, one-sided, the left half of the canvas empty), the
// narrowest and one line last.
const TWO_LINES = { lines: 2, chars: 20 };
const ONE_LINE = { lines: 1, chars: 20 };
const WHOLE = { root: null, seeds: null, below: null };
const LABEL_FORMS = [WHOLE, { ...WHOLE, below: TWO_LINES }, { ...WHOLE, below: ONE_LINE }];
const NARROW_ROOT = { lines: 4, chars: 16 };
const NARROW_SEEDS = [
  [4, 18],
  [3, 20],
  [4, 16],
  [3, 18],
  [4, 14],
  [3, 16],
  [2, 20],
  [1, 20],
].map(([lines, chars]) => ({ lines, chars }));
const LAST_FORMS = NARROW_SEEDS.flatMap((seeds) => [TWO_LINES, ONE_LINE].map((below) => ({ root: NARROW_ROOT, seeds, below })));

// How much of the seed questions' text ``form`` shows (in characters, the lines joined).
function seedText(c, form) {
  return c.kids[0].reduce((sum, i) => sum + boxIn(c, form, i).lines.join(" ").replace(/…/g, "").length, 0);
}

// Of ``forms``, those whose seed questions read on either side's shape (the dots below them at their
// smallest) and show the most of the seeds' text; all of them where none reads.
function mostSeedText(c, forms, width, height) {
  const labelled = new Uint8Array(c.ids.length);
  const reads = forms.filter((form) =>
    [true, false].some((twoSided) => labelsRead(arrangeTree(c, { k: K_MIN, labelled, form }, twoSided), width, height)),
  );
  if (!reads.length) return forms;
  const most = Math.max(...reads.map((form) => seedText(c, form)));
  return reads.filter((form) => seedText(c, form) === most);
}

// The layout for a canvas: of the shapes (two-sided or one-sided, since a narrow canvas has no room
// for two sides, in each of LABEL_FORMS), the one whose fitted view labels the most questions; at a tie
// the one labelling more gated questions, then the form with more text, then two sides, then larger
// labels. Where no shape reads the seed questions, the seeds' text comes first: the same choice among
// the LAST_FORMS that read the seeds and show the most of their text. ``readable`` says whether the seed
// questions' labels read at all (if not, the caller closes deeper branches); with no shape readable,
// the one with the larger seeds. Returns placedOf's shape with k, readable, form and labelled (how many
// questions the fitted view labels).
function chooseLayout(tree, width, height) {
  const c = compileTree(tree);
  const shapesOf = (forms) =>
    forms.flatMap((form, rank) =>
      [true, false].map((twoSided) => {
        const shape = bestPlan(c, width, height, twoSided, form);
        shape.count = labelledAtFit(c, shape.arranged, width, height);
        shape.fit = fitScale(shape.arranged.bounds, width, height);
        shape.rank = -rank;
        return shape;
      }),
    );
  let shapes = shapesOf(LABEL_FORMS);
  if (!shapes.some((shape) => shape.readable)) shapes = shapesOf(mostSeedText(c, LAST_FORMS, width, height));
  const key = (s) => [s.readable, s.count.questions, s.count.gated, s.rank, s.twoSided, s.fit];
  const better = (a, b) => {
    const [x, y] = [key(a), key(b)];
    for (let i = 0; i < x.length; i += 1) if (x[i] !== y[i]) return x[i] > y[i] ? a : b;
    return a;
  };
  const best = shapes.reduce(better);
  return {
    ...stretchRows(placedOf(c, best.arranged), width, height),
    k: best.k,
    readable: best.readable,
    form: best.form,
    labelled: best.count.questions,
  };
}

// Whether the seed questions' labels read in the fitted view at all, in any form (the dots below them
// at their smallest, on either side's shape): what decides where big trees open closed.
function seedsRead(tree, width, height) {
  const forms = [...LABEL_FORMS, ...LAST_FORMS];
  const c = compileTree(tree);
  const labelled = new Uint8Array(c.ids.length);
  return forms.some((form) =>
    [true, false].some((twoSided) => labelsRead(arrangeTree(c, { k: K_MIN, labelled, form }, twoSided), width, height)),
  );
}
