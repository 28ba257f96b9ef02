"""One attempt at a seed plan, shared by the seeds of the strategies (engine/strategies/).

A seed phase asks for its plan up to :data:`SEED_ATTEMPTS` times: a spent
budget ends it at once (no call was made, and none will be: the budget's stop),
a model failure is kept and the next attempt made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..errors import BudgetExhaustedError, LLMError
from ..llm.protocol import Message
from ..results.result import StepRecord

if TYPE_CHECKING:
    from .run_state import RunState

SEED_ATTEMPTS = 3
SEED_WORKER = "seed"
"""The worker name the seed phase writes the root's answer under, and logs its calls as."""

T = TypeVar("T", bound=BaseModel)


def attempt(run: RunState, schema: type[T], messages: list[Message]) -> T | StepRecord | LLMError:
    """The plan, or the budget's stop as the root's StepRecord, or the model's failure to try again after."""
    try:
        return run.call(schema, messages, node_id=run.root_id, worker=SEED_WORKER)
    except BudgetExhaustedError as exc:  # no call was made, and none will be: the budget's stop
        return StepRecord(
            run.root_id,
            SEED_WORKER,
            run.seed,
            error=f"{type(exc).__name__}: {exc}",
            budget_reached=str(exc),
        )
    except LLMError as exc:
        return exc


def failed(exc: LLMError) -> str:
    """A failed attempt as the root's error text."""
    return f"{type(exc).__name__}: {exc}"


def write_plan(
    run: RunState, decomposition: str, metadata: dict[str, Any], sub_questions: Sequence[str | dict[str, Any]]
) -> StepRecord:
    """Answer the root with the plan and hang its questions (or tracks) under it; wake the workers."""
    written = run.local.add_answer(
        run.graph_id,
        run.root_id,
        decomposition,
        owner=SEED_WORKER,
        metadata=metadata,
        sub_questions=list(sub_questions),
    )
    run.announce_work()
    return StepRecord(
        run.root_id,
        SEED_WORKER,
        run.seed,
        answer_id=written["answer"]["node_id"],
        sub_questions=tuple(q["node_id"] for q in written["sub_questions"]),
    )
