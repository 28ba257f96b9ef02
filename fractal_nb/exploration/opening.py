"""Making and finding an exploration's graph: a new one in a new or existing file, or one a file holds.

The facade's half of docs/architecture.md, "Layers" (Arguments): ``Exploration.create()`` and
``open()`` check every argument (the store's own checks first) before the file is opened; a
refused call creates nothing and leaves no file behind. A new graph and the sources it was
given land in one transaction, or neither does; a reopened file's claims left by a dead run go
back to open (a live run's, in this process, never do).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..arguments import STORE_LOG, check_llm, check_store_target
from ..checks import require_flag, require_id
from ..engine import Limits, own_prompts, strategy_part
from ..engine.presets import check_preset
from ..errors import InvalidInputError
from ..llm.protocol import LLM
from ..llm.read_only import ReadOnlyLLM
from ..store import Store, open_store
from ..store.records import SourceText
from ..store.sources import require_source_texts
from ..vocabulary import DEFAULT_STRATEGY, TERMINAL_GRAPH, Strategy, parse_metadata
from .source_inputs import Table, source_texts


def new_graph(
    seed: str,
    intensity: str,
    checkpoint: str,
    limits: Limits,
    strategy: str | None,
    *,
    sources: object,
    path: str | Path | None,
    prompts: object = None,
    preset: object = None,
) -> tuple[Store, str]:
    """A store holding a new graph of ``seed`` and its sources, and its id; see ``Exploration.create``.

    ``seed``, ``intensity``, ``checkpoint`` and ``limits`` are checked already; the strategy
    (None: tracks with a preset, else the default), the preset, the sources and the path are
    checked here before the file is opened.
    """
    chosen = check_preset(preset, strategy)
    if strategy is None:
        strategy = Strategy.TRACKS if chosen is not None else DEFAULT_STRATEGY
    kept = _graph_metadata(limits, strategy_part(strategy).name, prompts)
    if chosen is not None:
        kept = {**(kept or {}), "preset": chosen.value}
    tables, texts = _given_sources(sources)
    file = None if path is None else check_store_target(path)
    made = isinstance(file, Path) and not file.exists()
    store = open_store(file)
    try:
        texts += source_texts(tables, store.table_lines) if tables else []
        with store.batch():  # the graph and its sources land together, or neither does
            graph = store.create_graph(seed, intensity, checkpoint, metadata=kept)
            if texts:
                store.add_sources(graph["graph_id"], texts)
    except BaseException:
        store.close()
        if made and isinstance(file, Path):  # a refused call leaves no file behind (made: a file)
            for left in (file, file.with_name(file.name + STORE_LOG)):
                left.unlink(missing_ok=True)
        raise
    return store, graph["graph_id"]


def opened_graph(
    path: str | Path, graph_id: str | None, llm: LLM | None, clock: object, *, read_only: bool
) -> tuple[Store, str, LLM]:
    """The store of ``path``, the graph's id and the model to use; see ``Exploration.open``.

    Every argument is checked before the file is opened; a read-only file needs no model.
    """
    require_flag(read_only, "read_only")
    if llm is None and not read_only:
        raise InvalidInputError(
            "llm is needed to open a file to run it: Exploration.open(path, llm=...); "
            "read_only=True reads it without a model"
        )
    model: LLM = ReadOnlyLLM() if llm is None else llm
    check_llm(model)
    check_clock(clock)
    if graph_id is not None:
        require_id(graph_id, "graph_id")
    where = check_store_target(path)
    if isinstance(where, Path) and not where.exists():
        raise InvalidInputError(f"no exploration file at {path}")
    store = open_store(where, read_only=read_only)
    try:
        if graph_id is None:
            graph_id = _only_graph(store)
        # Claims of a dead run come back at once; a live run's (this process's) never do.
        if store.get_graph(graph_id)["status"] not in TERMINAL_GRAPH and not read_only:
            store.recover_stuck(graph_id)
    except BaseException:
        store.close()
        raise
    return store, graph_id, model


def check_clock(clock: object) -> None:
    """Refuse anything but a Clock (``now()`` and ``wait(condition, seconds)``) or None."""
    if clock is not None and not (
        callable(getattr(clock, "now", None)) and callable(getattr(clock, "wait", None))
    ):
        raise InvalidInputError(
            f"clock must be a Clock (now() and wait(condition, seconds)) or None, not {clock!r}"
        )


def _only_graph(store: Store) -> str:
    graphs = store.list_graphs()["graphs"]
    if len(graphs) != 1:
        ids = ", ".join(g["graph_id"] for g in graphs) or "none"
        raise InvalidInputError(f"the file holds {len(graphs)} graphs ({ids}); pass graph_id")
    return str(graphs[0]["graph_id"])


def _graph_metadata(limits: Limits, strategy: str, prompts: object) -> dict[str, Any] | None:
    """What a new graph keeps of its creation: its limits, strategy and own prompts, each only when given."""
    kept: dict[str, Any] = {}
    if limits.solve_time_s is not None and strategy != Strategy.THINKON:
        raise InvalidInputError(
            f"solve_time_s= bounds a thinkon sub-goal's Solve; strategy {strategy!r} has no Solve to bound"
        )
    if prompts is not None:
        if strategy != Strategy.THINKON:
            raise InvalidInputError(
                f"prompts= is the thinkon strategy's Prompt_t and Prompt_e; strategy {strategy!r} takes none"
            )
        kept["prompts"] = own_prompts(prompts)
    if limits != Limits():
        kept["limits"] = limits.to_metadata()
    if strategy != DEFAULT_STRATEGY:
        kept["strategy"] = strategy
    parse_metadata(kept)
    return kept or None


def _given_sources(sources: object) -> tuple[list[Table], list[SourceText]]:
    """The tables among ``sources`` (read once the file is open), and the others' texts, checked."""
    items = [] if sources is None else list(sources) if isinstance(sources, list | tuple) else [sources]
    tables = [i for i in items if isinstance(i, Table)]
    texts = source_texts([i for i in items if not isinstance(i, Table)]) if len(tables) < len(items) else []
    if texts:
        require_source_texts(texts)  # the store's own refusals, before any file is made
    return tables, texts
