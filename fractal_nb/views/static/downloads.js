// Download buttons (views/downloads.py): a click asks Python for a file; Python answers with its bytes
// as the message's one buffer; the page hands them to the browser as a Blob behind an <a download>.
// Nothing is written on the server. Text reaches the page through textContent only.
// The exported page (views/html_export.py) has no kernel: offerDownloads builds its files in the
// browser from the tables the page carries.

const KEEP_URL_MS = 60_000; // an object URL revoked at once may cancel the save in some browsers

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

function save(name, mime, buffer) {
  const blob = new Blob([buffer], { type: mime || "application/octet-stream" });
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), KEEP_URL_MS);
}

// The bar both faces share: a title, the buttons' row and a status line; say() writes the status.
function bar(el, label) {
  const root = document.createElement("div");
  root.className = "fractal-downloads";
  const title = document.createElement("span");
  title.className = "fractal-downloads-title";
  title.textContent = "Download";
  const buttons = document.createElement("div");
  buttons.className = "fractal-downloads-buttons";
  buttons.setAttribute("role", "group");
  buttons.setAttribute("aria-label", label);
  const status = document.createElement("span");
  status.className = "fractal-downloads-status";
  status.setAttribute("role", "status");
  status.setAttribute("aria-live", "polite");
  root.append(title, buttons, status);
  el.appendChild(root);
  const say = (text, state) => {
    status.textContent = text;
    status.dataset.state = state;
  };
  return { buttons, say };
}

function render({ model, el }) {
  const { buttons, say } = bar(el, "Download the exploration");
  const pending = new Map(); // request number → its button
  let requests = 0;

  const draw = () => {
    const labels = model.get("labels") || {};
    buttons.replaceChildren();
    for (const kind of model.get("kinds") || []) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "fractal-download";
      button.dataset.kind = kind;
      button.textContent = labels[kind] || kind;
      button.addEventListener("click", () => {
        requests += 1;
        pending.set(requests, button);
        button.disabled = true;
        say(`Preparing ${button.textContent}…`, "busy");
        model.send({ type: "download", kind, request: requests });
      });
      buttons.appendChild(button);
    }
  };

  const onMessage = (message, buffers) => {
    if (!message || (message.type !== "file" && message.type !== "refused")) return;
    const button = pending.get(message.request);
    pending.delete(message.request);
    if (button) button.disabled = false;
    if (message.type === "refused") {
      say(message.message, "error");
      return;
    }
    const data = buffers && buffers[0];
    if (!data) {
      say(`${message.name}: no data arrived`, "error");
      return;
    }
    save(message.name, message.mime, data);
    say(`${message.name} (${sizeText(message.size)})`, "ok");
  };

  draw();
  model.on("change:kinds", draw);
  model.on("change:labels", draw);
  model.on("msg:custom", onMessage);
  return () => {
    model.off("change:kinds", draw);
    model.off("change:labels", draw);
    model.off("msg:custom", onMessage);
  };
}

// -- the exported page: files built here, from the page's own data ------------------------------------

// A CSV field as pandas' to_csv writes it (views/downloads.py's CSV): empty for a missing value,
// True/False for a flag, quoted when it holds a comma, a quote or a line break.
function csvField(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "boolean") return value ? "True" : "False";
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function csvText(columns, rows) {
  const lines = [columns.map(csvField).join(",")];
  for (const row of rows) lines.push(columns.map((column) => csvField(row[column])).join(","));
  return `${lines.join("\n")}\n`;
}

function jsonText(columns, rows) {
  const ordered = rows.map((row) => Object.fromEntries(columns.map((column) => [column, row[column] ?? null])));
  return `${JSON.stringify(ordered, null, 1)}\n`;
}

// The page's questions table, from the graph's items (store/question_items.py): the answer is the
// latest, as the page holds it (over 2,000 characters cut, "…"); the reason is the failure's or the
// stored status reason.
const QUESTION_COLUMNS = ["node_id", "parent_id", "depth", "status", "question", "answer", "reason", "weak"];

function questionRows(items) {
  return items.map((item) => ({
    node_id: item.id,
    parent_id: item.parent ?? null,
    depth: item.depth,
    status: item.status,
    question: item.text,
    answer: item.answers && item.answers.length ? item.answers[item.answers.length - 1].text : null,
    reason: item.error ?? item.reason ?? null,
    weak: Boolean(item.weak),
  }));
}

const FORMATS = [
  { format: "csv", label: "CSV", mime: "text/csv;charset=utf-8", text: csvText },
  { format: "json", label: "JSON", mime: "application/json;charset=utf-8", text: jsonText },
];

// The exported page's downloads: for each table a caption with its row count and a CSV and a JSON
// button, then the report as Markdown. spec: {stem, questions, tables: {syntheses, gaps}, report}
// (html_export.downloads_spec); questions(): the graph's items, read again on each click.
export function offerDownloads(el, spec, questions) {
  const { buttons, say } = bar(el, "Download the graph");
  const offer = (title, count, files) => {
    const group = document.createElement("span");
    group.className = "fractal-downloads-group";
    group.setAttribute("role", "group");
    const caption = document.createElement("span");
    caption.className = "fractal-downloads-caption";
    caption.textContent = count === null ? title : `${title} ${count.toLocaleString("en")}`;
    group.setAttribute("aria-label", caption.textContent);
    group.appendChild(caption);
    for (const file of files) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "fractal-download";
      button.textContent = file.label;
      button.setAttribute("aria-label", `${title} as ${file.label}`);
      button.addEventListener("click", () => {
        const bytes = new TextEncoder().encode(file.text());
        save(file.name, file.mime, bytes);
        say(`${file.name} (${sizeText(bytes.length)})`, "ok");
      });
      group.appendChild(button);
    }
    buttons.appendChild(group);
  };
  const table = (key, title, columns, rows, count) =>
    offer(
      title,
      count,
      FORMATS.map(({ format, label, mime, text }) => ({
        name: `${spec.stem}-${key}.${format}`,
        label,
        mime,
        text: () => text(columns, rows()),
      })),
    );
  const { syntheses, gaps } = spec.tables; // a page without a result carries the questions only
  if (syntheses) table("syntheses", "Syntheses", syntheses.columns, () => syntheses.rows, syntheses.rows.length);
  table("questions", "Questions", QUESTION_COLUMNS, () => questionRows(questions()), spec.questions);
  if (gaps) table("gaps", "Gaps", gaps.columns, () => gaps.rows, gaps.rows.length);
  if (typeof spec.report === "string") {
    const report = { name: `${spec.stem}-report.md`, label: "Markdown", mime: "text/markdown;charset=utf-8" };
    offer("Report", null, [{ ...report, text: () => spec.report }]);
  }
}

export default { render };
