// Drawing the question tree's nodes at the zoom of the moment (level of detail), for vis-network's
// custom shape. A node whose label would render under MIN_LABEL_PX on screen is drawn as a dot in its
// status colour, never as an empty box; zooming in turns dots into labelled boxes (tree_layout.js).
// Model text is drawn on the canvas with fillText: it never becomes HTML.
//
// Each frame keeps what it drew (paintedFrame): the labels with their size on screen, the dots, and
// any box drawn without its label, which the browser tests read (tests/browser/tree_checks.py).

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
// borderWidth, dashes, bold, ring}), ``scale()`` the zoom now, ``colors()`` the palette. Returns the vis
// ctxRenderer and the frame record.
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
        const r = Math.min(node.h / 2, node.w / 2, Math.max(3.5 / zoom, node.h / 5));
        ctx.beginPath();
        ctx.arc(x, y, r, 0, 2 * Math.PI);
        ctx.fillStyle = node.dot || node.border;
        ctx.fill();
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
      ctx.fillStyle = node.font;
      ctx.font = `${node.bold ? "600 " : ""}${fontPx}px ${FONT_FACE}`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      const line = fontPx * LINE_HEIGHT;
      const first = y - ((node.lines.length - 1) * line) / 2;
      node.lines.forEach((text, i) => ctx.fillText(text, x, first + i * line));
      if (node.lines.length) {
        frame.labels.push({ id, px: fontPx * zoom, x, y, w: node.w, h: node.h });
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
