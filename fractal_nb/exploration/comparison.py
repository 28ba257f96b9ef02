"""``compare()``: one question answered each way, measured side by side.

(docs/architecture/facade.md, "Comparing strategies")

Each strategy runs the question as an exploration of its own (``single``, one
model call, is the baseline), then is harvested; its row reads the graph: the
model calls and tokens of its ledger, cost with prices, wall time of its run and
harvest, nodes, depth, findings and how many rest on verified citations, gaps,
contradictions, whether the result is degraded, and, with a judge model, the
judge's coverage and support scores (its call logged on the graph as role
``judge``, after the row's calls and tokens were read: they are not in them).

Each run has a token budget: :data:`DEFAULT_MAX_TOKENS` for the intensity unless
the caller gives ``max_tokens`` (issue 37: a thinkon chain whose model never
returned spent 500 calls and 1.7M tokens on a pulse comparison). A row's
``budget`` is the budget its run had and ``stopped`` why the run stopped short
(a spent budget, the model down), None when it finished.
With ``cache="record"`` every completion is kept in the file; ``cache="replay"``
runs the comparison again from it with no model at all (one worker per run both
times, so each run asks the same questions in the same order). A replay writes
nothing to the file: its runs are graphs in memory, so replaying again and again
leaves the file as the recording left it (issue 38: each replay added four graphs).
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from ..arguments import check_llm, check_store_target
from ..engine import Limits, ModelCaller, strategy_part
from ..errors import InvalidInputError, LLMError
from ..llm.cache import CachedLLM
from ..llm.protocol import LLM
from ..llm.schemas import Judgement
from ..prompts import chat
from ..results.result import FractalResult
from ..store import Store, open_store
from ..text import clip
from ..vocabulary import Intensity, RunOutcome, parse_choice
from .exploration import Exploration
from .source_inputs import Snippet, Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STRATEGIES = ("single", "fractal", "thinkon", "tracks")
"""What ``compare()`` runs by default: the baseline first."""
CacheChoice = Literal["off", "record", "replay"]
DEFAULT_MAX_TOKENS: Mapping[Intensity, int] = MappingProxyType(
    {Intensity.PULSE: 100_000, Intensity.EXPLORE: 1_000_000, Intensity.DEEP: 3_000_000}
)
"""Each strategy's token budget in ``compare()`` when ``max_tokens`` is not given, by intensity.

About ten times what the costliest strategy spends with the simulator (pulse ~10,000,
explore ~115,000, deep ~272,000 tokens), so a run that behaves finishes under it and a
runaway one (a chain whose model never returns) stops there, its row saying so; give
``max_tokens`` to raise it (``None``: no budget).
"""


class DefaultBudget(Enum):
    """``compare(max_tokens=...)`` not given: :data:`DEFAULT_MAX_TOKENS` for the intensity."""

    PER_INTENSITY = "per intensity"


PER_INTENSITY = DefaultBudget.PER_INTENSITY
COLUMNS = (
    "strategy",
    "graph_id",
    "status",
    "degraded",
    "stopped",
    "calls",
    "tokens",
    "budget",
    "cost",
    "wall_s",
    "nodes",
    "depth",
    "findings",
    "supported_findings",
    "gaps",
    "contradictions",
    "coverage",
    "support",
)
"""The comparison's columns, one row per strategy."""
NOTEBOOK_EXTRA = 'pip install "fractal-nb[notebook]"'


@dataclass
class Comparison:
    """What ``compare()`` measured: ``frame`` (one row per strategy), each strategy's result and graph."""

    question: str
    frame: pd.DataFrame
    results: dict[str, FractalResult] = field(default_factory=dict)
    path: Path | str | None = field(default=None, repr=False)  # a URL may carry a password
    judged: bool = False
    replayed: bool = False

    def plot(self) -> Figure:
        """Bars per strategy: calls, tokens, wall time, findings (supported darker), gaps, judge's scores."""
        try:
            import matplotlib.pyplot as plt  # an extra: loaded when asked for
        except ImportError:
            raise InvalidInputError(f"plot() draws with matplotlib: {NOTEBOOK_EXTRA}") from None
        frame = self.frame.set_index("strategy")
        panels = [
            ("calls", "model calls"),
            ("tokens", "tokens"),
            ("wall_s", "wall time (s)"),
            ("findings", "findings (supported darker)"),
            ("gaps", "gaps"),
        ]
        if self.judged:
            panels.append(("coverage", "judge: coverage / support (1-5)"))
        figure, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), 3.2), squeeze=False)
        names = [str(s) for s in frame.index]
        for ax, (column, title) in zip(axes[0], panels, strict=True):
            if column == "coverage":
                width = 0.4
                spots = range(len(names))
                ax.bar(
                    [i - width / 2 for i in spots],
                    frame["coverage"],
                    width,
                    label="coverage",
                    color="#4c72b0",
                )
                ax.bar(
                    [i + width / 2 for i in spots], frame["support"], width, label="support", color="#dd8452"
                )
                ax.set_xticks(list(spots), names)
                ax.set_ylim(0, 5)
                ax.legend(fontsize=8)
            else:
                ax.bar(names, frame[column].astype(float), color="#8da0cb")
                if column == "findings":
                    ax.bar(names, frame["supported_findings"].astype(float), color="#4c72b0")
            ax.set_title(title, fontsize=10)
            ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        figure.suptitle(clip(self.question, 90), fontsize=11)
        figure.tight_layout()
        plt.close(figure)  # shown by the notebook's display, not twice
        return figure

    def stopped_at_budget(self) -> list[str]:
        """The strategies whose run stopped at its token budget (``compare(max_tokens=...)`` raises it)."""
        return [str(row.strategy) for row in self.frame.itertuples() if _at_budget(row.stopped)]

    def _repr_html_(self) -> str:
        note = " (replayed from the file's cache: no model was called)" if self.replayed else ""
        table = self.frame.to_html(index=False, na_rep="—", float_format="{:.2f}".format)  # escapes cells
        short = self.stopped_at_budget()
        warning = (
            f"<p><b>Stopped at the token budget:</b> {html.escape(', '.join(short))} "
            "(its result is partial; compare(max_tokens=...) raises the budget)</p>"
            if short
            else ""
        )
        return (
            f"<div class='fractal-comparison'><p><b>Compared:</b> {html.escape(self.question)}"
            f"{html.escape(note)}</p>{warning}{table}</div>"
        )


def compare(
    question: str,
    strategies: Sequence[str] = STRATEGIES,
    *,
    llm: LLM | None,
    path: str | Path | None = None,
    sources: object = None,
    intensity: str = "pulse",
    judge: LLM | None = None,
    cache: CacheChoice = "off",
    max_tokens: int | None | DefaultBudget = PER_INTENSITY,
) -> Comparison:
    """Run ``question`` with each strategy and measure them side by side; a :class:`Comparison`.

    ``strategies``: from ``single`` (one model call, the baseline), ``fractal``,
    ``thinkon``, ``tracks`` and any strategy registered with ``engine.register``, each
    at most once, in the order given. ``path``: a
    DuckDB file that keeps every run's graph (None: in memory); ``sources``: the
    evidence every run gets (as :meth:`Exploration.add_sources` takes it).
    ``judge``: a model that scores each result's coverage and support (1-5).
    ``cache``: ``record`` keeps every completion in the file, ``replay`` answers
    from it with no model (``llm`` may then be None); both need ``path``. A replay
    reads the file and never writes it: each strategy runs again in memory from the
    recorded completions (the same prompts in the same order), so calling it twice
    gives the same rows and leaves the file as the recording left it, its graphs the
    recorded ones (``Exploration.graphs(path)``; a replayed row's ``graph_id`` names
    its run in memory, gone once ``compare`` returns). A ``Table`` source is read
    from the file. The file must exist: a replay of nothing recorded is refused.
    ``max_tokens``: each strategy's token budget (its run and harvest); by default
    :data:`DEFAULT_MAX_TOKENS` for the intensity (100,000 at pulse), ``None`` for none.
    A row's ``budget`` says what its run had, ``stopped`` why it stopped short, and
    :meth:`Comparison.stopped_at_budget` which stopped at the budget.
    Everything is checked before anything runs.
    """
    chosen = _strategies(strategies)
    level, budget, where = _checked(question, intensity, cache, path, llm, judge, max_tokens)
    replay = cache == "replay"
    # A replay only reads the file (CachedLLM's replay asks cache_get alone): opened as a record is,
    # so a notebook holding the file open in this process shares it, and its runs stay in memory.
    cache_store = open_store(where) if cache != "off" and where is not None else None
    try:
        rows, results = [], {}
        model, scorer = (
            (CachedLLM(llm, cache_store, cache), CachedLLM(judge, cache_store, cache) if judge else None)
            if cache_store is not None
            else (llm, judge)
        )
        assert model is not None  # checked above: only a replay runs without a model
        if replay and cache_store is not None:
            sources = _tables_read(sources, cache_store)  # the runs' in-memory stores hold no table
        for how in chosen:
            row, result = _run_one(
                question,
                how,
                model,
                scorer,
                None if replay else where,
                sources,
                level,
                budget,
                cache != "off",
            )
            rows.append(row)
            results[how] = result
    finally:
        if cache_store is not None:
            cache_store.close()
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return Comparison(question, frame, results, where, judged=judge is not None, replayed=replay)


def _checked(
    question: object,
    intensity: object,
    cache: object,
    path: str | Path | None,
    llm: LLM | None,
    judge: LLM | None,
    max_tokens: int | None | DefaultBudget,
) -> tuple[Intensity, int | None, Path | str | None]:
    """``compare``'s arguments checked before anything runs: the intensity, the budget, the file."""
    if not isinstance(question, str) or not question.strip():
        raise InvalidInputError(f"question must be non-empty text, not {question!r}")
    level = parse_choice(Intensity, intensity, "intensity")
    if cache not in ("off", "record", "replay"):
        raise InvalidInputError(f"cache must be 'off', 'record' or 'replay', not {cache!r}")
    if cache != "off" and path is None:
        raise InvalidInputError(f"cache={cache!r} keeps the completions in a file: pass path too")
    if llm is None and cache != "replay":
        raise InvalidInputError("llm is needed unless the comparison is replayed (cache='replay')")
    if llm is not None:
        check_llm(llm)
    if judge is not None:
        check_llm(judge, "judge")
    budget = DEFAULT_MAX_TOKENS[level] if isinstance(max_tokens, DefaultBudget) else max_tokens
    Limits.parse(max_tokens=budget)
    where = check_store_target(path, "path") if path is not None else None
    if cache == "replay" and isinstance(where, Path) and not where.exists():
        raise InvalidInputError(
            f"cache='replay' answers from the completions recorded in {where}: no such file "
            "(record them first with cache='record')"
        )
    return level, budget, where


def _tables_read(sources: object, store: Store) -> object:
    """``sources`` with each :class:`Table` read from ``store`` into a :class:`Snippet` of its name and lines.

    A replay runs in memory, where no table of the file is: the recorded runs read the same
    name and lines from the file, so their prompts (and the recorded completions' keys) match.
    """
    if isinstance(sources, Table):
        text = "\n".join(store.table_lines(sources.name, sources.columns))
        return Snippet(text, name=sources.name)
    if isinstance(sources, list | tuple):
        return [_tables_read(item, store) for item in sources]
    return sources


def _strategies(strategies: object) -> list[str]:
    if isinstance(strategies, str) or not isinstance(strategies, Sequence) or not strategies:
        raise InvalidInputError(
            f"strategies must be a non-empty list such as {list(STRATEGIES)}, not {strategies!r}"
        )
    chosen = [strategy_part(s).name for s in strategies]  # a registered part's name, a plug-in's too
    if len(set(chosen)) < len(chosen):
        raise InvalidInputError(f"each strategy at most once, not {list(strategies)!r}")
    return chosen


def _run_one(
    question: str,
    how: str,
    llm: LLM,
    judge: LLM | None,
    path: Path | str | None,
    sources: object,
    level: Intensity,
    max_tokens: int | None,
    one_worker: bool,
) -> tuple[dict[str, Any], FractalResult]:
    """One strategy's run and harvest, and its row (with a judge, its scores, its call on the same graph)."""
    started = time.perf_counter()
    with Exploration.create(
        question,
        intensity=level.value,
        llm=llm,
        path=path,
        sources=sources,
        strategy=how,
        max_tokens=max_tokens,
    ) as ex:
        report = ex.run(1 if one_worker else None, progress=False)
        result = ex.harvest()
        wall = time.perf_counter() - started
        usage = ex.usage()  # before the judge's call
        calls = ex.llm_calls()  # the model calls it made, replayed ones too (not its tool calls)
        nodes = ex.nodes()
        scores = _judged(judge, ex, result, how) if judge is not None else {"coverage": None, "support": None}
    questions = nodes[nodes["node_type"] == "question"]
    row: dict[str, Any] = {
        "strategy": how,
        "graph_id": result.graph_id,
        "status": result.status,
        "degraded": result.degraded,
        "stopped": None
        if report == RunOutcome.ALL_COMPLETE
        else f"{report.status}: {report.status_reason}"
        if report.status_reason
        else str(report.status),
        "calls": len(calls[~calls.role.str.startswith("tool:")]),
        "tokens": int((calls.prompt_tokens.fillna(0) + calls.completion_tokens.fillna(0)).sum()),
        "budget": max_tokens,
        "cost": usage["cost"],
        "wall_s": round(wall, 3),
        "nodes": len(nodes),
        "depth": int(questions["depth"].max()) if len(questions) else 0,
        "findings": len(result.findings),
        "supported_findings": sum(f.get("support") == "supported" for f in result.findings),
        "gaps": len(result.gaps),
        "contradictions": result.contradiction_count,
        **scores,
    }
    return row, result


def _at_budget(stopped: object) -> bool:
    """Whether a row's ``stopped`` says its run stopped at its token budget (not a circuit breaker).

    >>> _at_budget("budget_exhausted: token budget of 100,000 reached (101,544 spent)"), _at_budget(None)
    (True, False)
    """
    return (
        isinstance(stopped, str)
        and stopped.startswith(RunOutcome.BUDGET_EXHAUSTED)
        and "token budget of" in stopped
    )


def _judged(judge: LLM, ex: Exploration, result: FractalResult, how: str) -> dict[str, Any]:
    """The judge's scores of one result (None when the judge failed); its call logged on the graph."""
    findings = "\n".join(
        f"- {clip(str(f['finding']), 300)}"
        + (" [cites verified lines]" if f.get("support") == "supported" else "")
        for f in result.findings
    )
    messages = chat(
        "judge",
        question=clip(result.seed, 2000),
        strategy=how,
        summary=clip(result.summary, 3000),
        findings=findings or "(none)",
        gaps="\n".join(f"- {clip(g, 200)}" for g in result.gaps) or "(none)",
    )
    try:
        scores = ModelCaller(judge, ex.store, ex.graph_id)(Judgement, messages, node_id=None, worker="judge")
    except LLMError:
        return {"coverage": None, "support": None}
    return {"coverage": scores.coverage, "support": scores.support}
