"""The whole graph informs an answer: through the real openai client, its prompt shows other branches'.

docs/architecture/engine.md, "Context from the whole graph" (issue 42, point 3).

Covers: engine/primitive.py, store/answer_index.py, store/context.py.
"""

from __future__ import annotations

from pathlib import Path

from fractal_nb import Exploration, GraphStore
from fractal_nb.engine.primitive import ELSEWHERE_CHARS
from tests.engine.test_openai_runs import FAST, role_responder
from tests.llm.fake_openai import FakeOpenAI

PLANTED = "Dredging the harbour channel every spring sets how much freight the port can take."
UNRELATED = "Taxes on fuel pay for the roads, and tolls for the bridges."
ASKED = "How does the harbour dredging schedule limit freight?"
HEADING = "Answers already given in other branches"


def _graph(path: Path) -> None:
    """Three branches: the harbour answered in the first, roads in the third, the harbour asked in the 2nd."""
    with GraphStore(path) as store:
        g = store.create_graph("What sets a port city's growth?", "explore", "autonomous")
        gid = g["graph_id"]
        seeds = store.add_answer(
            gid,
            g["root_node_id"],
            "Three ways in.",
            sub_questions=["How do ports trade?", "What limits a port?", "Who pays for roads?"],
        )["sub_questions"]
        store.add_answer(gid, seeds[0]["node_id"], PLANTED)
        store.add_answer(gid, seeds[2]["node_id"], UNRELATED)
        store.add_answer(gid, seeds[1]["node_id"], "It depends on the harbour.", sub_questions=[ASKED])


def _section(prompt: str) -> str:
    return prompt.split(HEADING, 1)[1].split("\n\n", 1)[0]


def test_the_answer_prompt_shows_the_related_answer_of_another_branch(tmp_path: Path) -> None:
    path = tmp_path / "g.duckdb"
    _graph(path)
    with (
        FakeOpenAI(responder=role_responder()) as server,
        Exploration.open(path, llm=server.llm(), clock=FAST) as ex,
    ):
        (step,) = ex.step(1)
        assert step.question == ASKED and step.error is None
    prompts = [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "user"]
    (asked,) = [p for p in prompts if "Question to answer now (depth 2" in p and ASKED in p]
    shown = _section(asked)
    assert (
        PLANTED in shown and UNRELATED not in shown
    )  # related, from another branch; the roads share no word
    assert len(shown) < 3 * (ELSEWHERE_CHARS + 10) + len(HEADING) + 100  # bounded
    # Connect judged it too: it was offered as a candidate of the other branch.
    (connect,) = [p for p in prompts if "Answers to compare with" in p]
    assert PLANTED in connect and "(other branch)" in connect


def test_an_answer_with_no_other_branch_answered_says_none_yet(tmp_path: Path) -> None:
    path = tmp_path / "g.duckdb"
    with GraphStore(path) as store:
        g = store.create_graph("What sets a port city's growth?", "explore", "autonomous")
        store.add_answer(g["graph_id"], g["root_node_id"], "One way in.", sub_questions=[ASKED])
    with (
        FakeOpenAI(responder=role_responder()) as server,
        Exploration.open(path, llm=server.llm(), clock=FAST) as ex,
    ):
        ex.step(1)
    prompts = [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "user"]
    (asked,) = [p for p in prompts if "Question to answer now" in p]
    assert _section(asked).strip().endswith("(none yet)")
