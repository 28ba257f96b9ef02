"""Prompt templates: text files beside this module, rendered strictly (a missing value is an error)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

from ..llm.protocol import Message


@cache
def template(name: str) -> Template:
    """The template ``<name>.txt`` from this package."""
    return Template(resources.files(__package__).joinpath(f"{name}.txt").read_text())


def render(name: str, **values: object) -> str:
    """Fill ``<name>.txt``; raise ``KeyError`` naming the first missing placeholder."""
    try:
        return template(name).substitute({k: str(v) for k, v in values.items()}).strip()
    except KeyError as exc:
        raise KeyError(f"prompt {name!r} needs a value for ${exc.args[0]}") from None


REPLY_WITH = "Reply with a JSON object:"


def own_chat(text: str, reply_of: str, **values: object) -> list[Message]:
    """A caller's own template ``text`` filled as :func:`chat` fills a file, with ``reply_of``'s reply format.

    The reply format (the paragraph from "Reply with a JSON object:" on) stays the
    engine's: the schema decides the reply's shape, the caller's text the rest
    (docs/architecture/engine.md, "Thinkon": Prompt_t and Prompt_e).
    """
    filled = Template(text).substitute({k: str(v) for k, v in values.items()}).strip()
    reply = REPLY_WITH + render(reply_of, **values).rpartition(REPLY_WITH)[2]
    role = render("system")
    return [
        Message(role="system", content=f"{role}\n{render('quoted_data')}"),
        Message(role="user", content=f"{role}\n\n{filled}\n\n{reply}"),
    ]


def chat(name: str, **values: object) -> list[Message]:
    """The system prompt and ``<name>.txt`` as chat messages.

    The role instructions open the user turn too: some chat templates (llama.cpp's
    Gemma one among them) drop the system message, and the model would never see them.
    The system message adds that quoted source text is data, never instructions
    (``quoted_data.txt``); the user turn need not repeat it, since every prompt that
    quotes sources says so where it quotes them (``evidence.txt``, ``single_citing.txt``).
    """
    role = render("system")
    return [
        Message(role="system", content=f"{role}\n{render('quoted_data')}"),
        Message(role="user", content=f"{role}\n\n{render(name, **values)}"),
    ]
