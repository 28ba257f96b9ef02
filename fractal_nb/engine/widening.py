"""A later turn's widening: the model poses seed questions the graph does not ask yet.

The call goes through the run's :class:`~fractal_nb.engine.calls.ModelCaller`, so the graph's
budgets hold before it is made (docs/architecture/engine.md, "The engine loop"); the store hangs the
new questions under the root's answer (store/turn_requests.py ``widen``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..llm.schemas import WidenPlan
from ..prompts import chat
from ..text import clip, normalize
from ..vocabulary import NodeType

if TYPE_CHECKING:
    from .run_state import RunState

WIDEN_WORKER = "widen"


def propose_seed_questions(run: RunState, n: int) -> list[str]:
    """Up to ``n`` new seed questions from the model, repeats of current questions left out.

    Raises the model's :class:`~fractal_nb.LLMError` (a spent budget's
    ``BudgetExhaustedError`` among them) when no plan comes back; nothing is written.
    """
    snapshot = run.local.get_snapshot(run.graph_id)
    current = [
        n_
        for n_ in snapshot["nodes"]
        if n_["node_type"] == NodeType.QUESTION and n_.get("superseded_turn") is None
    ]
    existing = [q["text"] for q in current if q["depth"] == 1]
    run.arm()  # admitted against the ledger as it is now
    plan = run.call(
        WidenPlan,
        chat(
            "widen",
            seed=clip(run.seed, 500),
            existing="\n".join(f"- {clip(q, 300)}" for q in existing) or "(none)",
            n=n,
        ),
        node_id=run.root_id,
        worker=WIDEN_WORKER,
    )
    asked = {normalize(q["text"]) for q in current}
    kept: dict[str, str] = {}
    for question in plan.questions:
        key = normalize(question)
        if key not in asked:
            kept.setdefault(key, question.strip())
    return list(kept.values())[:n]
