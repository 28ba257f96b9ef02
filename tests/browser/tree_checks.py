"""Measurements of the question tree in a page: what a reader would see, computed from vis-network."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

NETWORK = ".fractal-network"
SHOTS = Path(os.environ.get("FRACTAL_NB_SCREENSHOTS", "screenshots"))  # for a person to look at

# Node boxes in page pixels, from the view's own layout (network.js ``frame``: vis-network keeps no
# bounding box for the custom shape the tree is drawn with), and the canvas's own box.
BOXES = f"""() => {{
    const el = document.querySelector('{NETWORK}');
    el.visNetwork.redraw();
    const drawn = el.fractalFrame();
    return {{boxes: drawn.boxes, canvas: drawn.canvas, scale: drawn.scale}};
}}"""


def boxes(tab: Any) -> dict[str, Any]:
    return dict(tab.evaluate(BOXES))


def outside(measured: dict[str, Any], slack: float = 1.0) -> list[str]:
    """Nodes not wholly inside the canvas."""
    c = measured["canvas"]
    return [
        b["id"]
        for b in measured["boxes"]
        if b["left"] < c["left"] - slack
        or b["top"] < c["top"] - slack
        or b["right"] > c["right"] + slack
        or b["bottom"] > c["bottom"] + slack
    ]


def overlapping(measured: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of node boxes (labels inside them) that overlap, found by a sweep along x."""
    found = []
    ordered = sorted(measured["boxes"], key=lambda b: b["left"])
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b["left"] >= a["right"]:
                break
            if b["top"] < a["bottom"] and a["top"] < b["bottom"]:
                found.append((a["id"], b["id"]))
    return found


def _luminance(color: str) -> float:
    """Relative luminance of an ``rgb(r, g, b)`` colour (as a browser computes it)."""
    channels = [int(v) / 255 for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(foreground: str, background: str) -> float:
    """The WCAG contrast ratio of two ``rgb(...)`` colours."""
    light, dark = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


STATUSES = ("open", "gated", "claimed", "answered", "synthesized", "saturated", "failed", "pruned", "answer")

PALETTE = f"""() => {{
    const el = document.querySelector('{NETWORK}'), style = getComputedStyle(el);
    const probe = document.createElement('span');
    el.appendChild(probe);
    const read = (name) => {{  // any CSS colour ('white', '#111') as the browser's rgb(...)
        probe.style.color = style.getPropertyValue(name).trim();
        return getComputedStyle(probe).color;
    }};
    const result = {{
        text: read('--fractal-text'), bg: read('--fractal-bg'),
    }};
    for (const s of {list(STATUSES)!r}) {{
        result[s] = [read(`--fractal-${{s}}-font`), read(`--fractal-${{s}}-fill`)];
    }}
    probe.remove();
    return result;
}}"""


def low_contrast(tab: Any) -> dict[str, float]:
    """Text/fill pairs of the view (node labels, chips, the page's text) under 4.5:1."""
    colors = tab.evaluate(PALETTE)
    pairs = {s: colors[s] for s in STATUSES}
    pairs["text"] = [colors["text"], colors["bg"]]
    ratios = {name: contrast(fg, bg) for name, (fg, bg) in pairs.items()}
    return {name: round(r, 2) for name, r in ratios.items() if r < 4.5}


def screenshot(tab: Any, name: str, folder: Path = SHOTS) -> Path:
    """A full-page screenshot in ``folder`` (``$FRACTAL_NB_SCREENSHOTS``), for a person to look at."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    tab.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000, f"{path} is (nearly) blank"
    return path


# Each element's text colour and the first opaque background behind it, as the browser computes them.
TEXT_COLOURS = """(selector) => [...document.querySelectorAll(selector)]
  .filter((e) => e.offsetParent).map((e) => {
    let back = e, bg = 'rgba(0, 0, 0, 0)';
    while (back && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
        bg = getComputedStyle(back).backgroundColor;
        back = back.parentElement;
    }
    if (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent') bg = 'rgb(255, 255, 255)';
    return [e.className || e.tagName, getComputedStyle(e).color, bg];
})"""


def low_text_contrast(tab: Any, selector: str) -> list[tuple[str, float]]:
    """Elements matching ``selector`` whose text is under 4.5:1 against what is behind it."""
    found = [(name, contrast(fg, bg)) for name, fg, bg in tab.evaluate(TEXT_COLOURS, selector)]
    assert found, f"nothing matches {selector}"
    return [(name, round(ratio, 2)) for name, ratio in found if ratio < 4.5]


def frame(tab: Any) -> dict[str, Any]:
    """What the view's last frame drew (network.js ``frame``): labels with their size on screen and
    their boxes in page pixels, dots, boxes drawn without a label, the share of the canvas used."""
    tab.wait_for_timeout(50)  # a frame after the last change (vis draws on the next animation frame)
    tab.evaluate(f"() => document.querySelector('{NETWORK}').visNetwork.redraw()")
    return dict(tab.evaluate(f"() => document.querySelector('{NETWORK}').fractalFrame()"))


def label_overlaps(drawn: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of drawn labels whose boxes overlap."""
    return overlapping({"boxes": drawn["labels"]})


def seeds_unlabelled(drawn: dict[str, Any]) -> int:
    """How many seed questions (depth 1) the frame drew without their label (as dots, or not at all)."""
    labelled = sum(1 for label in drawn["labels"] if label["depth"] == 1)
    return int(drawn["depths"].get("1", 0)) - labelled


def seeds_cut(drawn: dict[str, Any]) -> list[tuple[str, str]]:
    """Seed questions whose drawn label does not hold their whole label's words, in order (a short label
    clipped them): each with the text drawn."""
    cut = []
    for label in drawn["labels"]:
        if label["depth"] != 1:
            continue
        shown = " ".join(line for line in label["lines"] if not line.startswith("▸ "))
        if shown.split() != label["label"].split():
            cut.append((label["id"], shown))
    return cut


MIN_LABEL_PX = 11  # the least size a label is drawn at (static/tree_layout.js MIN_LABEL_PX; issue 38)


def readable(drawn: dict[str, Any]) -> list[tuple[str, float]]:
    """Drawn labels under MIN_LABEL_PX on screen (the view's own scale times the label's font)."""
    return [(label["id"], round(label["px"], 2)) for label in drawn["labels"] if label["px"] < MIN_LABEL_PX]
