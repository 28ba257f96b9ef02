"""What ``fractal-nb --help`` says of each read-only command: its one line and its description.

docs/architecture/facade.md, "Inspecting a file": one row per command of
``inspection.COMMANDS``, in the order ``--help`` lists them; :mod:`.parser` makes a
subcommand of each row.
"""

from __future__ import annotations

# The read-only commands (docs/architecture/facade.md, "Inspecting a file"): name -> (help, description).
# Each is one function of inspection.COMMANDS; a new one is a row here and a function there.
INSPECTION_HELP = {
    "report": (
        "print the result as the graph stands (read-only)",
        "Print the exploration's result as it stands (summary, findings, gaps, synthesis chain) as "
        "Markdown; never harvests.",
    ),
    "events": (
        "print the event log (read-only)",
        "Print the graph's event log, one row per change, oldest first.",
    ),
    "edges": (
        "print the edges (read-only)",
        "Print every edge of the graph: the tree and the links between answers.",
    ),
    "tree": (
        "print the question tree with statuses (read-only)",
        "Print the question tree, indented by level, each question with its status (and why) and id.",
    ),
    "export": (
        "write the graph as Markdown, HTML or Parquet (FILE read-only)",
        "Write the graph to --to: .md the report, .html the self-contained page with the tree, "
        ".parquet one table (--table, default nodes); with --at, one table (nodes, edges or gaps) as "
        "Parquet as it was at that event.",
    ),
    "heads": (
        "print the heads, the current one last (read-only)",
        "Print one row per head (where a turn ended at harvest): its event, turn, status, counts, "
        "spend and what the turn asked; the last row is the head a new turn or resume continues from.",
    ),
    "state": (
        "print where the exploration stands (read-only)",
        "Print the exploration's state from the file alone: the line of work turn by turn, the "
        "branches and why each exists, the verified (a citation the store checked says it), stated "
        "(on the model's word), assumed, missing and failed values with node ids, "
        "the head resume uses, the earlier heads worth attaching from, and the checks.",
    ),
    "turns": (
        "print the turns (read-only)",
        "Print one row per turn (the seed is turn 1): its kind, what it asked, the event it started at "
        "and its head's event (empty for the open turn).",
    ),
    "sources": (
        "print the sources the answers may cite (read-only)",
        "Print one row per source of the graph: its name (what citations name), kind, lines and chunks, "
        "and whether the file on disk changed since it was added (citations check the text as added).",
    ),
    "payload": (
        "print one node's whole record (read-only)",
        "Print one node's whole record: its text, status and metadata (its claims among them), its "
        "citations with the store's check of each, its children and links, and the model calls made "
        "for it (role, model, tokens, outcome, error). Prompts and replies are not kept per node.",
    ),
}
