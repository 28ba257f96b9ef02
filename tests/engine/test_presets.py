"""Exploring a codebase (docs/architecture/engine.md, "Tracks": presets, skills, deepen).

Covers: engine/presets.py, engine/skills.py, engine/deepen.py, engine/orthogonality.py, store/source_grep.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, SimulatedLLM
from fractal_nb.engine import deepen
from fractal_nb.engine.evidence_tools import SourceTools
from fractal_nb.engine.presets import preset_tracks
from fractal_nb.engine.skills import run_skill
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.vocabulary import Preset, Skill
from tests.engine.test_openai_runs import (
    _no_proxy,  # noqa: F401 (autouse: no proxy, no model from the env)
    first_user,
    role_responder,
    schema_name,
)
from tests.llm.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
QUESTION = "How does a claim stay atomic?"
ARCHITECTURE = [
    ("services", "ServiceInterfaces", "PatternSearch"),
    ("layers", "LayerComposition", "DependencyTrace"),
    ("errors", "ErrorHandling", "ImplementationScan"),
    ("config", "Configuration", "BoundaryExplore"),
]
FEATURE = [
    ("models", "DataModels", "ImplementationScan"),
    ("ui-state", "UIComponents", "PatternSearch"),
    ("api", "APIEndpoints", "DependencyTrace"),
    ("errors", "ErrorCases", "ImplementationScan"),
]
CLAIM_PY = '''"""The claim step: one UPDATE takes the row, so a claim is atomic."""

from .errors import ClaimError


class Claims:
    """Claims of questions."""

    def claim_question(self, worker):
        row = self.db.execute("UPDATE nodes SET status = 'claimed' WHERE status = 'open' RETURNING id")
        if row is None:
            raise ClaimError("nothing to claim")
        return row
'''
FILES = {
    "store/claim.py": CLAIM_PY,
    "store/errors.py": 'class ClaimError(Exception):\n    """A claim was refused."""\n',
    "store/__init__.py": "from .claim import Claims\n\n__all__ = ['Claims']\nMAX_CLAIMS = 8\n",
    "engine/worker.py": (
        "from ..store.claim import Claims\n\n\ndef work(store):\n"
        "    return Claims.claim_question(store, 'w')\n"
    ),
    "README.md": "Workers claim questions atomically.\n",
}


@pytest.fixture
def code(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _track_rows(ex: Exploration) -> list[dict[str, Any]]:
    nodes = ex.nodes()
    rows = nodes[(nodes["node_type"] == "question") & (nodes["depth"] == 1)]
    return [dict(ex.inspect(n)["node"]["metadata"]) for n in rows["node_id"]]


@pytest.mark.parametrize(("preset", "expected"), [("architecture", ARCHITECTURE), ("feature", FEATURE)])
def test_a_preset_writes_seed_003s_track_set_without_asking_for_tracks(
    code: Path, preset: str, expected: list[tuple[str, str, str]]
) -> None:
    with Exploration.create(
        QUESTION, preset=preset, sources=code, llm=SimulatedLLM(seed=1), intensity="pulse"
    ) as ex:
        ex.run(progress=False)
        tracks = [m["track"] for m in _track_rows(ex)]
        assert [(t["name"], t["kind"], t["skill"]) for t in tracks] == expected
        assert all(QUESTION in t["focus"] for t in tracks)
        assert ex.state().strategy == "tracks"
        roles = set(ex.sql("SELECT role FROM llm_calls")["role"])
        assert "tracks_seed" not in roles and "track_synthesis" in roles
        assert ex.store.get_graph(ex.graph_id)["metadata"]["preset"] == preset


def test_a_bad_preset_is_refused_before_anything_is_written(tmp_path: Path, code: Path) -> None:
    path = tmp_path / "x.duckdb"
    for bad in ({"preset": "archi"}, {"preset": "feature", "strategy": "fractal"}, {"preset": 3}):
        with pytest.raises(InvalidInputError, match="preset"):
            Exploration.create(QUESTION, sources=code, llm=SimulatedLLM(), path=path, **bad)  # type: ignore[arg-type]
        assert not path.exists()
    assert [t["name"] for t in preset_tracks(Preset.ARCHITECTURE, QUESTION)] == [
        a for a, _, _ in ARCHITECTURE
    ]


def _graph_of(code: Path) -> tuple[GraphStore, str]:
    store = GraphStore()
    graph = store.create_graph(QUESTION, "pulse")["graph_id"]
    store.add_sources(
        graph,
        [
            {"name": f"pkg/{n}", "kind": "file", "location": None, "text": (code / n).read_text()}
            for n in sorted(FILES)
        ],
    )
    return store, graph


def test_glob_grep_and_read_give_numbered_lines(code: Path) -> None:
    store, graph = _graph_of(code)
    assert store.glob_sources(graph, "**/*.py") == [f"pkg/{n}" for n in sorted(FILES) if n.endswith(".py")]
    assert store.glob_sources(graph, "*claim*") == ["pkg/store/claim.py"]
    hits = store.grep_sources(graph, r"raise\s+ClaimError")
    assert [(h["source"], h["line"]) for h in hits] == [("pkg/store/claim.py", 12)]
    assert store.read_source(graph, "pkg/store/claim.py", 12, 12)["lines"] == [hits[0]["text"]]
    assert [h["line"] for h in store.grep_sources(graph, "claim", glob="*.md")] == [1]
    with pytest.raises(InvalidInputError, match="not a regular expression"):
        store.grep_sources(graph, "(unclosed")
    tools = SourceTools(store, graph)
    assert tools.run("grep_sources", {"pattern": "UPDATE nodes"}).startswith("pkg/store/claim.py:10: ")
    assert tools.run("glob_sources", {"pattern": "**/__init__.py"}) == "pkg/store/__init__.py"


@pytest.mark.parametrize(
    ("skill", "cited"),
    [
        (Skill.PATTERN_SEARCH, ("pkg/store/claim.py", 10)),  # glob *claim* → grep → the UPDATE line
        (Skill.DEPENDENCY_TRACE, ("pkg/engine/worker.py", 1)),  # the import of Claims
        (Skill.IMPLEMENTATION_SCAN, ("pkg/store/claim.py", 12)),  # the raise
        (Skill.BOUNDARY_EXPLORE, ("pkg/store/__init__.py", 1)),  # the package's export
    ],
)
def test_each_skill_reads_the_lines_its_recipe_finds(
    code: Path, skill: Skill, cited: tuple[str, int]
) -> None:
    store, graph = _graph_of(code)
    found = run_skill(store, graph, skill, QUESTION)
    spans = {(s["source"], n) for s in found.spans for n in range(s["line_start"], s["line_end"] + 1)}
    assert cited in spans
    for span in found.spans:  # each span is the source's own lines, as stored
        read = store.read_source(graph, span["source"], span["line_start"], span["line_end"])
        assert span["text"] == "\n".join(read["lines"])
    assert found.complexity == len(found.files) + len(found.definitions) > 0


def test_a_preset_runs_findings_cite_checked_lines_and_a_misquote_is_not_verified(code: Path) -> None:
    with Exploration.create(
        QUESTION, preset="architecture", sources=code, llm=SimulatedLLM(seed=1), intensity="pulse"
    ) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        assert result.findings and not result.degraded
        cites = [c for f in result.findings for c in f["citations"]]
        assert all(c["status"] == "verified" for c in cites)
        assert any(c["source"] == "pkg/store/claim.py" for c in cites)
        markdown = result.to_markdown()
        assert "pkg/store/claim.py:L" in markdown
        good = cites[0]
        wrong = {**good, "quote": "claims are never atomic"}
        assert [c["status"] for c in ex.store.check_citations(ex.graph_id, [good, wrong])] == [
            "verified",
            "misquoted",
        ]


def test_a_complex_track_splits_into_orthogonal_subtracks(
    code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deepen, "DEEPEN_AT", 1)  # the small folder's tracks all pass it
    with Exploration.create(
        QUESTION, preset="architecture", sources=code, llm=SimulatedLLM(seed=1), intensity="pulse"
    ) as ex:
        ex.run(progress=False)
        rows = {m["track"]["name"]: m for m in _track_rows(ex)}
        syn = {
            r["track"]: ex.inspect(r["node_id"])["node"]["metadata"]
            for r in ex.syntheses().dropna(subset=["track"]).to_dict("records")
        }
        deepened = {name: meta for name, meta in syn.items() if meta.get("subtracks")}
        assert deepened, {n: m.get("complexity") for n, m in syn.items()}
        for name, meta in deepened.items():
            subs = meta["subtracks"]
            assert len(subs) >= 2 and meta["complexity"] > 1
            assert all(set(s) >= {"name", "focus", "approach", "deliverable", "skill"} for s in subs)
            assert all(
                s["name"].startswith(name + "/") and s["skill"] == rows[name]["track"]["skill"] for s in subs
            )
            assert len({s["name"] for s in subs}) == len(subs)
        calls = ex.sql("SELECT count(*) AS n FROM llm_calls WHERE role = 'track_synthesis'")["n"][0]
        subs_asked = sum(len(m["subtracks"]) for m in deepened.values())
        assert calls == len(ARCHITECTURE) - len(deepened) + subs_asked  # each sub-track asked once


def test_subtracks_group_files_by_folder_and_merge_near_duplicates() -> None:
    track = {
        "name": "errors",
        "focus": "f",
        "approach": "a",
        "deliverable": "d",
        "skill": "ImplementationScan",
    }
    folders = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    files = [f"p/{folder}/{i}.py" for folder in folders for i in range(2)]
    subs = deepen.subtracks(track, files)
    assert len(subs) == deepen.MAX_SUBTRACKS and subs[-1]["name"] == "errors/others"
    assert sum(len(s["files"]) for s in subs) == len(files)
    twins = deepen.subtracks(track, ["x/claim.py", "y/claim.py"])  # focus words alike: merged, no split
    assert twins == []


def test_a_preset_run_on_this_repository_cites_the_claim_step() -> None:
    with Exploration.create(
        QUESTION,
        preset="architecture",
        sources=REPO / "fractal_nb",
        llm=SimulatedLLM(seed=2),
        intensity="pulse",
    ) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        cited = {c["source"] for f in result.findings for c in f["citations"] if c["status"] == "verified"}
        assert "fractal_nb/store/claim.py" in cited, cited


def test_the_skills_evidence_reaches_a_model_without_tools(code: Path) -> None:
    with FakeOpenAI("ok", responder=role_responder()) as server:
        with (
            OpenAILLM(
                model="fake", base_url=server.base_url, api_key="x", max_retries=0, tool_calls=False
            ) as llm,
            Exploration.create(
                QUESTION, preset="architecture", sources=code, llm=llm, intensity="pulse"
            ) as ex,
        ):
            ex.run(progress=False)
            track_prompts = [first_user(r) for r in server.requests if schema_name(r) == "TrackFindings"]
            assert not any(r.get("tools") for r in server.requests)
            assert len(track_prompts) == len(ARCHITECTURE)
            services = next(p for p in track_prompts if "Track: services" in p)
            assert "[pkg/store/claim.py:L" in services
            assert "UPDATE nodes SET status = 'claimed'" in services
            findings = [f for m in _track_rows(ex) for f in m.get("findings") or []]
            synth = ex.syntheses().dropna(subset=["track"])
            assert set(synth["support"]) == {"supported"}, findings
