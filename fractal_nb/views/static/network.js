// Live fractal graph: vis-network fed by snapshots and deltas from Python.
//
// vis-network itself is not in this file: Python sends the build that the pyvis
// package installed (once per page), and it is evaluated here as a CommonJS
// module. Every node text reaches the page as a vis `title` string, which
// vis-network shows with innerText, or through textContent below: never as HTML.

const VIS_KEY = "__fractalNbVis";

function loadVis(source) {
  if (!globalThis[VIS_KEY]) {
    const module = { exports: {} };
    // `define` shadowed so a page with RequireJS does not capture the UMD build.
    new Function("module", "exports", "define", source)(module, module.exports, undefined);
    globalThis[VIS_KEY] = module.exports;
  }
  return globalThis[VIS_KEY];
}

function setCounts(el, legend, counts, status) {
  el.dataset.nodeCount = String(counts.total ?? 0);
  el.dataset.gatedCount = String(counts.gated ?? 0);
  el.dataset.counts = JSON.stringify(counts);
  el.dataset.status = status;
  legend.replaceChildren();
  for (const [name, value] of Object.entries(counts)) {
    if (name === "total" || !value) continue;
    const chip = document.createElement("span");
    chip.className = `fractal-chip fractal-${name}`;
    chip.textContent = `${name} ${value}`;
    legend.appendChild(chip);
  }
  const state = document.createElement("span");
  state.className = "fractal-graph-status";
  state.textContent = `graph ${status}`;
  legend.appendChild(state);
}

function render({ model, el }) {
  el.classList.add("fractal-network");
  el.dataset.drawn = "0";
  el.dataset.seq = "0";
  el.dataset.selected = "";
  const legend = document.createElement("div");
  legend.className = "fractal-legend";
  const canvas = document.createElement("div");
  canvas.className = "fractal-canvas";
  canvas.style.height = model.get("height");
  el.append(legend, canvas);

  let vis = globalThis[VIS_KEY] || null;
  let network = null;
  let nodes = null;
  let edges = null;
  let seq = 0;
  let ready = false;
  let physicsLimit = 1000; // above it, physics is stabilised once then switched off
  let physicsOn = false;
  let waiting = false; // a snapshot has been asked for

  const ask = () => {
    waiting = true;
    model.send({ type: "hello", need_vis: vis === null });
  };

  function place(items, edgeItems) {
    // New nodes start beside their parent, so the picture grows instead of jumping.
    if (!network) return items;
    const parentOf = new Map();
    for (const e of edgeItems) if (e.edge_type === "parent_child") parentOf.set(e.to, e.from);
    return items.map((item) => {
      const parent = parentOf.get(item.id);
      if (item.x !== undefined || nodes.get(item.id) || !parent || !nodes.get(parent)) return item;
      const at = network.getPosition(parent);
      const angle = Math.random() * 2 * Math.PI;
      return { ...item, x: at.x + 60 * Math.cos(angle), y: at.y + 60 * Math.sin(angle) };
    });
  }

  function draw(message) {
    nodes = new vis.DataSet(message.nodes);
    edges = new vis.DataSet(message.edges);
    network = new vis.Network(canvas, { nodes, edges }, message.options);
    physicsOn = message.options.physics.enabled;
    el.visNetwork = network; // for the browser console (and the browser tests)
    network.once("afterDrawing", () => {
      el.dataset.drawn = "1";
    });
    network.on("stabilizationIterationsDone", () => {
      if (nodes.length > physicsLimit) {
        network.setOptions({ physics: { enabled: false } });
        physicsOn = false;
      }
    });
    network.on("click", (params) => {
      const id = params.nodes.length ? String(params.nodes[0]) : "";
      el.dataset.selected = id;
      model.set("selected", id);
      model.save_changes();
    });
  }

  function apply(message) {
    physicsLimit = message.physics_limit;
    if (!network) {
      draw(message);
    } else {
      const keep = new Set(message.nodes.map((n) => n.id));
      nodes.remove(nodes.getIds().filter((id) => !keep.has(id)));
      const keepEdges = new Set(message.edges.map((e) => e.id));
      edges.remove(edges.getIds().filter((id) => !keepEdges.has(id)));
      edges.update(message.edges);
      nodes.update(place(message.nodes, message.edges));
    }
    seq = message.seq;
    ready = true;
    waiting = false;
  }

  function update(message) {
    // Edges first, so a new node finds its parent edge and starts beside it.
    edges.update(message.edges);
    nodes.update(place(message.nodes, message.edges));
    if (physicsOn && nodes.length > physicsLimit) {
      network.stabilize(100);
    }
    seq = Math.max(seq, message.seq);
  }

  function onMessage(message) {
    if (message.type === "vis") {
      vis = loadVis(message.source);
      return;
    }
    if (!vis) return;
    if (message.type === "snapshot") {
      apply(message);
    } else if (message.type === "delta") {
      if (!ready) return; // the snapshot asked for covers it
      if (message.since > seq) {
        if (!waiting) ask(); // missed a delta: start over from a snapshot
        return;
      }
      update(message);
    } else {
      return;
    }
    el.dataset.seq = String(seq);
    el.dataset.edgeCount = String(edges.length);
    setCounts(el, legend, message.counts, message.status);
  }

  const onSelected = () => {
    const id = model.get("selected");
    el.dataset.selected = id || "";
    if (network && id && nodes.get(id)) network.selectNodes([id]);
  };
  model.on("msg:custom", onMessage);
  model.on("change:selected", onSelected);
  ask();
  return () => {
    model.off("msg:custom", onMessage);
    model.off("change:selected", onSelected);
    if (network) network.destroy();
  };
}

export default { render };
