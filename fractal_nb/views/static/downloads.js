// Download buttons (views/downloads.py): a click asks Python for a file; Python answers with its bytes
// as the message's one buffer; the page hands them to the browser as a Blob behind an <a download>.
// Nothing is written on the server. Text reaches the page through textContent only.

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

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "fractal-downloads";
  const title = document.createElement("span");
  title.className = "fractal-downloads-title";
  title.textContent = "Download";
  const buttons = document.createElement("div");
  buttons.className = "fractal-downloads-buttons";
  buttons.setAttribute("role", "group");
  buttons.setAttribute("aria-label", "Download the exploration");
  const status = document.createElement("span");
  status.className = "fractal-downloads-status";
  status.setAttribute("role", "status");
  status.setAttribute("aria-live", "polite");
  root.append(title, buttons, status);
  el.appendChild(root);

  const pending = new Map(); // request number → its button
  let requests = 0;
  const say = (text, state) => {
    status.textContent = text;
    status.dataset.state = state;
  };

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

export default { render };
