// The question tree view's parts that hold no state (network.js composes them into the view): the
// statuses and marks it shows, loading vis-network's build once per page, DOM elements, the palette read
// from CSS (network.css), vis-network's options and a question's hover text. Model text goes through
// textContent or vis `title` strings (shown with innerText): never HTML.

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

// ``text`` in at most ``count`` lines of ``chars`` characters: wrapped at spaces, the last line holding
// the rest of the text, clipped with "…" when it goes on (so a one-line label is as full as it can be).
function shortLines(text, chars, count) {
  const lines = [];
  let rest = text.trim();
  while (lines.length < count - 1 && rest.length > chars) {
    const cut = rest.lastIndexOf(" ", chars);
    const at = cut > 0 ? cut : chars;
    lines.push(rest.slice(0, at));
    rest = rest.slice(at).trim();
  }
  lines.push(clipText(rest, chars));
  return lines;
}

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
