"""A result as the exported page and the panel's Result tab show it: the conclusion and its chain first.

``report()``'s HTML (``FractalResult._repr_html_``) lists every gap above the synthesis
chain, and the chain folded: on a graph cut short, fifty gaps stood between the
conclusion (the root's synthesis, the summary) and the syntheses it rests on. Here the
result leads with the same status, conclusion, findings and questions waiting for the
person, then the synthesis chain open (root first), then the gaps folded under their
count (docs/architecture/faces.md, "The live view's protocol", Failures). Every model
string is escaped.
"""

from __future__ import annotations

import html
from dataclasses import replace
from typing import TYPE_CHECKING

from ..results.result import node_link

if TYPE_CHECKING:
    from ..results.result import FractalResult


def result_html(result: FractalResult) -> str:
    """``result`` as HTML: conclusion, findings and waiting questions, the chain open, the gaps folded.

    >>> from fractal_nb import Exploration, SimulatedLLM
    >>> with Exploration.create("Why do tides turn?", intensity="pulse", llm=SimulatedLLM()) as ex:
    ...     _ = ex.step(12)
    ...     shown = result_html(ex.preview())
    >>> shown.index("fractal-chain") < shown.index("fractal-gaps"), "<details class='fractal-gaps'>" in shown
    (True, True)
    """
    head = replace(result, synthesis_chain=[], gaps=[])._repr_html_()
    return head + chain_html(result) + gaps_html(result.gaps)


def chain_html(result: FractalResult) -> str:
    """The synthesis chain, root first, each synthesis under its question, open ('' for none)."""
    if not result.synthesis_chain:
        return ""
    items = "".join(
        f"<li style='margin-left:{link.depth * 1.2:.1f}em'><b>{html.escape(link.question)}</b> "
        f"{'<i>(degraded)</i> ' if link.degraded else ''}{'<i>(weak)</i> ' if link.weak else ''}"
        f"{html.escape(link.synthesis)}{node_link(link.node_id)}</li>"
        for link in result.synthesis_chain
    )
    return (
        f"<details class='fractal-chain' open><summary><b>Synthesis chain</b> "
        f"({len(result.synthesis_chain)})</summary><ul>{items}</ul></details>"
    )


def gaps_html(gaps: list[str]) -> str:
    """The gaps folded under their count ('' for none): what is left open, after the chain.

    >>> gaps_html(["<b>x</b>"])
    "<details class='fractal-gaps'><summary><b>Gaps</b> (1)</summary><ul><li>&lt;b&gt;x&lt;/b&gt;</li>..."
    """
    if not gaps:
        return ""
    items = "".join(f"<li>{html.escape(gap)}</li>" for gap in gaps)
    return (
        f"<details class='fractal-gaps'><summary><b>Gaps</b> ({len(gaps)})</summary>"
        f"<ul>{items}</ul></details>"
    )
