// A question's text as the view shows it: clipped, wrapped into a label, split into search words.
// Part of the view's module (views/assets.py view_script), before network.js.

function clipText(text, limit) {
  if (!text) return "";
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

const LABEL_WIDTH = 26; // characters per label line
const LABEL_LINES = 3;
// A tag the model or the simulator puts before its text ("[simulated] ..."): noise in a label.
const TAG = /^\s*\[[^\]\n]{1,40}\]\s*/;

// A question's label: its tag dropped, wrapped at spaces to LABEL_LINES lines of at most LABEL_WIDTH
// characters (a longer word is cut), " …" ending the last line when the text goes on.
function questionLabel(text) {
  const words = (text.replace(TAG, "").trim() || text.trim()).split(/\s+/).filter(Boolean);
  const lines = [];
  let line = "";
  for (let word of words) {
    if (line && line.length + 1 + word.length <= LABEL_WIDTH) {
      line += ` ${word}`;
      continue;
    }
    if (line) lines.push(line);
    while (word.length > LABEL_WIDTH) {
      lines.push(word.slice(0, LABEL_WIDTH));
      word = word.slice(LABEL_WIDTH);
    }
    line = word;
  }
  if (line) lines.push(line);
  if (lines.length <= LABEL_LINES) return lines.join("\n");
  const kept = lines.slice(0, LABEL_LINES);
  let last = kept[LABEL_LINES - 1];
  while (last.length + 2 > LABEL_WIDTH) last = last.includes(" ") ? last.slice(0, last.lastIndexOf(" ")) : last.slice(0, LABEL_WIDTH - 2);
  kept[LABEL_LINES - 1] = `${last} …`;
  return kept.join("\n");
}

// Lower-case words, punctuation and quotes dropped: what a search compares ("tram line' cost" and
// "Tram line cost" give the same words).
function searchWords(text) {
  return (text || "").toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "").split(/[^\p{L}\p{N}]+/u).filter(Boolean);
}
