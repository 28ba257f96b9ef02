"""CachedLLM: record completions into the store, replay them without a model, or pass through.

Covers: store/llm_log.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fractal_nb import CachedLLM, Exploration, GraphStore, InvalidInputError, LLMError, SimulatedLLM
from fractal_nb.engine.dispatcher import ScaledClock
from fractal_nb.llm.protocol import LLM, Message, metered
from fractal_nb.llm.schemas import Answer, Connections, SeedPlan
from fractal_nb.prompts import chat

SEED = "Why do some cities grow faster than others?"
FAST = ScaledClock(0.001)
NODE_ID = re.compile(r"n-[0-9a-f]{16}")
A, B, C = "n-00000000000000a1", "n-00000000000000b2", "n-00000000000000c3"
X, Y, Z = "n-0000000000000f01", "n-0000000000000f02", "n-0000000000000f03"


class Counting:
    """A model that counts its calls and answers through a function of the messages."""

    def __init__(self, answer: Any, model: str = "counting") -> None:
        self.answer = answer
        self.model = model
        self.calls = 0

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        self.calls += 1
        return schema.model_validate(self.answer(messages, schema)).model_dump(mode="json")


def simulated_counting(seed: int = 0) -> Counting:
    sim = SimulatedLLM(seed=seed)
    return Counting(sim.complete, model=sim.model)


def connect_messages(*ids: str) -> list[Message]:
    candidates = "\n".join(f"- [{n}] answer number {k}" for k, n in enumerate(ids, start=1))
    return chat(
        "connect",
        question="What drives growth?",
        node_id="new",
        answer="Jobs and land.",
        candidates=candidates,
    )


def seed_messages(seed: str = SEED) -> list[Message]:
    return chat("seed", seed=seed, lo=3, hi=4)


def normalized(frame_texts: list[str]) -> list[str]:
    return [NODE_ID.sub("n-ID", t) for t in frame_texts]


def stepped(store: GraphStore, llm: LLM, steps: int, seed: str = SEED) -> Exploration:
    """A new graph in ``store`` worked by one thread for ``steps`` nodes."""
    graph = store.create_graph(seed, "explore", "autonomous")
    ex = Exploration(store, graph["graph_id"], llm, clock=FAST)
    ex.step(steps)
    return ex


# --- modes ---------------------------------------------------------------------------------


def test_record_stores_each_completion_in_the_store(fresh_store: GraphStore) -> None:
    inner = simulated_counting(3)
    llm = CachedLLM(inner, fresh_store, "record")
    messages = seed_messages()
    output = llm.complete(messages, SeedPlan)
    assert inner.calls == 1
    assert output == SimulatedLLM(seed=3).complete(messages, SeedPlan)
    key = llm._key(messages, SeedPlan, [])
    assert fresh_store.cache_get(key) == output
    assert fresh_store.cache_get("no-such-key") is None
    assert llm.model == inner.model == "simulated-3"
    assert isinstance(llm, LLM)


def test_record_calls_the_model_every_time(fresh_store: GraphStore) -> None:
    inner = simulated_counting()
    llm = CachedLLM(inner, fresh_store, "record")
    llm.complete(seed_messages(), SeedPlan)
    llm.complete(seed_messages(), SeedPlan)
    assert inner.calls == 2  # record refreshes; only replay answers from the store


def test_replay_answers_without_a_model(fresh_store: GraphStore) -> None:
    recorder = CachedLLM(simulated_counting(), fresh_store, "record")
    recorded = recorder.complete(seed_messages(), SeedPlan)
    replay = CachedLLM(None, fresh_store, "replay")
    assert replay.model == "replay"
    with metered() as usage:
        assert replay.complete(seed_messages(), SeedPlan) == recorded
    assert usage.cached and usage.attempts == 1 and usage.prompt_tokens > 0
    assert usage.completion_tokens > 0


def test_replay_keys_on_schema_and_every_message(fresh_store: GraphStore) -> None:
    CachedLLM(simulated_counting(), fresh_store, "record").complete(seed_messages(), SeedPlan)
    replay = CachedLLM(None, fresh_store, "replay")
    with pytest.raises(LLMError, match="no recorded SeedPlan"):
        replay.complete(seed_messages("Why do rivers meander?"), SeedPlan)
    with pytest.raises(LLMError, match="no recorded Answer"):
        replay.complete(seed_messages(), Answer)
    other_system = [{"role": "system", "content": "Be brief."}, seed_messages()[1]]
    with pytest.raises(LLMError, match="replay mode"):
        replay.complete(other_system, SeedPlan)


def test_replay_hit_with_a_model_does_not_call_it(fresh_store: GraphStore) -> None:
    CachedLLM(simulated_counting(), fresh_store, "record").complete(seed_messages(), SeedPlan)
    inner = simulated_counting()
    CachedLLM(inner, fresh_store, "replay").complete(seed_messages(), SeedPlan)
    assert inner.calls == 0
    with pytest.raises(LLMError):  # a miss is a miss even with a model at hand
        CachedLLM(inner, fresh_store, "replay").complete(seed_messages("Other?"), SeedPlan)
    assert inner.calls == 0


def test_off_passes_through_and_stores_nothing(fresh_store: GraphStore) -> None:
    inner = simulated_counting(5)
    llm = CachedLLM(inner, fresh_store, "off")
    output = llm.complete(seed_messages(), SeedPlan)
    assert output == SimulatedLLM(seed=5).complete(seed_messages(), SeedPlan)
    assert inner.calls == 1
    assert fresh_store.cache_get(llm._key(seed_messages(), SeedPlan, [])) is None
    with pytest.raises(LLMError):
        CachedLLM(None, fresh_store, "replay").complete(seed_messages(), SeedPlan)


def test_model_errors_pass_through_and_are_not_recorded(fresh_store: GraphStore) -> None:
    llm = CachedLLM(SimulatedLLM(failure_rate=1.0), fresh_store, "record")
    with pytest.raises(LLMError, match="simulated failure"):
        llm.complete(seed_messages(), SeedPlan)
    with pytest.raises(LLMError, match="no recorded"):
        CachedLLM(None, fresh_store, "replay").complete(seed_messages(), SeedPlan)


@pytest.mark.parametrize("mode", ["Replay", "write", "", None, 1])
def test_bad_mode_raises_invalid_input(fresh_store: GraphStore, mode: Any) -> None:
    with pytest.raises(InvalidInputError, match="cache mode"):
        CachedLLM(SimulatedLLM(), fresh_store, mode)


@pytest.mark.parametrize("mode", ["record", "off"])
def test_record_and_off_need_a_model(fresh_store: GraphStore, mode: str) -> None:
    with pytest.raises(InvalidInputError, match="needs a model"):
        CachedLLM(None, fresh_store, mode)  # type: ignore[arg-type]


def test_the_default_mode_is_record(fresh_store: GraphStore) -> None:
    llm = CachedLLM(SimulatedLLM(), fresh_store)
    assert llm.mode == "record"
    assert "record" in repr(llm) and "SimulatedLLM" in repr(llm)


# --- node ids --------------------------------------------------------------------------


def test_ids_in_a_recorded_connect_response_map_to_the_current_prompt(fresh_store: GraphStore) -> None:
    def link_second_and_third(messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        ids = NODE_ID.findall(messages[-1]["content"])
        return {
            "convergences": [{"node_id": ids[1], "note": f"agrees with {ids[1]}"}],
            "contradictions": [{"node_id": ids[2], "note": "it disagrees"}],
        }

    recorded = CachedLLM(Counting(link_second_and_third), fresh_store, "record").complete(
        connect_messages(A, B, C), Connections
    )
    assert recorded["convergences"][0]["node_id"] == B
    # The store holds positional stand-ins, not this run's ids.
    replay = CachedLLM(None, fresh_store, "replay")
    key = replay._key(connect_messages(A, B, C), Connections, [A, B, C])
    stored = json.dumps(fresh_store.cache_get(key))
    assert "[id2]" in stored and "[id3]" in stored and not NODE_ID.search(stored)

    replayed = replay.complete(connect_messages(X, Y, Z), Connections)
    assert replayed == {
        "convergences": [{"node_id": Y, "note": f"agrees with {Y}"}],
        "contradictions": [{"node_id": Z, "note": "it disagrees"}],
    }


def test_ids_are_positional_so_other_ids_in_the_same_places_hit(fresh_store: GraphStore) -> None:
    def link_first(messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        first = NODE_ID.findall(messages[-1]["content"])[0]
        return {"convergences": [{"node_id": first, "note": "the same conclusion"}], "contradictions": []}

    recorder = CachedLLM(Counting(link_first), fresh_store, "record")
    recorder.complete(connect_messages(A, B), Connections)
    replay = CachedLLM(None, fresh_store, "replay")
    # Same shape with other ids (even reused in another order) is a hit, mapped by position.
    assert replay.complete(connect_messages(B, A), Connections)["convergences"][0]["node_id"] == B
    # A prompt with another number of candidates is a miss.
    with pytest.raises(LLMError):
        replay.complete(connect_messages(A, B, C), Connections)


def test_ten_or_more_ids_are_restored_exactly(fresh_store: GraphStore) -> None:
    ids = [f"n-{k:016x}" for k in range(1, 13)]
    others = [f"n-{k:016x}" for k in range(101, 113)]

    def link_all(messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        shown = NODE_ID.findall(messages[-1]["content"])
        return {
            "convergences": [{"node_id": n, "note": f"agrees about {n}"} for n in shown],
            "contradictions": [],
        }

    recorder = CachedLLM(Counting(link_all), fresh_store, "record")
    recorder.complete(connect_messages(*ids), Connections)
    replay = CachedLLM(None, fresh_store, "replay")
    replayed = replay.complete(connect_messages(*others), Connections)
    # [id1] never eats the start of [id11]: every id comes back in its own place.
    assert [link["node_id"] for link in replayed["convergences"]] == others
    assert [link["note"] for link in replayed["convergences"]] == [f"agrees about {n}" for n in others]


# --- whole runs ------------------------------------------------------------------------


def test_a_recorded_step_run_replays_on_a_new_graph_without_a_model(tmp_path: Path) -> None:
    path = tmp_path / "cache.duckdb"
    with GraphStore(path) as store:
        inner = simulated_counting(11)
        first = stepped(store, CachedLLM(inner, store, "record"), 14)
        first_texts = normalized(first.nodes()["text"].tolist())
        first_status = first.nodes()["status"].tolist()
        first_roles = first.llm_calls()["role"].tolist()
        first_ids = set(first.nodes()["node_id"])
        assert inner.calls == len(first_roles) > 14
        assert set(first.llm_calls()["outcome"]) == {"ok"}
        assert {"seed", "answer", "synthesize"} <= set(first_roles)

    with GraphStore(path) as store:  # the cache is in the file: it outlives the process's store
        second = stepped(store, CachedLLM(None, store, "replay"), 14)
        assert second.graph_id != first.graph_id
        assert set(second.nodes()["node_id"]).isdisjoint(first_ids)
        assert normalized(second.nodes()["text"].tolist()) == first_texts
        assert second.nodes()["status"].tolist() == first_status
        calls = second.llm_calls()
        assert calls["role"].tolist() == first_roles
        assert set(calls["outcome"]) == {"cached"}
        assert (calls["model"] == "replay").all()
        assert not second.nodes()["text"].str.contains(r"\[id\d+\]").any()


def test_a_replay_miss_fails_the_step_and_is_logged(fresh_store: GraphStore) -> None:
    stepped(fresh_store, CachedLLM(SimulatedLLM(seed=1), fresh_store, "record"), 3)
    ex = stepped(
        fresh_store, CachedLLM(None, fresh_store, "replay"), 3, seed="A seed that was never recorded?"
    )
    calls = ex.llm_calls()
    assert len(calls) >= 1 and (calls["outcome"] == "error").all()
    assert calls["error"].str.contains("LLMError: no recorded SeedPlan").all()
    assert calls["role"].eq("seed").all()
    assert len(ex.nodes()) == 1 and ex.nodes()["status"].iloc[0] == "open"  # nothing written


def test_replay_of_a_partly_recorded_run_fails_where_the_recording_ends(fresh_store: GraphStore) -> None:
    stepped(fresh_store, CachedLLM(SimulatedLLM(seed=2), fresh_store, "record"), 3)
    ex = stepped(fresh_store, CachedLLM(None, fresh_store, "replay"), 3)
    records = ex.step(2)  # beyond the recording: the answers miss
    assert records and not any(r.ok for r in records)
    # The next questions may sit at the last level (a LeafAnswer) or above it (an Answer): both miss.
    assert all(re.search(r"no recorded (Leaf)?Answer ", r.error or "") for r in records)
    calls = ex.llm_calls()
    assert (calls["outcome"] == "cached").sum() >= 3
    errors = calls[calls["outcome"] == "error"]
    assert len(errors) == len(records) and set(errors["role"]) == {"answer"}
    released = ex.nodes().set_index("node_id").loc[[r.node_id for r in records], "status"]
    assert (released == "open").all()  # a miss leaves the question claimable again
