"""A thinkon sub-goal's per-Solve time limit (seed 002, §6; docs/architecture/engine.md, "Thinkon").

``solve_time_s`` (``Exploration.create(strategy="thinkon", solve_time_s=...)`` or ``run(...)``,
kept with the graph's limits) bounds each sub-goal's Solve: the running time of its subtree,
the level and every level it called. A level's running time is what its steps ran, each timed
by the run's clock (``RunState.clock``) and added to its ``spent_s`` with the step's write,
and what its returned sub-goals ran (store/chain.py); pauses and the time between runs do not
count, and a worker in another process adds its own steps' times. So a subtree's running
time, for a level of the chain as it stands, is the ``spent_s`` of that level and of every
level below it (the one sub-goal in flight at each level).

It is checked before each Think or Eval call of the subtree (a ceiling before a call; a call
in flight ends at ``node_timeout_s``, if set): the outermost sub-goal whose subtree has run
``solve_time_s`` or more returns its state, the levels below it first (each saturated
``budget_exhausted``, the limit as ``budget_reason``), into its parent's ``done``, and the
parent's Eval goes on. The root's Solve is the run itself, bounded by ``max_wall_s``: with one
limit for every Solve, the root's subtree, which holds all others, would always reach it
first, and no sub-goal could ever end alone.
"""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING

from ...store.records import ThinkonLevel
from ...text import clip
from ..limits import SOLVE_TIME

if TYPE_CHECKING:
    from ..run_state import RunState


def past_solve_time(run: RunState, level: ThinkonLevel) -> tuple[list[ThinkonLevel], str] | None:
    """The levels to cut, deepest (``level``) first, and why, when ``level`` is inside a Solve past its limit.

    None with no limit, at the root, or while every sub-goal's subtree above ``level`` is within it.
    """
    limit = run.limits.solve_time_s
    if limit is None or level["parent_id"] is None:
        return None
    chain = run.store.thinkon_chain(run.graph_id)  # root first; ``level`` acts, so it is the last
    if not chain or chain[-1]["node_id"] != level["node_id"]:
        return None
    # subtree[i]: the running time of chain[i]'s Solve, its own and that of the levels below it
    subtree = list(accumulate(c["spent_s"] for c in reversed(chain)))[::-1]
    for i in range(1, len(chain)):  # the outermost sub-goal past it; the root's Solve is the run's
        if subtree[i] >= limit:
            reason = (
                f"{SOLVE_TIME}: the Solve of {clip(chain[i]['goal'], 120)!r} ran {subtree[i]:.1f} s, "
                f"at most {limit:g} s (solve_time_s)"
            )
            return chain[i:][::-1], reason
    return None
