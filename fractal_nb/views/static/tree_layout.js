// The question tree's layout: a two-sided tree whose boxes shrink by depth (docs/architecture.md,
// "The live view's protocol", Layout). Pure geometry: no vis-network, no DOM but a canvas to measure text.
//
// The root sits in the middle; its seed questions go to the right and to the left (split where the two
// sides are most nearly the same height), each side a tidy tree growing outwards: a depth is a column,
// a question with no visible sub-question takes a row of its own, a parent sits mid-way along the rows
// of its branch. A question at depth d is drawn at LEVEL_FONT * k^(d - 1) (the root a little larger),
// its box, gaps and rows scaled alike, so a branch is the same picture at every depth, only smaller:
// zooming in reveals deeper labels. k is chosen per canvas (chooseLayout): the largest that keeps the
// seed questions' labels readable when the whole tree is fitted.

const LEVEL_FONT = 13; // CSS px of a seed question's label at a zoom of 1 / WORLD
// World units per CSS px: the tree is drawn WORLD times larger than it reads, so that vis-network's
// zoom (capped at 10) reaches the deepest labels, and its rounded positions (getPositions) stay apart.
const WORLD = 40;
const ROOT_GROWTH = 1.25; // the root's label, beside a seed question's
const LINE_HEIGHT = 1.25; // a line, as a share of the font size
const PAD_X = 8; // inside a box, at a seed question's size
const PAD_Y = 5;
const COLUMN_GAP = 46; // between a column and the next, at the size of the deeper column
const ROW_GAP = 10; // between rows of the same column, at their size
const MIN_LABEL_PX = 10; // a label is drawn only when it renders at >= 10 px on screen
const SEED_TARGET_PX = 10.5; // the fitted view keeps seed labels at least this large when any k can
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

// A label's box at a seed question's size: {lines, w, h} (``bold``: the root's label).
function boxOf(lines, bold = false) {
  const w = Math.max(24, ...lines.map((line) => lineWidth(line, bold))) + 2 * PAD_X;
  const h = lines.length * LEVEL_FONT * LINE_HEIGHT + 2 * PAD_Y;
  return { lines, w, h };
}

// A question's size at ``depth``, in world units per px of a seed question's layout.
function levelScale(depth, k) {
  return WORLD * (depth === 0 ? ROOT_GROWTH : k ** (depth - 1));
}

// Place the visible tree. ``tree``: {root, kids(id) -> visible child ids, depth(id), box(id) -> {w, h}
// at a seed's size, answers(id) -> [{id, w, h}] (the Q/A graph: boxes beside their question; else [])}.
// ``twoSided``: seed questions to the right and the left of the root (else all to the right).
// Returns {at: Map(id -> {x, y, w, h, s, side}), bounds: {left, right, top, bottom}}.
function placeTree(tree, k, twoSided = true) {
  const at = new Map();
  if (!tree.root) return { at, bounds: { left: 0, right: 0, top: 0, bottom: 0 } };
  const size = new Map(); // id -> {s, w, h, foot (width with its answers), slot (row height)}
  const span = new Map();
  const order = []; // post-order: children before their parent
  const stack = [[tree.root, false]];
  while (stack.length) {
    const [id, done] = stack.pop();
    if (done) {
      order.push(id);
      continue;
    }
    stack.push([id, true]);
    for (const kid of tree.kids(id)) stack.push([kid, false]);
  }
  for (const id of order) {
    const s = levelScale(tree.depth(id), k);
    const box = tree.box(id);
    const answers = tree.answers(id);
    const answersH = answers.reduce((sum, a) => sum + a.h * s + ROW_GAP * s * 0.5, 0);
    const answersW = answers.length ? COLUMN_GAP * s * 0.6 + Math.max(...answers.map((a) => a.w)) * s : 0;
    const h = box.h * s;
    const slot = Math.max(h, answersH) + ROW_GAP * s;
    size.set(id, { s, w: box.w * s, h, foot: box.w * s + answersW, slot });
    const kidsSpan = tree.kids(id).reduce((sum, kid) => sum + span.get(kid), 0);
    span.set(id, Math.max(slot, kidsSpan));
  }

  // The seed questions split into a right and a left side of nearly equal height, in their order.
  const seeds = tree.kids(tree.root);
  const total = seeds.reduce((sum, id) => sum + span.get(id), 0);
  let cut = seeds.length;
  let best = Infinity;
  let running = 0;
  for (let i = 0; i <= seeds.length; i += 1) {
    const worse = Math.max(running, total - running);
    if (worse < best - 1e-9) {
      best = worse;
      cut = i;
    }
    if (i < seeds.length) running += span.get(seeds[i]);
  }
  if (seeds.length === 1 || !twoSided) cut = seeds.length;
  const sides = [
    { sign: 1, seeds: seeds.slice(0, cut) },
    { sign: -1, seeds: seeds.slice(cut) },
  ];

  const root = size.get(tree.root);
  for (const side of sides) {
    // Column widths of this side, by depth.
    const columns = new Map();
    const walk = [...side.seeds];
    while (walk.length) {
      const id = walk.pop();
      const d = tree.depth(id);
      columns.set(d, Math.max(columns.get(d) || 0, size.get(id).foot));
      walk.push(...tree.kids(id));
    }
    const inner = new Map(); // depth -> the column's inner edge (towards the root), as a distance
    let edge = root.w / 2;
    for (const d of [...columns.keys()].sort((a, b) => a - b)) {
      edge += COLUMN_GAP * levelScale(d, k);
      inner.set(d, edge);
      edge += columns.get(d);
    }
    let top = -side.seeds.reduce((sum, id) => sum + span.get(id), 0) / 2;
    const place = (id, from) => {
      const own = size.get(id);
      const kids = tree.kids(id);
      const kidsSpan = kids.reduce((sum, kid) => sum + span.get(kid), 0);
      const d = tree.depth(id);
      const x = side.sign * (inner.get(d) + own.w / 2);
      at.set(id, { x, y: from + span.get(id) / 2, w: own.w, h: own.h, s: own.s, side: side.sign });
      let next = from + (span.get(id) - kidsSpan) / 2;
      for (const kid of kids) {
        place(kid, next);
        next += span.get(kid);
      }
    };
    for (const id of side.seeds) {
      place(id, top);
      top += span.get(id);
    }
  }
  at.set(tree.root, { x: 0, y: 0, w: root.w, h: root.h, s: root.s, side: 0 });

  // Answers (the Q/A graph) beside their question, outwards; the root's below it.
  for (const [id, p] of [...at]) {
    const answers = tree.answers(id);
    let y = p.side === 0 ? p.y + p.h / 2 + ROW_GAP * p.s : p.y - (size.get(id).slot - ROW_GAP * p.s) / 2;
    for (const a of answers) {
      const w = a.w * p.s;
      const h = a.h * p.s;
      const x = p.side === 0 ? 0 : p.x + p.side * (p.w / 2 + COLUMN_GAP * p.s * 0.6 + w / 2);
      at.set(a.id, { x, y: y + h / 2, w, h, s: p.s, side: p.side, answer: true });
      y += h + ROW_GAP * p.s * 0.5;
    }
  }
  return { at, bounds: boundsOf(at.values()) };
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
// nothing comes to overlap), up to MAX_STRETCH, so it spans the canvas down as well as across.
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

// The layout for a canvas: the largest k (by bisection) whose fitted view keeps seed labels at
// SEED_TARGET_PX; ``readable`` says whether any k could (if not, the caller closes deeper branches).
// Both shapes are tried, two-sided and one-sided (a narrow canvas has no room for two sides): the
// readable one with the larger k wins, two-sided at a tie; with neither readable, the larger seeds.
function chooseLayout(tree, width, height) {
  const [both, right] = [pickK(tree, width, height, true), pickK(tree, width, height, false)];
  const seedPx = (p) => fitScale(p.bounds, width, height);
  const better =
    both.readable !== right.readable
      ? (both.readable ? both : right)
      : both.readable
        ? (right.k > both.k + 0.02 ? right : both)
        : (seedPx(right) > seedPx(both) ? right : both);
  return { ...stretchRows(better, width, height), k: better.k, readable: better.readable };
}

function pickK(tree, width, height, twoSided) {
  const readableAt = (placed) => fitScale(placed.bounds, width, height) * LEVEL_FONT * WORLD >= SEED_TARGET_PX;
  let placed = placeTree(tree, K_MAX, twoSided);
  if (readableAt(placed)) return { ...placed, k: K_MAX, readable: true };
  const low = placeTree(tree, K_MIN, twoSided);
  if (!readableAt(low)) return { ...low, k: K_MIN, readable: false };
  let [good, bad] = [K_MIN, K_MAX];
  placed = low;
  for (let i = 0; i < 10 && bad - good > 0.01; i += 1) {
    const mid = (good + bad) / 2;
    const trial = placeTree(tree, mid, twoSided);
    if (readableAt(trial)) {
      [good, placed] = [mid, trial];
    } else {
      bad = mid;
    }
  }
  return { ...placed, k: good, readable: true };
}
