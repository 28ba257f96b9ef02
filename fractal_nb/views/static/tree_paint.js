// Drawing the question tree's nodes at the zoom of the moment (level of detail), for vis-network's
// custom shape. A node whose label would render under MIN_LABEL_PX on screen is drawn as a dot in its
// status colour and shape (dotShape), never as an empty box; zooming in turns dots into labelled boxes
// (tree_layout.js). Model text is drawn on the canvas with fillText: it never becomes HTML.
//
// Each frame keeps what it drew (paintedFrame): the labels with their size on screen, the dots, and
// any box drawn without its label, which the browser tests read (tests/browser/tree_checks.py).

// A dot's shape by the question's status, so that statuses of one colour family tell apart at dot size
// (issue 38): open is hollow and answered filled, gated a diamond and failed a cross, pruned a slashed
// ring. The legend's chips show the same signs (network.css, .fractal-chip::before).
const DOT_SHAPES = {
  open: "ring",
  gated: "diamond",
  failed: "cross",
  pruned: "slashed",
};
function dotShape(status) {
  return DOT_SHAPES[status] || "disc";
}

// One dot of radius ``r`` (the disc's; the other shapes as large to the eye), inside the node's box of
// half-size ``half``: a ring and a slashed ring filled with the canvas's colour, so no edge shows through.
function drawDot(ctx, shape, x, y, r, half, zoom, color, background) {
  ctx.beginPath();
  if (shape === "diamond") {
    const d = Math.min(r * 1.3, half);
    ctx.moveTo(x, y - d);
    ctx.lineTo(x + d, y);
    ctx.lineTo(x, y + d);
    ctx.lineTo(x - d, y);
    ctx.closePath();
    ctx.fillStyle = color;
    ctx.fill();
    return;
  }
  if (shape === "cross") {
    const d = Math.min(r * 0.95, half * 0.75);
    ctx.moveTo(x - d, y - d);
    ctx.lineTo(x + d, y + d);
    ctx.moveTo(x + d, y - d);
    ctx.lineTo(x - d, y + d);
    ctx.lineWidth = Math.max(d * 0.75, 1.5 / zoom);
    ctx.lineCap = "round";
    ctx.strokeStyle = color;
    ctx.stroke();
    ctx.lineCap = "butt";
    return;
  }
  ctx.arc(x, y, r, 0, 2 * Math.PI);
  if (shape === "disc") {
    ctx.fillStyle = color;
    ctx.fill();
    return;
  }
  // A ring: the stroke inside the dot's radius, so it is no larger than a disc.
  const line = Math.max(r * 0.4, 1.2 / zoom);
  ctx.fillStyle = background;
  ctx.fill();
  ctx.beginPath();
  ctx.arc(x, y, Math.max(r - line / 2, line / 2), 0, 2 * Math.PI);
  ctx.lineWidth = line;
  ctx.strokeStyle = color;
  ctx.stroke();
  if (shape === "slashed") {
    const d = r * 0.75;
    ctx.beginPath();
    ctx.moveTo(x - d, y + d);
    ctx.lineTo(x + d, y - d);
    ctx.stroke();
  }
}

function roundedBox(ctx, x, y, w, h, r) {
  const left = x - w / 2;
  const top = y - h / 2;
  ctx.beginPath();
  ctx.moveTo(left + r, top);
  ctx.arcTo(left + w, top, left + w, top + h, r);
  ctx.arcTo(left + w, top + h, left, top + h, r);
  ctx.arcTo(left, top + h, left, top, r);
  ctx.arcTo(left, top, left + w, top, r);
  ctx.closePath();
}

// A painter for one view: ``look(id)`` gives what a node looks like ({lines, w, h, s, fill, border, font,
// borderWidth, dashes, bold, ring, dot (its colour), dotShape, whole: {lines, font} for a short label,
// its whole label and the font that fits it in the box}), ``scale()`` the zoom now, ``colors()`` the
// palette. Returns the vis ctxRenderer and the frame record.
function createPainter({ look, scale, colors }) {
  let frame = { labels: [], dots: [], bare: [] };

  function renderer({ ctx, id, x, y, state }) {
    const node = look(id);
    if (!node) return { nodeDimensions: { width: 1, height: 1 } };
    const zoom = scale();
    const fontPx = LEVEL_FONT * node.s; // world px
    const labelled = fontPx * zoom >= MIN_LABEL_PX;
    const palette = colors();
    const drawNode = () => {
      const chosen = state.selected || state.hover;
      if (!labelled) {
        // A dot: never larger than the box it stands for (boxes never overlap), at least visible.
        const half = Math.min(node.h / 2, node.w / 2);
        const r = Math.min(half, Math.max(3.5 / zoom, node.h / 5));
        drawDot(ctx, node.dotShape || "disc", x, y, r, half, zoom, node.dot || node.border, palette.bg);
        if (node.ring || chosen) {
          ctx.lineWidth = 2 / zoom;
          ctx.strokeStyle = node.ring ? palette.accent : palette.text;
          ctx.beginPath();
          ctx.arc(x, y, r + 2.5 / zoom, 0, 2 * Math.PI);
          ctx.stroke();
        }
        frame.dots.push(id);
        return;
      }
      roundedBox(ctx, x, y, node.w, node.h, 5 * node.s);
      ctx.fillStyle = node.fill;
      ctx.fill();
      ctx.setLineDash((node.dashes || []).map((v) => v * node.s));
      ctx.lineWidth = (chosen ? node.borderWidth + 1 : node.borderWidth) * node.s;
      ctx.strokeStyle = chosen ? palette.text : node.border;
      ctx.stroke();
      ctx.setLineDash([]);
      if (node.ring) {
        // A search match: a ring in the accent colour around the box.
        roundedBox(ctx, x, y, node.w + 8 * node.s, node.h + 8 * node.s, 8 * node.s);
        ctx.lineWidth = 3 * node.s;
        ctx.strokeStyle = palette.accent;
        ctx.stroke();
      }
      // A short label shows its whole label instead once that reads in the same box (``whole``).
      const whole = node.whole && node.whole.font * zoom >= MIN_LABEL_PX ? node.whole : null;
      const [lines, font] = whole ? [whole.lines, whole.font] : [node.lines, fontPx];
      ctx.fillStyle = node.font;
      ctx.font = `${node.bold ? "600 " : ""}${font}px ${FONT_FACE}`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      const line = font * LINE_HEIGHT;
      const first = y - ((lines.length - 1) * line) / 2;
      lines.forEach((text, i) => ctx.fillText(text, x, first + i * line));
      if (lines.length) {
        frame.labels.push({ id, px: font * zoom, x, y, w: node.w, h: node.h, lines });
      } else {
        frame.bare.push(id);
      }
    };
    return { drawNode, nodeDimensions: { width: node.w, height: node.h } };
  }

  return {
    renderer,
    start() {
      frame = { labels: [], dots: [], bare: [] };
    },
    frame: () => frame,
  };
}
