"""The engine's front door: what the facade and the faces use of it.

See docs/architecture/engine.md, "The engine loop".

:func:`run` and :func:`step` own a run's limits, seed phase, dispatch and
outcome; :func:`work` is a remote worker's loop; :func:`harvest` and
:func:`preview` build the result. Nothing above the engine imports its modules
directly.
"""

from __future__ import annotations

from .caller_tools import CallerTool, caller_tools
from .calls import ModelCaller
from .dispatcher import Clock, RealClock, ScaledClock, WorkerReport
from .gaps import current, gap_rows
from .grounding import checked_by, same_fact
from .limits import Limits, spend_tokens
from .phases import harvest, preview
from .run_state import RunState
from .runs import LEFTOVERS, Ran, run, seed, step, work
from .strategies import StrategyPart, register, strategy_names, strategy_part
from .strategies.thinkon import own_prompts
from .widening import propose_seed_questions

__all__ = [
    "LEFTOVERS",
    "CallerTool",
    "Clock",
    "Limits",
    "ModelCaller",
    "Ran",
    "RealClock",
    "RunState",
    "ScaledClock",
    "StrategyPart",
    "WorkerReport",
    "caller_tools",
    "checked_by",
    "current",
    "gap_rows",
    "harvest",
    "own_prompts",
    "preview",
    "propose_seed_questions",
    "register",
    "run",
    "same_fact",
    "seed",
    "spend_tokens",
    "step",
    "strategy_names",
    "strategy_part",
    "work",
]
