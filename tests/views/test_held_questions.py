"""The Gates tab answers a worker's question to the person (docs/architecture.md, "Halts").

The panel's own buttons are clicked in process, as a person would: an option button, the text box
with its Answer / Clarify button, Prune; each outcome is checked in the store and in the next
answer prompt the model is sent.
"""

from __future__ import annotations

from fractal_nb import Exploration
from fractal_nb.views import ExplorationView
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
        cards = view.held_cards
        assert len(cards) >= 3 and view.tabs.selected_index == 0, "the Gates tab is brought forward"
        assert view.gate_list.options == (), "a held question is not offered for approval"
        assert f"{len(cards)} question(s) a worker holds for your answer" in view.gate_note.value
        assert "wait for your answer there" in view.guide.value and view.run_button.disabled
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
        assert card.node_id not in [c.node_id for c in view.held_cards], "its card is gone"
        # The other held questions: a free answer typed in the box.
        for other in view.held_cards:
            other.answer.value = "the site by the motorway junction"
            other.answer_button.click()
        settle(view)
        assert view.held_cards == [] and not view.run_button.disabled
        view.run_button.click()
        settle(view)
        assert "run: all_complete" in view.message.value
        assert f"The person chose: {halt['options'][1]['option']}" in llm.prompts_for(question)[-1]


def test_a_clarification_typed_in_the_panel_reaches_the_next_answer() -> None:
    ex, view, llm = held_view("confusion")
    with ex:
        card = view.held_cards[0]
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
        card = view.held_cards[0]
        assert "<script" not in card.text.value and "&#x27;" in card.text.value, "model text is escaped"
        card.prune_button.click()
        settle(view)
        assert f"pruned the held question {card.node_id}" in view.message.value
        node = ex.store.get_node(ex.graph_id, card.node_id)["node"]
        assert node["status"] == "saturated" and node["status_reason"] == "pruned"
        assert card.node_id not in [c.node_id for c in view.held_cards]
