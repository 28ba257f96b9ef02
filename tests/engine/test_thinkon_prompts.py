"""The caller's own Prompt_t and Prompt_e (seed 002, issue 42 point 5): kept with the graph, sent as given.

``Exploration.create(strategy="thinkon", prompts={"think": ..., "eval": ...})``: each
is a template of the level's values; the engine adds the reply format the schema
needs. Through a real OpenAI-compatible server on 127.0.0.1, the requests carry
the caller's text; a bad template is refused before anything is written.

Covers: engine/strategies/thinkon.py, prompts/__init__.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.errors import InvalidInputError
from fractal_nb.llm.schemas import SCHEMAS
from tests.engine.test_openai_runs import first_user, schema_name
from tests.engine.test_runs import FAST
from tests.llm.fake_openai import FakeOpenAI

SEED = "Should a mid-sized city build a tram line?"
THINK = (
    "MY THINK. As the city's planner, either settle this now or plan it in steps.\n"
    "Goal of this level: $goal\nDepth: $depth of at most $max_depth"
)
EVAL = (
    "MY EVAL. Goal of this level: $goal\nDepth: $depth of at most $max_depth\n"
    "The plan:\n$todo\nReturned so far:\n$done\nCall the next step or return."
)


def simulated(body: dict[str, Any]) -> dict[str, Any]:
    """The server's model: the simulator's reply to the prompt it is sent."""
    schema = next(s for s in SCHEMAS if s.__name__ == schema_name(body))
    return SimulatedLLM(seed=4).complete([{"role": "user", "content": first_user(body)}], schema)


def test_the_callers_prompts_are_what_think_and_eval_send_and_the_graph_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "chain.duckdb"
    with FakeOpenAI("llama_cpp", responder=simulated) as server:
        with Exploration.create(
            SEED,
            intensity="pulse",
            llm=server.llm(timeout=5.0, max_retries=0),
            strategy="thinkon",
            prompts={"think": THINK, "eval": EVAL},
            path=path,
            clock=FAST,
        ) as ex:
            ex.run(progress=False)
            result = ex.harvest()
        sent = {(schema_name(r), first_user(r)) for r in server.requests}
    thinks = [text for name, text in sent if name == "Think"]
    evals = [text for name, text in sent if name == "Eval"]
    assert thinks and all("MY THINK. As the city's planner" in t for t in thinks)
    assert any(f"Goal of this level: {SEED}" in t for t in thinks)
    assert evals and all("MY EVAL. Goal of this level: " in t and "Returned so far:" in t for t in evals)
    # The engine's reply format follows the caller's text: the schema's shape is not the caller's to drop.
    assert all('Reply with a JSON object: type ("RETURN"' in t for t in thinks)
    assert all('Reply with a JSON object: type ("CALL"' in t for t in evals)
    assert result.strategy == "thinkon" and result.summary
    with Exploration.open(path, llm=SimulatedLLM(), read_only=True) as again:
        kept = again.store.get_graph(again.graph_id)["metadata"]["prompts"]
        assert kept == {"think": THINK, "eval": EVAL}


@pytest.mark.parametrize(
    ("prompts", "strategy", "said"),
    [
        ({"think": "Plan $goal", "judge": "x $goal"}, "thinkon", "prompts names 'judge'"),
        ({"eval": "Judge $goal and go on."}, "thinkon", "prompts['eval'] must name $done"),
        ({"think": "Plan it."}, "thinkon", "prompts['think'] must name $goal"),
        ({"think": "Plan $goal for $city"}, "thinkon", "names $city, no value it may name"),
        ({"think": "Plan $goal for $5"}, "thinkon", "is no template"),
        ({"think": ""}, "thinkon", "must be a template text"),
        ("Plan $goal", "thinkon", "prompts must be a dict"),
        ({"think": "Plan $goal"}, "fractal", "strategy 'fractal' takes none"),
    ],
)
def test_a_bad_prompt_is_refused_and_nothing_is_written(
    prompts: Any, strategy: str, said: str, tmp_path: Path
) -> None:
    path = tmp_path / "refused.duckdb"
    with pytest.raises(InvalidInputError, match=None) as raised:
        Exploration.create(SEED, llm=SimulatedLLM(), strategy=strategy, prompts=prompts, path=path)
    assert said in str(raised.value)
    assert not path.exists()
