"""The Gates tab answers a worker's question to the person (docs/architecture/engine.md, "Halts").

The panel's own buttons are clicked in process, as a person would: an option button, the text box
with its Answer / Clarify button, Prune; each outcome is checked in the store and in the next
answer prompt the model is sent.

Covers: views/gates_tab.py.
"""

from __future__ import annotations

import html

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.views import ExplorationView
from fractal_nb.views.held_questions import TICKED_BORDER, UNTICKED_BORDER, WRAPPED, GateList
from tests.engine.test_halts import SEED, RecordingLLM
from tests.engine.test_runs import FAST
from tests.views.test_control_panel import settle


def held_view(kind: str) -> tuple[Exploration, ExplorationView, RecordingLLM]:
    llm = RecordingLLM(halt_on={"depot": kind})
    ex = Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST)
    view = ex.view()
    view.run_button.click()
    settle(view)
    return ex, view, llm


def test_an_option_button_answers_the_held_question_and_the_run_goes_on_with_it() -> None:
    ex, view, llm = held_view("ambiguity")
    with ex:
        assert "run: paused (" in view.message.value and "held for your answer" in view.message.value
        cards = view.gates.held_cards
        assert len(cards) >= 3 and view.tabs.selected_index == 0, "the Gates tab is brought forward"
        assert view.gates.gate_list.options == (), "a held question is not offered for approval"
        assert f"{len(cards)} question(s) a worker holds for your answer" in view.gates.gate_note.value
        assert "wait for your answer there" in view.status_rows.guide.value and view.run_button.disabled
        card = cards[0]
        halt = ex.store.get_node(ex.graph_id, card.node_id)["node"]["metadata"]["halt"]
        assert [b.description for b in card.option_buttons] == [o["option"] for o in halt["options"]]
        assert halt["options"][1]["tradeoffs"] in card.option_buttons[1].tooltip
        assert (
            "[simulated] slower, more general" in card.text.value
            and card.answer_button.description == "Answer"
        )
        question = ex.store.get_node(ex.graph_id, card.node_id)["node"]["text"]

        card.option_buttons[1].click()
        settle(view)
        assert f"answered {card.node_id}" in view.message.value and "your choice" in view.message.value
        node = ex.store.get_node(ex.graph_id, card.node_id)["node"]
        assert node["status"] == "open" and node["metadata"]["choice"]["text"] == halt["options"][1]["option"]
        assert card.node_id not in [c.node_id for c in view.gates.held_cards], "its card is gone"
        # The other held questions: a free answer typed in the box.
        for other in view.gates.held_cards:
            other.answer.value = "the site by the motorway junction"
            other.answer_button.click()
        settle(view)
        assert view.gates.held_cards == [] and not view.run_button.disabled
        view.run_button.click()
        settle(view)
        assert "run: all_complete" in view.message.value
        assert f"The person chose: {halt['options'][1]['option']}" in llm.prompts_for(question)[-1]


def test_a_clarification_typed_in_the_panel_reaches_the_next_answer() -> None:
    ex, view, llm = held_view("confusion")
    with ex:
        card = view.gates.held_cards[0]
        assert card.option_buttons == [] and card.answer_button.description == "Clarify"
        question = ex.store.get_node(ex.graph_id, card.node_id)["node"]["text"]
        card.answer_button.click()  # nothing typed: said, and nothing changes
        settle(view)
        assert "type a clarification first" in view.message.value
        assert ex.store.get_node(ex.graph_id, card.node_id)["node"]["status"] == "gated"
        card.answer.value = "A depot <b>for vans</b>, not trucks."
        card.answer_button.click()
        settle(view)
        assert "your clarification" in view.message.value and "<b>for vans</b>" not in view.message.value
        view.step_button.click()
        settle(view)
        assert "The person clarified: A depot <b>for vans</b>, not trucks." in llm.prompts_for(question)[-1]


def test_prune_on_a_held_card_cuts_the_question_and_model_text_is_escaped() -> None:
    ex, view, _ = held_view("ambiguity")
    with ex:
        card = view.gates.held_cards[0]
        assert "<script" not in card.text.value and "&#x27;" in card.text.value, "model text is escaped"
        card.prune_button.click()
        settle(view)
        assert f"pruned the held question {card.node_id}" in view.message.value
        node = ex.store.get_node(ex.graph_id, card.node_id)["node"]
        assert node["status"] == "saturated" and node["status_reason"] == "pruned"
        assert card.node_id not in [c.node_id for c in view.gates.held_cards]


# A seed whose sub-questions are longer than the 90 characters the old list clipped them to.
LONG_SEED = (
    "Should a city build a light rail line from the station to the university campus and the new harbour "
    "district?"
)


def test_the_gate_list_shows_each_question_whole_and_a_tick_chooses_it() -> None:
    """Each gated question is listed whole, wrapped, escaped (issue 38: cut at ~45 characters)."""
    hostile = "<img src=x onerror='window.__pwned=1'> " + "a question long enough to wrap " * 6
    gates = GateList()
    chosen: list[tuple[str, ...]] = []
    gates.observe(lambda change: chosen.append(change["new"]), names="value")
    gates.options = [("Which ports grew first?", "n-1"), (hostile, "n-2"), ("Who paid?", "n-3")]
    texts = [row.children[1].value for row in gates.rows]
    assert html.escape(hostile) in texts[1] and "<img" not in texts[1], "whole, and escaped"
    assert all("white-space:normal" in text for text in texts), "wrapped to the column"
    # The person ticks two: value holds them in the list's order, each tick shown on its row.
    gates.rows[2].children[0].value = True
    gates.rows[1].children[0].value = True
    assert gates.value == ("n-2", "n-3") and chosen == [("n-3",), ("n-2", "n-3")]
    assert [row.layout.border_left for row in gates.rows] == [UNTICKED_BORDER, TICKED_BORDER, TICKED_BORDER]
    # Approved elsewhere, n-2 leaves the list: n-3 keeps its tick, a new question comes unticked.
    gates.options = [("Which ports grew first?", "n-1"), ("Who paid?", "n-3"), ("Who built?", "n-4")]
    assert gates.value == ("n-3",) and [row.children[0].value for row in gates.rows] == [False, True, False]
    # Set from code: the boxes follow at once, with no passing state; an id not listed is dropped.
    chosen.clear()
    gates.value = ("n-4", "n-1", "n-9")
    assert gates.value == ("n-1", "n-4") and chosen == [("n-1", "n-4")]
    assert [row.children[0].value for row in gates.rows] == [True, False, True]
    rows = gates.rows
    gates.close()
    assert gates.rows == [] and all(row.comm is None for row in rows), "its widgets are closed"


def test_the_panel_lists_the_gated_questions_whole_and_approves_and_prunes_the_ticked() -> None:
    with Exploration.create(
        LONG_SEED, intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=2), clock=FAST
    ) as ex:
        ex.step(1)
        view = ex.view()
        gated = ex.gates.set_index("node_id")["text"].to_dict()
        assert max(len(text) for text in gated.values()) > 90, "the seed makes long questions"
        assert isinstance(view.gates.gate_list, GateList)
        shown = {row.children[1].value for row in view.gates.gate_list.rows}
        assert {f"<div style='{WRAPPED}'>{html.escape(t)}</div>" for t in gated.values()} == shown, (
            "every gated question, whole"
        )
        first, second, *_ = gated
        view.gates.gate_list.rows[0].children[0].value = True  # the person ticks the first
        view.refresh()
        assert view.network.selected == first, "the ticked question is selected in the tree too"
        view.gates.approve_button.click()
        settle(view)
        assert "approved 1 gated question(s)" in view.message.value
        assert ex.store.get_node(ex.graph_id, first)["node"]["status"] == "open"
        assert [node_id for _text, node_id in view.gates.gate_list.options][0] == second
        view.gates.gate_list.rows[0].children[0].value = True
        view.gates.prune_gate_button.click()
        settle(view)
        assert "pruned 1 gated question(s)" in view.message.value
        node = ex.store.get_node(ex.graph_id, second)["node"]
        assert (node["status"], node["status_reason"]) == ("saturated", "pruned")
        assert second not in dict(view.gates.gate_list.options).values() and view.gates.gate_list.value == ()
        view.close()


def test_a_question_still_listed_keeps_its_row_so_a_tick_on_its_way_counts() -> None:
    """The list changing (a gate approved) while a tick travels from the page loses no tick."""
    gates = GateList()
    gates.options = [
        ("Who pays for it?", "n-1"),
        ("What does it displace?", "n-2"),
        ("Who opposes it?", "n-3"),
    ]
    box = gates.rows[1].children[0]
    gates.options = [("What does it displace?", "n-2"), ("Who opposes it?", "n-3")]  # n-1 approved
    assert gates.rows[0].children[0] is box, "the row of a question still listed is kept"
    box.value = True  # the page's tick, arriving after the list changed
    assert gates.value == ("n-2",)
    gates.options = [("What does it displace?", "n-2")]
    assert gates.value == ("n-2",) and gates.rows[0].children[0] is box
