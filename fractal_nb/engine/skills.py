"""Skills: how a preset's track gathers evidence over a codebase, run by the engine.

See docs/architecture/engine.md, "Tracks" (skills). Each skill of seed 003 is a fixed
recipe of three reads of the graph's sources, the store's ``glob_sources`` (names),
``grep_sources`` (numbered lines matching a regular expression) and ``read_source``
(a span of lines), so any model gets the evidence, tool-capable or not:

- ``PatternSearch``: glob the files the terms name → grep the terminology → read the context.
- ``DependencyTrace``: find definitions and exports of the terms → grep their imports → read usage.
- ``ImplementationScan``: find types → locate implementations → trace ``raise``/``except``/``return``.
- ``BoundaryExplore``: find the package entry points (``__init__.py``, index files) → grep exports.

The lines read become the track's evidence, numbered as citations number them and
shown within :data:`~fractal_nb.engine.evidence.EVIDENCE_CHARS`; the files and
definitions the searches hit measure the track's complexity (engine/deepen.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..store import WorkerStore
from ..store.records import ChunkRecord, GrepHit
from ..text import content_words
from ..vocabulary import Skill

CONTEXT = 3
"""Lines read on each side of a hit."""
SPANS = 8
"""The most spans a skill reads (the best first; the prompt's bound cuts further)."""
GREP_K = 200
"""The most lines one grep of a skill returns."""
_ENTRY_GLOBS = ("**/__init__.py", "**/index.*", "**/main.py", "**/__main__.py")


@dataclass
class SkillEvidence:
    """What a skill found: the spans read (best first), and the files and definitions its searches hit."""

    skill: Skill
    spans: list[ChunkRecord] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    definitions: set[str] = field(default_factory=set)

    @property
    def complexity(self) -> int:
        """The track's measured complexity: distinct files plus distinct definitions its searches hit."""
        return len(self.files) + len(self.definitions)


def terms_of(text: str) -> list[str]:
    """The words a skill searches for: content words of four letters or more, in order.

    >>> terms_of("How does a claim stay atomic?")
    ['claim', 'stay', 'atomic']
    """
    return [w for w in dict.fromkeys(_ordered_words(text)) if len(w) >= 4]


def _ordered_words(text: str) -> list[str]:
    kept = content_words(text)
    words = (w.lower() for w in re.findall(r"[^\W\d_]+", text))
    return [s for w in words for s in (w[:-1] if w.endswith("s") and len(w) > 3 else w,) if s in kept]


class _Reader:
    """One skill run's reads over a graph's sources, restricted to ``within`` (names) when given."""

    def __init__(self, store: WorkerStore, graph_id: str, within: Sequence[str] | None) -> None:
        self.store, self.graph_id = store, graph_id
        self.counts = {s["name"]: s["line_count"] for s in store.list_sources(graph_id)}
        self.within = None if within is None else set(within)

    def glob(self, pattern: str) -> list[str]:
        names = self.store.glob_sources(self.graph_id, pattern)
        return [n for n in names if self.within is None or n in self.within]

    def grep(self, pattern: str, glob: str | None = None) -> list[GrepHit]:
        hits = self.store.grep_sources(self.graph_id, pattern, glob=glob, k=GREP_K)
        return [h for h in hits if self.within is None or h["source"] in self.within]

    def grep_in(self, pattern: str, names: Sequence[str]) -> list[GrepHit]:
        """``pattern`` in each of ``names`` (a grep each, so no file's hits crowd out another's)."""
        return [h for name in dict.fromkeys(names) for h in self.grep(pattern, glob=_literal(name))]

    def read(self, source: str, line: int) -> ChunkRecord:
        first, last = max(1, line - CONTEXT), min(self.counts.get(source, line), line + CONTEXT)
        read = self.store.read_source(self.graph_id, source, first, last)
        return {
            "chunk_id": f"{source}:{first}-{last}",
            "source_id": source,
            "source": source,
            "line_start": first,
            "line_end": last,
            "text": "\n".join(read["lines"]),
        }


def run_skill(
    store: WorkerStore, graph_id: str, skill: Skill, about: str, *, within: Sequence[str] | None = None
) -> SkillEvidence:
    """Run ``skill`` for the words of ``about`` over the graph's sources (``within``: only those names)."""
    terms = terms_of(about)
    found = SkillEvidence(skill)
    if not terms:
        return found
    reader = _Reader(store, graph_id, within)
    hits = _RECIPES[skill](reader, terms, found)
    found.files.update(h["source"] for h in hits)
    found.spans = _read_best(reader, hits, terms)
    return found


def _words(terms: Sequence[str]) -> str:
    return "|".join(re.escape(t) for t in terms)


def _literal(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _pattern_search(reader: _Reader, terms: Sequence[str], found: SkillEvidence) -> list[GrepHit]:
    """Glob the files the terms name, grep the terminology there (everywhere when none), read."""
    named = [n for t in terms for n in reader.glob(f"*{t}*")]
    hits = reader.grep_in(rf"\b({_words(terms)})", named) if named else reader.grep(rf"\b({_words(terms)})")
    found.definitions.update(_definitions(hits))
    return hits


def _dependency_trace(reader: _Reader, terms: Sequence[str], found: SkillEvidence) -> list[GrepHit]:
    """Definitions and exports of the terms, the imports of what they define, its usage."""
    defined = reader.grep(rf"^\s*(async\s+)?(def|class)\s+\w*({_words(terms)})\w*|^__all__")
    names = sorted(_definitions(defined))[:12]
    found.definitions.update(names)
    if not names:
        return defined
    joined = "|".join(re.escape(n) for n in names)
    imports = reader.grep(rf"^\s*(from\s+\S+\s+)?import\s.*\b({joined})\b")
    usage = reader.grep(rf"\b({joined})\(")
    return defined + imports + usage


def _implementation_scan(reader: _Reader, terms: Sequence[str], found: SkillEvidence) -> list[GrepHit]:
    """Types of the terms, their implementations, and the effects (raise/except/return) in those files."""
    words = _words(terms)
    types = reader.grep(rf"^\s*class\s+\w*({words})\w*|^\s*class\s+\w+\((\w+\.)?(TypedDict|\w*Enum|Protocol)")
    implementations = reader.grep(rf"^\s*(async\s+)?def\s+\w*({words})\w*")
    found.definitions.update(_definitions(types + implementations))
    files = [h["source"] for h in types + implementations]
    effects = reader.grep_in(rf"\b(raise|except)\b.*|\breturn\b.*\b({words})", files[:12])
    return implementations + types + effects


def _boundary_explore(reader: _Reader, terms: Sequence[str], found: SkillEvidence) -> list[GrepHit]:
    """The package entry points, their exports, and the settings (constants) that name the terms."""
    entries = [n for pattern in _ENTRY_GLOBS for n in reader.glob(pattern)]
    exports = reader.grep_in(rf"^__all__|^\s*from\s+\S+\s+import\s.*({_words(terms)})", entries)
    settings = reader.grep(rf"^\s*[A-Z][A-Z0-9_]*({_words(terms).upper()})?[A-Z0-9_]*\s*(:[^=]+)?=\s")
    named = [h for h in settings if any(t in h["text"].lower() for t in terms)]
    found.definitions.update(h["text"].split("=")[0].split(":")[0].strip() for h in named)
    return exports + named


_RECIPES: dict[Skill, Callable[[_Reader, Sequence[str], SkillEvidence], list[GrepHit]]] = {
    Skill.PATTERN_SEARCH: _pattern_search,
    Skill.DEPENDENCY_TRACE: _dependency_trace,
    Skill.IMPLEMENTATION_SCAN: _implementation_scan,
    Skill.BOUNDARY_EXPLORE: _boundary_explore,
}


def _definitions(hits: Sequence[GrepHit]) -> set[str]:
    """The names the ``def``/``class`` lines among ``hits`` define."""
    return {m.group(1) for h in hits if (m := re.match(r"\s*(?:async\s+)?(?:def|class)\s+(\w+)", h["text"]))}


def _read_best(reader: _Reader, hits: Sequence[GrepHit], terms: Sequence[str]) -> list[ChunkRecord]:
    """The context of the best hits, one span per hit, overlapping ones kept once, best first.

    A hit scores by the distinct terms on its line, then by the terms its file's name holds.
    """

    def score(hit: GrepHit) -> tuple[int, int]:
        line, name = hit["text"].lower(), hit["source"].lower()
        return sum(t in line for t in terms), sum(t in name for t in terms)

    spans: list[ChunkRecord] = []
    for hit in sorted(hits, key=score, reverse=True):
        if any(
            s["source"] == hit["source"] and s["line_start"] <= hit["line"] <= s["line_end"] for s in spans
        ):
            continue
        spans.append(reader.read(hit["source"], hit["line"]))
        if len(spans) >= SPANS:
            break
    return spans
