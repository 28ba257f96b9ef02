// The outline beside the tree (network.js): question → synthesis → sub-questions, each entry filling its
// sub-questions when it opens, so a tree of thousands costs only what the reader opens. Model text goes
// through textContent only.
//
// ``box`` is the outline's element; ``view`` what it reads of the view: {questions (id -> question item),
// childrenOf(id), root(), selected(), matched(), select(id, focus)}.
function createOutline(box, view) {
  function entryOf(id) {
    const q = view.questions.get(id);
    const entry = element("details");
    entry.dataset.id = id;
    const summary = element("summary");
    summary.append(element("span", `fractal-chip fractal-${q.status}`, q.status));
    if (q.weak) summary.append(" ", element("span", "fractal-chip fractal-weak", WEAK));
    if (q.unsupported) summary.append(" ", element("span", "fractal-chip fractal-unsupported", UNSUPPORTED));
    if (q.track) summary.append(" ", element("span", "fractal-chip fractal-track", `track: ${q.track}`));
    summary.append(document.createTextNode(` ${q.label.replace(/\n/g, " ")}`));
    summary.addEventListener("click", () => view.select(id, true));
    entry.appendChild(summary);
    const finding = q.synthesis || (q.answers.length ? q.answers[q.answers.length - 1].text : "");
    if (finding) entry.appendChild(element("div", "fractal-finding", clipText(finding, 700)));
    const kids = view.childrenOf(id);
    if (kids.length) {
      entry.addEventListener("toggle", () => {
        if (entry.open && !entry.dataset.filled) {
          entry.dataset.filled = "1";
          for (const kid of kids) entry.appendChild(entryOf(kid));
        }
      });
    }
    return entry;
  }

  const summaryOf = (id) => box.querySelector(`details[data-id="${CSS.escape(id)}"] > summary`);

  // The search's matches, marked.
  function markMatches() {
    for (const s of box.querySelectorAll("summary.fractal-match")) s.classList.remove("fractal-match");
    for (const id of view.matched()) summaryOf(id)?.classList.add("fractal-match");
  }

  // The selected question, marked.
  function mark(id) {
    for (const s of box.querySelectorAll("summary.fractal-current")) s.classList.remove("fractal-current");
    if (id) summaryOf(id)?.classList.add("fractal-current");
  }

  // Built again (the questions changed), keeping the entries the reader had open.
  function render() {
    const root = view.root();
    const openIds = new Set([...box.querySelectorAll("details[open]")].map((d) => d.dataset.id));
    box.replaceChildren(element("h5", "", "Outline: questions and their syntheses"));
    if (!root || !view.questions.has(root)) return;
    const top = entryOf(root);
    box.appendChild(top);
    const reopen = (entry) => {
      if (entry.dataset.id === root || openIds.has(entry.dataset.id)) {
        entry.open = true;
        entry.dispatchEvent(new Event("toggle"));
        for (const child of entry.querySelectorAll(":scope > details")) reopen(child);
      }
    };
    reopen(top);
    mark(view.selected());
    markMatches();
  }

  // Open the outline down to ``id``.
  function openTo(id) {
    if (box.hidden || !view.questions.has(id)) return;
    const path = [];
    for (let q = view.questions.get(id); q && q.parent !== null; q = view.questions.get(q.parent)) path.unshift(q.parent);
    for (const above of path) {
      const entry = box.querySelector(`details[data-id="${CSS.escape(above)}"]`);
      if (!entry) return;
      if (!entry.open) {
        entry.open = true;
        entry.dispatchEvent(new Event("toggle"));
      }
    }
  }

  return { render, openTo, markMatches, mark };
}
