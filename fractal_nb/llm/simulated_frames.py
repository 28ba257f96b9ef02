"""How :class:`~fractal_nb.SimulatedLLM` reads a question it did not write (issue 27).

The seed, a person's question or a widened seed is read as a :class:`Frame`: a
decision ("Should a city build a tram line?": its verb and object), a cause
("Why do rivers meander?": its subject and verb) or anything else (its main
noun phrase). A rough reading, from a few word lists: the simulated texts built
on it only have to sound right, and never paste the question again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

DECISION, CAUSE, GENERIC = "decision", "cause", "generic"
FALLBACK_THING = "the question at hand"

_QUESTION_WORDS = frozenset("why how what which who whom whose when where whether".split())
_MODALS = frozenset("should shall can could would will must may might".split())
_DO = frozenset({"do", "does", "did"})
_COPULAS = frozenset({"is", "are", "was", "were"})
_AUXILIARIES = _MODALS | _DO | _COPULAS | {"has", "have", "had"}
_SINGULAR_AUX = frozenset({"does", "has", "is", "was"})
_DETERMINERS = frozenset(
    "a an the some many most more few several this that these those its their our your my his her every "
    "each any all no two three four five ten".split()
)
_QUANTIFIERS = frozenset({"some", "many", "most", "all", "several", "few", "more"})
_PRONOUNS = frozenset({"it", "they", "we", "you", "i", "he", "she", "one", "people"})
_PREPOSITIONS = frozenset(
    "of in on at for to from with by about over under into between through than as across without within "
    "during after before behind against among per".split()
)
_ADJECTIVAL = re.compile(r"(?:ed|al|ic|ive|ful|less|ous|ern|ish|sized|ary|ent|ant)$")
_COMMON_ADJECTIVES = frozenset("new old small large big local public remote urban rural main".split())
_ADVERBS = frozenset("faster slower more less twice so too much most often again".split())
_PREDICATES = frozenset(
    "worth good bad better worse enough possible true false likely necessary useful safe fair right "
    "wrong".split()
)


@dataclass(frozen=True)
class Frame:
    """What a question is about: its kind, its main noun phrase and (for a decision or a cause) its verb.

    ``rest`` is what a cause's verb takes ("keep *a claim atomic*"): a few words, none for a verb with
    an adverb ("grow faster than others" is a comparison the angles make for themselves).
    """

    kind: str
    thing: str
    verb: str = ""
    singular: bool = False
    rest: str = ""

    @property
    def slots(self) -> dict[str, str]:
        """The values the seed questions' templates are filled with."""
        verb = " ".join(filter(None, [self.verb, self.rest]))
        return {
            "t": self.thing,
            "v": verb,
            "vs": third_person(verb) if self.singular else verb,
            "do": "does" if self.singular else "do",
        }

    @property
    def subject(self) -> str:
        """The frame as a noun phrase an answer can start from."""
        if self.kind == DECISION and self.verb:
            return f"the choice to {self.verb} {self.thing}"
        if self.kind == CAUSE:
            return f"the reasons {self.thing} {self.slots['vs']}"
        return self.thing


def read_frame(text: str) -> Frame:
    """The frame of any question or statement (a rough reading: it only has to sound right).

    >>> read_frame("Should a mid-sized city build a tram line?")
    Frame(kind='decision', thing='a tram line', verb='build', singular=False, rest='')
    >>> read_frame("Why do some cities grow faster than others?")
    Frame(kind='cause', thing='cities', verb='grow', singular=False, rest='')
    >>> read_frame("Where should the new depot go?").thing
    'the new depot'
    """
    words = [w.strip(",;:!?.\"'“”()[]") for w in text.replace("[simulated]", " ").split()]
    words = [w for w in words if w]
    low = [w.lower() for w in words]
    if not words:
        return Frame(GENERIC, FALLBACK_THING)
    if low[0] in _QUESTION_WORDS:
        start = 2 if low[:2] == ["how", "come"] else 1
        aux = next((k for k in range(start, min(start + 3, len(low))) if low[k] in _AUXILIARIES), None)
        if aux is None:  # "What drives growth?", "Which services employ most people?", "How come ...?"
            rest = words[start:]
            if low[:2] == ["how", "come"]:
                return _clause_frame(rest, CAUSE, singular=None)
            if low[0] in ("what", "who") and len(rest) > 1 and _verb_like(rest[0]):
                rest = rest[1:]
            return Frame(GENERIC, _noun_phrase(rest))
        if low[aux] in _COPULAS:
            whole = low[0] in ("what", "which", "who") and aux == start  # "What are the main causes of X?"
            return Frame(GENERIC, _copula_phrase(words[aux + 1 :], whole=whole))
        kind = GENERIC
        if low[0] in ("why", "how"):  # "Where should the depot go?" is about the depot
            kind = DECISION if low[aux] in _MODALS else CAUSE if low[aux] in _DO else GENERIC
        return _clause_frame(words[aux + 1 :], kind, singular=low[aux] in _SINGULAR_AUX)
    if low[0] in _COPULAS:
        return Frame(GENERIC, _copula_phrase(words[1:]))
    if low[0] in _AUXILIARIES:
        return _clause_frame(words[1:], DECISION if low[0] in _MODALS else GENERIC, low[0] in _SINGULAR_AUX)
    if len(low) > 2 and low[1] in _DETERMINERS and low[0] not in _DETERMINERS and not _plural(low[0]):
        return Frame(GENERIC, _topic(words[1:]))  # a task ("Write an essay on remote work"): what it is about
    first = words[0] if words[0].isupper() and len(words[0]) > 1 else words[0][:1].lower() + words[0][1:]
    return Frame(GENERIC, _noun_phrase([first, *words[1:]]))  # a claim or a goal: its first noun phrase


def third_person(verb: str) -> str:
    """``verb`` (and what it takes) after he, she or it.

    >>> [third_person(v) for v in ("grow", "go", "carry", "reach", "have", "keep it cool")]
    ['grows', 'goes', 'carries', 'reaches', 'has', 'keeps it cool']
    """
    verb, space, rest = verb.partition(" ")
    return _third_person(verb) + space + rest


def capital(text: str) -> str:
    """``text`` with its first letter upper case (the rest as it is)."""
    return text[:1].upper() + text[1:]


def _clause_frame(words: list[str], kind: str, singular: bool | None) -> Frame:
    """A subject, a verb and what follows, after an auxiliary ("... a city build a tram line")."""
    if not words:
        return Frame(GENERIC, FALLBACK_THING)
    end = _subject_end([w.lower() for w in words])
    subject, verb, rest = (
        _drop_quantifier(words[:end]),
        (words[end] if end < len(words) else ""),
        words[end + 1 :],
    )
    while rest and rest[0].lower() in _PREPOSITIONS:  # "focus on housing": housing
        rest = rest[1:]
    if singular is None:
        singular = not _plural(subject[-1].lower()) if subject else False
    thing = " ".join(subject) or FALLBACK_THING
    pronoun = thing.lower() in _PRONOUNS
    if kind == DECISION and verb and rest:
        return Frame(DECISION, _decided(rest, [] if pronoun else subject), verb.lower())
    if kind in (DECISION, CAUSE) and verb:  # "How far does it scale?": how it scales
        return Frame(
            CAUSE,
            thing.lower() if pronoun else thing,
            verb.lower(),
            singular=thing.lower() in ("it", "he", "she", "one") if pronoun else singular,
            rest=_complement(rest),
        )
    return Frame(GENERIC, thing if not pronoun else _noun_phrase(rest) or thing)


def _decided(rest: list[str], owner: list[str]) -> str:
    """What a decision is about: its alternatives without the second one's verb, its pronouns named.

    >>> _decided("a tram line or expand its bus network".split(), "a mid-sized city".split())
    "a tram line or the mid-sized city's bus network"
    >>> _decided("its profits".split(), "a small bakery".split())
    "the small bakery's profits"
    """
    words = list(rest[:16])
    while len(words) > 1 and words[-1].lower() in _PREPOSITIONS | _DETERMINERS | {"and", "or"}:
        words.pop()  # cut at the bound: never end on "and" or "to"
    for k in range(len(words) - 2):  # "or expand its bus network": the alternative, not its verb
        if words[k].lower() in ("or", "and") and words[k + 2].lower() in _DETERMINERS:
            if words[k + 1].lower() not in _DETERMINERS:
                del words[k + 1]
            break
    if owner:
        named = ["the" if owner[0].lower() in ("a", "an") else owner[0], *owner[1:]]
        whose = " ".join(named) + "'s"
        words = [whose if w.lower() in ("its", "their") else w for w in words]
    return " ".join(words)


def _topic(words: list[str]) -> str:
    """What a task's object is about: "an essay on remote work" is about remote work."""
    cut = next((k for k, w in enumerate(words) if k and w.lower() in ("on", "about", "for", "of")), None)
    return _noun_phrase(words[cut + 1 :] if cut is not None and cut + 1 < len(words) else words)


def _complement(words: list[str]) -> str:
    """What a cause's verb takes, up to three words: none after an adverb or a comparison."""
    if not words or words[0].lower() in _ADVERBS or words[0].lower().endswith(("ly", "er")):
        return ""
    cut = next((k for k, w in enumerate(words) if w.lower() in _PREPOSITIONS), len(words))
    return " ".join(words[: min(cut, 3)])


def _subject_end(low: list[str]) -> int:
    """Where the subject noun phrase of a clause ends (the verb's index)."""
    if low[0] in _PRONOUNS:
        return 1
    j = 1 if low[0] in _DETERMINERS else 0
    for k in range(j, min(j + 4, len(low) - 1)):
        if _plural(low[k]) and (k <= j + 1 or low[k - 1] in _PREPOSITIONS):
            return k + 1
        if k > j and low[k + 1] in _DETERMINERS | _PREPOSITIONS and low[k] not in _PREPOSITIONS:
            return k
    if len(low) - j <= 3:
        return max(j + 1, len(low) - 1)
    adjective = j + 1 < len(low) - 1 and (_ADJECTIVAL.search(low[j]) or low[j] in _COMMON_ADJECTIVES)
    return j + (2 if adjective else 1)


def _noun_phrase(words: Sequence[str]) -> str:
    """The first noun phrase of ``words``: up to a verb-like word, a plural noun or a preposition."""
    words = list(words)
    while words and words[0].lower() in _PREPOSITIONS:
        words = words[1:]
    if not words:
        return FALLBACK_THING
    low = [w.lower() for w in words]
    j = 1 if low[0] in _DETERMINERS else 0
    end = len(words)
    for k in range(j, len(words)):
        if _plural(low[k]) and (k == len(words) - 1 or k <= j + 1):
            end = k + 1
            break
        if k > j and (_verb_like(low[k]) or low[k] in _PREPOSITIONS | _AUXILIARIES):
            end = k
            break
    return " ".join(_drop_quantifier(words[: min(end, j + 5)])) or FALLBACK_THING


def _copula_phrase(words: list[str], *, whole: bool = False) -> str:
    """After "is": the subject, its predicate left out ("remote work (good for productivity)").

    ``whole``: the phrase is the subject ("what are *the main causes behind urban growth*").
    """
    if whole:
        return " ".join(_drop_quantifier(words[:6])) or FALLBACK_THING
    cut = next(
        (
            k
            for k, w in enumerate(words)
            if k and (w.lower() in _PREPOSITIONS | _PREDICATES or w.lower().endswith("ed"))
        ),
        len(words),
    )
    phrase = words[:cut] if cut < len(words) or len(words) < 3 else words[:-1]
    return " ".join(_drop_quantifier(phrase)) or FALLBACK_THING


def _drop_quantifier(words: list[str]) -> list[str]:
    return words[1:] if len(words) > 1 and words[0].lower() in _QUANTIFIERS else words


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _verb_like(word: str) -> bool:
    """A third-person verb ("drives", "pays") where a noun phrase would start."""
    return _plural(word.lower()) or word.lower() in ("happens", "matters")


def _third_person(verb: str) -> str:
    if verb == "have":
        return "has"
    if verb == "be":
        return "is"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"
