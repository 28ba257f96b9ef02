"""The exit codes of ``fractal-nb``: how the work ended, as the shell reads it.

docs/architecture.md, "Layers" (the faces): ``--help`` prints :data:`EXIT_CODES`
and docs/shell.md's table repeats them; every command returns one of these.
"""

from __future__ import annotations

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_MODEL, EXIT_STOPPED = 0, 1, 2, 3, 4
EXIT_CODES = {
    EXIT_OK: "finished: the exploration is complete and harvested (or the command did its work)",
    EXIT_ERROR: "failed: a file in use or not a store, an unknown graph or a file of several without "
    "--graph-id, an --at event outside the graph's history, an address the MCP server cannot listen on "
    "(before the file is opened), a lost MCP server, `resume` of a budget_exhausted graph without a new "
    "budget (--new-budget, --max-tokens or --max-wall-s)",
    EXIT_USAGE: "usage error: a bad option or argument (nothing was opened or written), or an inspection "
    "command on a file of several graphs without --graph-id (read, never written)",
    EXIT_MODEL: "the model failed: unreachable or failing every call (the graph is paused with the "
    "reason and resumes with `fractal-nb resume`), or the run finished degraded (failed "
    "questions are listed as gaps)",
    EXIT_STOPPED: "stopped early: a budget ran out (unexplored questions are gaps), gated questions "
    "await approval, a checkpoint or pause (resume with `fractal-nb resume`)",
}
