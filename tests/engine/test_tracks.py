"""The tracks strategy (docs/architecture/engine.md, "Tracks"): orthogonal tracks, gated findings, one
aggregate.

Covers: engine/phases.py, engine/synthesis_object.py, llm/simulated_tracks.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fractal_nb import Exploration, GraphStore, InvalidInputError, LLMError, SimulatedLLM, Snippet
from fractal_nb.engine.orthogonality import near_duplicates, similar
from fractal_nb.engine.synthesis_object import checked_object
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.llm.protocol import Message
from fractal_nb.llm.schemas import SCHEMAS, SynthesisObject, Track
from fractal_nb.text import content_words
from tests.engine.test_openai_runs import first_user, schema_name
from tests.engine.test_runs import FAST, check_finished_graph
from tests.llm.fake_openai import FakeOpenAI

SEED = "How does the store keep a claim atomic under concurrent workers?"


def tracks_of(ex: Exploration) -> list[dict[str, Any]]:
    nodes = ex.nodes()
    rows = nodes[(nodes["node_type"] == "question") & (nodes["depth"] == 1)]
    return [ex.inspect(n)["node"]["metadata"]["track"] for n in rows["node_id"]]


def findings_of(ex: Exploration, node_id: str) -> list[dict[str, Any]]:
    return list(ex.inspect(node_id)["node"]["metadata"].get("findings") or [])


def root_answer_meta(ex: Exploration) -> dict[str, Any]:
    nodes = ex.nodes()
    answer = nodes[(nodes["node_type"] == "answer") & (nodes["depth"] == 0)].iloc[0]
    return dict(ex.inspect(answer["node_id"])["node"]["metadata"])


class Scripted(SimulatedLLM):
    """The simulator, with some roles' replies scripted in turn (the last one repeats); every prompt kept."""

    def __init__(self, script: dict[str, list[dict[str, Any] | None]], **kw: Any) -> None:
        super().__init__(**kw)
        self.script = {role: list(replies) for role, replies in script.items()}
        self.prompts: list[tuple[str, str]] = []

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        role = str(getattr(schema, "role", ""))
        self.prompts.append((role, messages[-1]["content"]))
        replies = self.script.get(role)
        if replies:
            reply = replies.pop(0) if len(replies) > 1 else replies[0]
            if reply is None:  # the model fails this call
                raise LLMError(f"scripted failure of a {role} call")
            return schema.model_validate(reply).model_dump(mode="json")
        return super().complete(messages, schema)

    def asked(self, role: str) -> list[str]:
        return [prompt for r, prompt in self.prompts if r == role]


def track(name: str, focus: str) -> dict[str, str]:
    return {
        "name": name,
        "focus": focus,
        "approach": f"read the code about {focus}",
        "deliverable": f"a cited account of {focus}",
    }


DISTINCT = [
    track("locking", "how the store serializes writers with a database lock"),
    track("leases", "when a claim lease runs out and another worker takes over"),
    track("recovery", "what happens to claims of a killed process on reopen"),
]
TWIN = track("locks", "how the store serializes writers with the database lock")


# -- orthogonality, in code ------------------------------------------------------------------


def test_near_duplicate_tracks_are_told_apart_from_orthogonal_ones() -> None:
    tracks = [Track.model_validate(t) for t in [*DISTINCT, TWIN]]
    assert near_duplicates(tracks) == [(0, 3)]
    assert near_duplicates(tracks[:3]) == []
    assert similar(content_words("errors: error handling"), content_words("error handling in the API layer"))
    assert not similar(content_words("services"), content_words("configuration"))


def test_a_tracks_run_poses_at_least_three_orthogonal_tracks_and_aggregates_them() -> None:
    llm = SimulatedLLM(seed=3)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        found = tracks_of(ex)
        assert len(found) >= 3
        assert near_duplicates([Track.model_validate(t) for t in found]) == []
        # Without sources nothing is cited (seed 003: every finding cites a file:line): it says so.
        assert result.strategy == "tracks" and result.degraded_reasons == [
            "a tracks run without sources: its 0 finding(s) are uncited, no file or line to check them by "
            "(add sources, a folder of files, for cited findings)"
        ]
        check_finished_graph(ex)
        synthesis = result.synthesis
        assert synthesis is not None and set(synthesis) >= {
            "unified",
            "nuances",
            "open_questions",
            "confidence",
            "justification",
        }
        assert result.summary and ex.syntheses().iloc[0]["synthesis"] == synthesis["unified"]
        frame = ex.syntheses()
        tracked = frame[frame["track"].notna()]
        assert sorted(tracked["track"]) == sorted(t["name"] for t in found)
        assert set(tracked["support"]) == {"no_sources"}  # no sources: nothing could be cited
        for gap in (
            g for row in tracked.itertuples() for g in ex.inspect(row.node_id)["node"]["metadata"]["gaps"]
        ):
            assert gap in synthesis["open_questions"]
        assert "**Strategy:** tracks" in ex.report() and "Unified:" in result.to_markdown()
        assert ex.state().strategy == "tracks" and "(tracks)" in repr(ex.state())
        assert "<b>Strategy:</b> tracks" in ex.state()._repr_html_()


def test_the_strategy_is_checked_before_anything_is_created(tmp_path: Path) -> None:
    path = tmp_path / "refused.duckdb"
    with pytest.raises(InvalidInputError, match="strategy"):
        Exploration.create(SEED, llm=SimulatedLLM(), strategy="spiral", path=path)
    assert not path.exists()


# -- the seed's gates ------------------------------------------------------------------------


def test_a_near_duplicate_track_is_asked_again_then_merged() -> None:
    plan = {"decomposition": "Locking, leases and recovery each bear on it.", "tracks": [*DISTINCT, TWIN]}
    llm = Scripted({"tracks_seed": [plan]}, seed=1)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        ex.step(1)
        asked = llm.asked("tracks_seed")
        assert len(asked) == 2, "asked once more, not again and again"
        assert "near-duplicate" in asked[1] and "locking / locks" in asked[1]
        assert [t["name"] for t in tracks_of(ex)] == ["locking", "leases", "recovery"]
        meta = root_answer_meta(ex)
        assert meta["track_merges"] == [{"kept": "locking", "merged": "locks", "focus": TWIN["focus"]}]
        assert meta["tracks_reasked"] == ["locking / locks"]


def test_a_reasked_plan_without_duplicates_is_kept_as_posed() -> None:
    first = {"decomposition": "Locking, leases and recovery each bear on it.", "tracks": [*DISTINCT, TWIN]}
    second = {"decomposition": "Locking, leases and recovery, kept apart.", "tracks": DISTINCT}
    llm = Scripted({"tracks_seed": [first, second]}, seed=1)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        ex.step(1)
        assert len(llm.asked("tracks_seed")) == 2
        assert "track_merges" not in root_answer_meta(ex)
        assert len(tracks_of(ex)) == 3


def test_fewer_than_three_distinct_tracks_degrade_the_result() -> None:
    plan = {"decomposition": "Locking and leases each bear on it.", "tracks": DISTINCT[:2]}
    llm = Scripted({"tracks_seed": [plan]}, seed=1)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        assert len(llm.asked("tracks_seed")) == 3 and "pose between 3 and" in llm.asked("tracks_seed")[1]
        assert len(tracks_of(ex)) == 2
        assert result.degraded
        assert any("2 usable questions" in r and "at least 3" in r for r in result.degraded_reasons)


def fake_model(body: dict[str, Any], duplicates: list[int]) -> dict[str, Any]:
    """The simulator's reply to the request, except TrackPlan: always a near-duplicate (counted)."""
    name = schema_name(body)
    if name == "TrackPlan":
        duplicates.append(1)
        return {"decomposition": "Locking, leases and recovery each bear on it.", "tracks": [*DISTINCT, TWIN]}
    schema = next(s for s in SCHEMAS if s.__name__ == name)
    messages: list[Message] = [{"role": "user", "content": first_user(body)}]
    return SimulatedLLM(seed=2).complete(messages, schema)


def test_near_duplicates_through_the_openai_client_are_asked_again_then_merged() -> None:
    asked: list[int] = []
    with FakeOpenAI(responder=lambda body: fake_model(body, asked)) as server:
        with (
            OpenAILLM(model="fake", base_url=server.base_url, api_key="x") as llm,
            Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex,
        ):
            ex.step(1)
            assert len(asked) == 2
            assert [t["name"] for t in tracks_of(ex)] == ["locking", "leases", "recovery"]
            assert root_answer_meta(ex)["track_merges"][0]["merged"] == "locks"
            prompts = [first_user(r) for r in server.requests if schema_name(r) == "TrackPlan"]
            assert "locking / locks" in prompts[1]


# -- a track's gates ---------------------------------------------------------------------------


OFF_TRACK = {
    "track": "x",
    "findings": [],
    "conclusions": "The weather was mild in spring, and gardens flowered early.",
    "gaps": ["Nothing about the question was examined."],
}


def test_the_relevance_gate_refuses_an_off_track_summary_then_marks_it_weak() -> None:
    llm = Scripted({"track_synthesis": [OFF_TRACK]}, seed=4)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        asked = llm.asked("track_synthesis")
        tracks = len(tracks_of(ex))
        assert len(asked) == 2 * tracks, "each track re-asked once"
        assert sum("did not answer the track's question" in p for p in asked) == tracks
        reasons = {r.split(":")[0] for w in result.weak for r in w["reasons"]}
        assert "off_track" in reasons


def test_a_summary_on_track_the_second_time_is_kept_sound() -> None:
    def on_track(focus: str) -> dict[str, Any]:
        return {"track": "t", "conclusions": f"The track finds that {focus}.", "gaps": []}

    llm = Scripted({"track_synthesis": [OFF_TRACK, on_track(DISTINCT[0]["focus"])]}, seed=4)
    plan = {"decomposition": "Locking, leases and recovery each bear on it.", "tracks": DISTINCT}
    llm.script["tracks_seed"] = [plan]
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        weak = {r.split(":")[0] for w in result.weak for r in w["reasons"]}
        # The first track was refused once, then answered on track; the others got the same (on the
        # first track's focus): the gate refuses them twice and marks them.
        assert weak == {"off_track", "weak"}
        marked = [w["question"] for w in result.weak if any(r.startswith("off_track") for r in w["reasons"])]
        assert len(marked) == 2 and not any(m.startswith("locking") for m in marked)


# -- resume ------------------------------------------------------------------------------------


CHILD = textwrap.dedent("""
    import json, sys, threading
    from fractal_nb import Exploration, SimulatedLLM

    class Holding(SimulatedLLM):
        # The first track synthesis holds its claim and says so: the kill lands mid-run.
        def complete(self, messages, schema):
            if getattr(schema, "role", "") == "track_synthesis":
                print(json.dumps({"holding": True}), flush=True)
                threading.Event().wait()
            return super().complete(messages, schema)

    ex = Exploration.create(sys.argv[2], intensity="pulse", llm=Holding(seed=5), strategy="tracks",
                            path=sys.argv[1])
    print(json.dumps({"graph_id": ex.graph_id}), flush=True)
    ex.run(progress=False)
""")


def test_a_killed_tracks_run_resumes_as_a_tracks_graph(tmp_path: Path) -> None:
    path = tmp_path / "tracks.duckdb"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), SEED], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    try:
        assert child.stdout is not None
        graph_id = json.loads(child.stdout.readline())["graph_id"]
        assert json.loads(child.stdout.readline()) == {"holding": True}
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    with GraphStore(path, read_only=True) as store:
        assert store.get_graph(graph_id)["metadata"]["strategy"] == "tracks"
    with Exploration.open(path, llm=SimulatedLLM(seed=5), clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        assert result.strategy == "tracks" and result.synthesis is not None
        found = tracks_of(ex)
        assert len(found) >= 3
        frame = ex.syntheses().dropna(subset=["track"])
        assert len(frame) == len(found) and set(frame["support"]) == {"no_sources"}
        check_finished_graph(ex)


# -- the fractal graph's aggregate, and the result's faces --------------------------------------


def test_a_fractal_harvest_can_aggregate_its_seed_questions() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(seed=6), clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest(aggregate=True)
        assert result.strategy == "fractal" and result.synthesis is not None
        assert result.synthesis["confidence"] in ("high", "medium", "low")
        seeds = ex.nodes().query("node_type == 'question' and depth == 1")
        assert len(result.synthesis["tracks"]) == len(seeds)
        assert ex.harvest().synthesis == result.synthesis, "kept with the harvest"
        with pytest.raises(InvalidInputError, match="aggregate"):
            ex.harvest(aggregate="yes")  # type: ignore[arg-type]


def test_a_harvested_fractal_graph_aggregates_without_keeping_it() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(seed=6), clock=FAST) as ex:
        ex.run(progress=False)
        assert ex.harvest().synthesis is None
        calls = len(ex.llm_calls())
        made = ex.harvest(aggregate=True).synthesis
        assert made is not None and len(ex.llm_calls()) == calls + 1
        assert ex.harvest().synthesis is None, "a finished graph takes no writes"


def test_the_synthesis_object_is_escaped_in_markdown_and_html() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(seed=7), strategy="tracks") as ex:
        ex.run(progress=False)
        result = ex.harvest()
    assert result.synthesis is not None
    hostile = {
        **result.synthesis,
        "unified": "<script>alert(1)</script>",
        "nuances": [{"text": "<b>", "tracks": ["<i>"]}],
    }
    shown = type(result)(
        **{**result.to_dict(), "synthesis": hostile, "synthesis_chain": result.synthesis_chain}
    )
    assert "<script>" not in shown._repr_html_() and "&lt;script&gt;" in shown._repr_html_()
    assert "<script>" not in shown.to_markdown() and "<b>" not in shown.to_markdown()


# -- with sources: findings cite them, the store checks them -------------------------------------

NOTES = "\n".join(
    [
        "# How the store keeps a claim atomic",
        "",
        "Every write takes the database lock before it reads the row it changes.",
        "A claim is a lease: the worker holds it for lease_s seconds.",
        "When the lease runs out another worker may take the claim over.",
        "",
        "A killed process leaves its claims behind in the file.",
        "On reopen, recover_stuck gives the claims of a dead holder back at once.",
        "The holder's pid and process start time tell a dead holder from a live one.",
    ]
)


def with_notes(ex: Exploration) -> None:
    ex.store.add_sources(
        ex.graph_id, [{"name": "notes.md", "kind": "snippet", "location": None, "text": NOTES}]
    )


def cite(line: int) -> dict[str, Any]:
    return {"source": "notes.md", "line_start": line, "line_end": line, "quote": NOTES.split("\n")[line - 1]}


def test_a_tracks_run_with_sources_cites_them_and_every_finding_is_checked() -> None:
    notes = Snippet(NOTES, name="notes.md")
    with Exploration.create(
        SEED, intensity="pulse", llm=SimulatedLLM(seed=8), strategy="tracks", sources=notes, clock=FAST
    ) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        assert not result.degraded, result.degraded_reasons
        frame = ex.syntheses()
        tracked = frame[frame["track"].notna()]
        assert "supported" in set(tracked["support"])
        uncited = {w["node_id"] for w in result.weak if any(r.startswith("uncited") for r in w["reasons"])}
        for row in tracked.itertuples():
            # A track cites what its evidence shows (real lines, checked), or is weak: it found none.
            assert (row.support == "supported") == (row.node_id not in uncited)
            findings = findings_of(ex, row.node_id)
            assert row.findings == len(findings) and all(f["support"] == "supported" for f in findings)
            assert all(c["status"] == "verified" for f in findings for c in f["citations"])
        assert result.findings and all(
            f["finding"].startswith("[simulated] notes.md line") for f in result.findings
        )
        assert result.synthesis is not None


SUPPORTED = "The store takes the database lock before it reads the row it changes."
MISQUOTED = "The store never locks anything, a claim is held forever by its worker."


def mixed(track_name: str) -> dict[str, Any]:
    return {
        "track": track_name,
        "findings": [
            {"finding": SUPPORTED, "citations": [cite(3)]},
            {"finding": MISQUOTED, "citations": [{**cite(4), "quote": "a claim is held forever"}]},
        ],
        "conclusions": "The track finds the store serializes writers with the database lock, "
        "and claim leases run out so another worker takes over after a killed process on reopen.",
        "gaps": ["Whether the lock is fair under heavy load."],
    }


def test_unsupported_findings_never_reach_the_aggregate_nor_the_result() -> None:
    llm = Scripted({"track_synthesis": [mixed("t")]}, seed=9)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        with_notes(ex)
        ex.run(progress=False)
        result = ex.harvest()
        frame = ex.syntheses()
        for node_id in frame[frame["track"].notna()]["node_id"]:
            findings = findings_of(ex, node_id)
            assert [f["support"] for f in findings] == ["supported", "unsupported"]
            assert findings[1]["citations"][0]["status"] == "misquoted"
        (aggregate,) = llm.asked("aggregate")
        assert SUPPORTED in aggregate and MISQUOTED not in aggregate
        assert {f["finding"] for f in result.findings} == {SUPPORTED}
        assert result.synthesis is not None
        assert "Whether the lock is fair under heavy load." in result.synthesis["open_questions"]


def test_a_track_with_no_supported_finding_is_weak_uncited() -> None:
    wrong = {**mixed("t"), "findings": mixed("t")["findings"][1:]}
    llm = Scripted({"track_synthesis": [wrong]}, seed=9)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        with_notes(ex)
        ex.run(progress=False)
        result = ex.harvest()
        reasons = {r.split(":")[0] for w in result.weak for r in w["reasons"]}
        assert "uncited" in reasons
        assert set(ex.syntheses().dropna(subset=["track"])["support"]) == {"unsupported"}
        assert result.findings == []
        (aggregate,) = llm.asked("aggregate")
        assert MISQUOTED not in aggregate


def test_a_tracks_seed_that_always_fails_leaves_the_root_open() -> None:
    llm = Scripted({"tracks_seed": [None]}, seed=1)
    with Exploration.create(SEED, intensity="pulse", llm=llm, strategy="tracks", clock=FAST) as ex:
        (record,) = ex.step(1)
        assert record.error and "scripted failure" in record.error
        assert len(llm.asked("tracks_seed")) == 3
        assert ex.nodes().iloc[0]["status"] == "open" and len(ex.nodes()) == 1


def test_a_budget_stops_the_tracks_seed_before_any_call() -> None:
    llm = Scripted({}, seed=1)
    unpriced = {"another-model": (1.0, 1.0)}  # a cost budget with no price for this model: no call
    with Exploration.create(
        SEED, intensity="pulse", llm=llm, strategy="tracks", max_cost=1.0, prices=unpriced, clock=FAST
    ) as ex:
        (record,) = ex.step(1)
        assert record.budget_reached and "no price" in record.budget_reached and llm.prompts == []


def test_a_failed_aggregate_leaves_the_fractal_result_without_a_synthesis_object() -> None:
    llm = Scripted({"aggregate": [None]}, seed=6)
    with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest(aggregate=True)
        assert result.synthesis is None and len(llm.asked("aggregate")) == 1
        assert result.status == "completed"


def test_the_synthesis_object_keeps_every_gap_real_tracks_and_a_justified_confidence() -> None:
    briefs = [
        {"name": "locking", "findings": [], "conclusions": "x", "gaps": ["Is the lock fair?"]},
        {"name": "leases", "findings": [], "conclusions": "y", "gaps": ["How long is a lease?"]},
    ]
    found = SynthesisObject.model_validate(
        {
            "unified": "Both tracks find that claims are atomic.",
            "nuances": [{"text": "They differ on timing.", "tracks": ["Locking", "queues"]}],
            "open_questions": ["is the lock fair"],
            "confidence": "high",
            "justification": "The tracks agree throughout.",
        }
    )
    made = checked_object(found, briefs)
    assert made["open_questions"] == ["is the lock fair", "How long is a lease?"], "a dropped gap is added"
    assert made["nuances"] == [{"text": "They differ on timing.", "tracks": ["locking"]}]
    assert made["confidence"] == "medium" and "Lowered from high" in made["justification"]
    calm = checked_object(found.model_copy(update={"nuances": []}), briefs)
    assert calm["confidence"] == "high" and calm["justification"] == "The tracks agree throughout."
