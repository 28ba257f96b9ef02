"""Evidence before the answer (docs/architecture/store.md, "Sources and citations"): cited, checked,
supported.

With sources, every answer prompt shows the passages closest to its question and
the answers cite them; the store checks each citation; the harvest's findings carry
the chain's verified citations, and only supported ones are findings of the result.
Without sources every prompt is as it was.

Covers: engine/result_of.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.engine import evidence
from fractal_nb.llm.protocol import Message
from fractal_nb.llm.schemas import MAX_QUOTE_CHARS, MAX_SOURCE_CHARS, SCHEMAS, Citation
from fractal_nb.prompts import render
from tests.engine.test_openai_runs import FAST, digest, role_responder
from tests.llm.fake_openai import MISCITES, FakeOpenAI, citing_responder

SEED = "Why do some cities grow faster than others?"

GROWTH = """# Why some cities grow faster

Cities grow faster where jobs cluster: firms follow workers and workers follow firms.
The causes of fast growth are mostly economic, and the evidence for it is strong.
Winners and losers of urban growth differ: owners gain, renters often lose.

Housing supply limits growth: where cities cannot build, prices rise instead of population.
Measurement of growth uses population, jobs and output; each tells a different story.
The history of urban growth shows ports and rail hubs growing first.

Risks of fast growth include congestion, pollution and rising rents.
The costs of urban growth fall on newcomers and on those priced out.
Alternatives to growing cities are smaller towns linked by fast transport.
"""

POLICY = """Policy notes on urban growth

Zoning decides how much a city can build, and so how fast it can grow.
Transport investment raises the growth of the places it connects.
Taxes on land encourage building where demand for housing is high.
The scale of a city changes which policies work: big cities need transit first.
The future of urban growth depends on remote work and on housing policy.
"""


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "growth.md").write_text(GROWTH)
    (folder / "policy.txt").write_text(POLICY)
    return folder


def explore(folder: Path, **options: Any) -> Exploration:
    """A pulse exploration of :data:`SEED` on the files of ``folder`` (named ``<folder>/<file>``)."""
    return Exploration.create(SEED, intensity="pulse", sources=folder, **options)


class Recording:
    """A model that answers as ``inner`` does and keeps every prompt it was sent (a real backend)."""

    def __init__(self, inner: SimulatedLLM) -> None:
        self.inner = inner
        self.model = inner.model
        self.prompts: list[tuple[str, str]] = []  # (schema name, the user turn)

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        self.prompts.append((schema.__name__, messages[-1]["content"]))
        return self.inner.complete(messages, schema)


def words(text: str) -> str:
    """A text's words, as compared with the file's (numbers, tags and spacing aside)."""
    text = re.sub(r"^\s*\[[^\]]*\]", "", text)
    return " ".join(re.findall(r"[A-Za-z]{2,}", text))


def in_file(folder: Path, citation: dict[str, Any]) -> bool:
    """Whether a citation's quote is in those lines of the file on disk (read here, not by the store)."""
    path = folder.parent / citation["source"]  # a folder's files are named under the folder's name
    if not path.is_file():
        return False
    lines = path.read_text().split("\n")[citation["line_start"] - 1 : citation["line_end"]]
    return bool(words(citation["quote"])) and words(citation["quote"]) in words("\n".join(lines))


def answers(ex: Exploration) -> list[dict[str, Any]]:
    """The answers to the graph's questions (the root's plan is the seed's, not an answer)."""
    nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
    return [n for n in nodes if n["node_type"] == "answer" and "seed_kind" not in n["metadata"]]


def question_of(ex: Exploration, answer: dict[str, Any]) -> str:
    nodes = {n["node_id"]: n for n in ex.store.get_snapshot(ex.graph_id)["nodes"]}
    return str(nodes[answer["parent_id"]]["text"])


def test_with_sources_every_simulated_answer_cites_real_lines_and_every_finding_is_supported(
    notes: Path, tmp_path: Path
) -> None:
    llm = Recording(SimulatedLLM(seed=3))
    with explore(notes, llm=llm, path=tmp_path / "g.duckdb") as ex:
        assert ex.run(1, progress=False) == "all_complete"
        result = ex.harvest()
        written = answers(ex)
    assert written
    for answer in written:
        meta = answer["metadata"]
        assert meta["support"] == "supported", meta
        assert meta["citations"] and all(c["status"] == "verified" for c in meta["citations"])
        assert all(in_file(notes, c) for c in meta["citations"]), meta["citations"]
    # Every answer prompt showed numbered evidence and asked for citations; the harvest's asked too.
    asked = [p for name, p in llm.prompts if name in ("Answer", "LeafAnswer")]
    assert asked and all(
        "\nEvidence: " in p and re.search(r"^\[notes/(growth\.md|policy\.txt):L\d+-L\d+\]$", p, re.M)
        for p in asked
    )
    harvest = next(p for name, p in llm.prompts if name == "HarvestFindings")
    assert "cites [" in harvest and harvest.endswith(render("harvest_citing", most=8))
    assert result.has_sources and result.findings and not result.unsupported_findings
    for finding in result.findings:
        assert finding["support"] == "supported"
        assert finding["citations"] and all(c["status"] == "verified" for c in finding["citations"])
        assert all(in_file(notes, c) for c in finding["citations"])
    assert result.support_counts == {"supported": len(result.findings), "unsupported": 0}
    assert result.answer_support == {"supported": len(written), "unsupported": 0, "no_sources": 0}
    assert not result.degraded, result.degraded_reasons
    markdown, page = result.to_markdown(), result._repr_html_()
    cited = result.findings[0]["citations"][0]
    assert f"{cited['source']}:L{cited['line_start']}-L{cited['line_end']}\\]" in markdown  # escaped
    assert f"{len(result.findings)} supported finding(s), 0 unsupported" in markdown
    assert "fractal-citations" in page
    assert result.to_dict()["support_counts"] == result.support_counts


def test_without_sources_the_prompts_and_the_result_are_as_they_were(tmp_path: Path) -> None:
    llm = Recording(SimulatedLLM(seed=3))
    with Exploration.create(SEED, intensity="pulse", llm=llm, path=tmp_path / "g.duckdb") as ex:
        ex.run(1, progress=False)
        result = ex.harvest()
        written = answers(ex)
    for name, prompt in llm.prompts:
        assert "Evidence: " not in prompt and "cites [" not in prompt, name
        if name in (
            "Answer",
            "LeafAnswer",
        ):  # the task, then the question (its worked example closes the task)
            task = render("halt") + "\n\n" + render("answer_branch" if name == "Answer" else "answer_leaf")
            assert task + "\n\nQuestion to answer now" in prompt
        if name == "HarvestFindings":  # no rule to cite sources
            assert render("harvest_citing", most=8).splitlines()[0] not in prompt
    assert written and all("citations" not in a["metadata"] for a in written)
    assert not any("It rests on" in a["text"] for a in written)
    assert not result.has_sources and not result.unsupported_findings and result.findings
    assert all(f["support"] == "no_sources" and f["citations"] == [] for f in result.findings)
    assert result.support_counts == {"supported": 0, "unsupported": 0}
    assert result.answer_support == {"supported": 0, "unsupported": 0, "no_sources": len(written)}
    assert "Evidence:" not in result.to_markdown() and "Unsupported" not in result.to_markdown()


def test_sources_that_say_nothing_on_the_question_leave_no_supported_finding_and_say_so(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "unrelated"
    folder.mkdir()
    (folder / "recipe.txt").write_text("Whisk two eggs with sugar.\nBake the batter for twenty minutes.\n")
    with explore(folder, llm=SimulatedLLM(seed=3), path=tmp_path / "g.duckdb") as ex:
        ex.run(1, progress=False)
        result = ex.harvest()
        written = answers(ex)
    # Nothing matched, nothing was cited: every answer is unsupported, and so is every finding.
    assert written and all(a["metadata"]["support"] == "unsupported" for a in written)
    assert result.findings == [] and result.unsupported_findings
    assert all(f["support"] == "unsupported" for f in result.unsupported_findings)
    assert result.support_counts == {"supported": 0, "unsupported": len(result.unsupported_findings)}
    assert result.degraded and any("no supported findings" in r for r in result.degraded_reasons)
    assert "Unsupported findings" in result.to_markdown()
    reopened = Exploration.open(tmp_path / "g.duckdb", llm=SimulatedLLM(seed=3))
    with reopened:  # read back from the file: the same split, without a model call
        again = reopened.harvest()
    assert again.findings == [] and again.unsupported_findings == result.unsupported_findings


def test_the_evidence_section_numbers_each_line_and_stays_bounded() -> None:
    hits = [
        {"source": f"s{i}.txt", "line_start": 10, "line_end": 49, "text": "\n".join(["word " * 20] * 40)}
        for i in range(5)
    ]
    text = evidence.section(hits)  # type: ignore[arg-type]
    assert text.startswith("\n\nEvidence: ")
    assert "[s0.txt:L10-L49]\n10: word" in text and "\n49: word" in text
    lines = re.findall(r"^\d+: .*$", text, re.M)
    assert sum(len(line) + 1 for line in lines) <= evidence.EVIDENCE_CHARS
    # The bound cut the second passage: its head names the lines shown, and no third follows.
    cut = re.search(r"^\[s1\.txt:L10-L(\d+)\]$", text, re.M)
    assert cut is not None and int(cut.group(1)) < 49 and "[s2.txt" not in text
    assert (
        f"\n{cut.group(1)}: word" in text
        and f"\n{int(cut.group(1)) + 1}: word" not in text.split("[s1.txt")[1]
    )
    long_line = evidence.section([{"source": "a", "line_start": 1, "line_end": 1, "text": "x" * 5000}])  # type: ignore[list-item]
    assert "1: " + "x" * (evidence.LINE_CHARS - 1) + "…" in long_line
    nothing = evidence.section([])
    assert "(no passage of the sources matches this question)" in nothing
    messages = [Message(role="user", content="prompt")]
    assert evidence.with_rule(messages, sources=False) is messages


def kind_for(question: str) -> str | None:
    """How the fake model cites for a question: rightly, or one of the miscitations."""
    return ([None, *MISCITES])[digest("cite:" + question) % (len(MISCITES) + 1)]


def asked(prompt: str) -> str:
    match = re.search(r"Question to answer now[^\n]*:\n([^\n]+)", prompt)
    return match.group(1).strip() if match else ""


EXPECTED = {
    None: "verified",
    "wrong_lines": "misquoted",
    "past_the_end": "no_such_lines",
    "invented_source": "no_such_source",
    "misquote": "misquoted",
}


def test_a_model_that_cites_and_miscites_through_the_openai_client(notes: Path, tmp_path: Path) -> None:
    miscite: Callable[[str], str | None] = lambda prompt: (  # noqa: E731
        kind_for(asked(prompt)) if "Question to answer now" in prompt else "invented_source"
    )
    with (
        FakeOpenAI(responder=citing_responder(role_responder(), miscite)) as server,
        explore(notes, llm=server.llm(), path=tmp_path / "g.duckdb", clock=FAST) as ex,
    ):
        ex.run(2, progress=False)
        result = ex.harvest(finish=True)
        written = answers(ex)
        questions = {a["node_id"]: question_of(ex, a) for a in written}
    kinds = {kind_for(q) for q in questions.values()}
    assert None in kinds and len(kinds) >= 3, kinds  # some cite rightly, others wrongly
    for answer in written:
        kind = kind_for(questions[answer["node_id"]])
        (citation,) = answer["metadata"]["citations"]
        assert citation["status"] == EXPECTED[kind], (kind, citation)
        assert answer["metadata"]["support"] == ("supported" if kind is None else "unsupported")
        assert in_file(notes, citation) == (kind is None)
    right = sum(kind_for(q) is None for q in questions.values())
    assert result.answer_support == {"supported": right, "unsupported": len(written) - right, "no_sources": 0}
    # The harvest's last finding cites an invented source: kept apart, never a finding.
    assert result.unsupported_findings and result.unsupported_findings[-1]["citations"][0]["status"] == (
        "no_such_source"
    )
    assert all(f["support"] == "supported" for f in result.findings)
    assert all(
        c["status"] == "verified" and in_file(notes, c) for f in result.findings for c in f["citations"]
    )
    assert not {f["finding"] for f in result.findings} & {f["finding"] for f in result.unsupported_findings}
    assert result.support_counts == {
        "supported": len(result.findings),
        "unsupported": len(result.unsupported_findings),
    }
    # Every request went through the real client, the evidence in each answer's prompt.
    assert any("\nEvidence: " in str(r["messages"][-1]["content"]) for r in server.requests)


def test_a_paused_graph_summarised_as_it_stands_splits_its_findings_the_same_way(notes: Path) -> None:
    with explore(notes, llm=SimulatedLLM(seed=3)) as ex:
        ex.run(1, progress=False)
        # Paused with nothing left to do: harvest() summarises it as it stands, writing nothing.
        ex.store.update_graph_status(ex.graph_id, "paused", reason="paused by a person")
        result = ex.harvest()
        assert result.status == "paused" and "harvest" not in ex.store.get_graph(ex.graph_id)["metadata"]
    assert result.findings and all(f["support"] == "supported" for f in result.findings)
    assert all(c["status"] == "verified" for f in result.findings for c in f["citations"])
    assert result.support_counts == {"supported": len(result.findings), "unsupported": 0}


def test_no_schema_bounds_a_text_length_that_llama_cpps_grammar_cannot_take() -> None:
    # A maxLength of 1000 became 1000 nested grammar rules: llama.cpp's server failed to parse the
    # grammar and dropped the connection on every answer call (found running Gemma with sources).
    def bounds(node: object) -> list[int]:
        if isinstance(node, dict):
            own = [node["maxLength"]] if "maxLength" in node else []
            return own + [b for v in node.values() for b in bounds(v)]
        return [b for v in node for b in bounds(v)] if isinstance(node, list) else []

    for schema in SCHEMAS:
        assert bounds(schema.model_json_schema()) == [], schema.__name__
    with pytest.raises(ValidationError, match="longer than 2000 characters"):
        Citation(source="a.md", line_start=1, line_end=1, quote="x" * (MAX_QUOTE_CHARS + 1))
    with pytest.raises(ValidationError, match="longer than 1000 characters"):
        Citation(source="a" * (MAX_SOURCE_CHARS + 1), line_start=1, line_end=1, quote="quoted")
