"""What the simulator reads in a prompt: a field, the part its choices depend on, the evidence to cite.

docs/architecture.md "Layers" (the model layer): :class:`~fractal_nb.llm.simulated.SimulatedLLM`
and its parts read the prompts a real model gets. Node ids differ between runs and
never count (:func:`id_free_digest`, :func:`decisive_part`, :func:`quoted_question`), so a
run repeats; with an evidence section (prompts/evidence.txt), :func:`cite_evidence`
quotes real lines of its first passage.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

_ANY_ID = re.compile(r"\bn-[0-9a-f]{1,16}")  # a node id, whole or cut short by a clipped text
_ELSEWHERE = re.compile(r"Answers already given in other branches[^\n]*\n(?:[^\n]+\n)*")  # prompts/answer.txt
# The evidence section of an answer prompt (prompts/evidence.txt): a passage's head, then its numbered lines.
_EVIDENCE = "\nEvidence: the passages of the exploration's sources"
_HEAD = re.compile(r"^\[(.+):L(\d+)-L(\d+)\]$")  # a passage's head: [source:Lstart-Lend]
_PASSAGE = re.compile(_HEAD.pattern + r"((?:\n\d+: .*)*)", re.MULTILINE)  # a head, then its lines
_NUMBERED = re.compile(r"^\s*(\d+)\s*[:|]\s?(.*)$")  # one of its lines: "12: text" (or "12 | text")


def id_free_digest(text: str) -> bytes:
    """A digest of ``text`` without its node ids (they differ between runs; the choices must not)."""
    return hashlib.sha256(_ANY_ID.sub("n-id", text).encode()).digest()


def decisive_part(role: str, prompt: str) -> str:
    """The part of a prompt the simulated choices depend on.

    An answer depends on its question alone, not on what other workers happen
    to have written by then, so a simulated tree has the same shape with one
    worker or eight. Node ids (new every run) never count.
    """
    if role == "answer":
        prompt = prompt_field(prompt, r"(Question to answer now[^\n]*\n[^\n]*)") or prompt
    return _ANY_ID.sub("n-id", prompt)


def without_elsewhere(prompt: str) -> str:
    r"""The prompt without the other branches' answers it shows (engine/primitive.py ``elsewhere``).

    Which answers those are depends on what other workers wrote first, so a
    choice made by reading the prompt must not read them: the tree keeps its
    shape with one worker or eight.

    >>> without_elsewhere("A\n\nAnswers already given in other branches (x):\n- one\n- two\n\nB")
    'A\n\n\nB'
    """
    return _ELSEWHERE.sub("", prompt)


def prompt_field(prompt: str, pattern: str) -> str | None:
    """The first group of ``pattern`` in ``prompt``, stripped; None where it does not match."""
    match = re.search(pattern, prompt)
    return match.group(1).strip() if match else None


def quoted_question(text: str) -> str:
    """A question as quoted in a halt; a long one cut, with a digest of the whole.

    Questions may open alike; the digest keeps their halts apart.
    """
    text = _ANY_ID.sub("n-id", text).strip().rstrip("?.!")  # ids differ between runs; topics must not
    if len(text) <= 80:
        return f"'{text}'"
    return f"'{text[:70]}… #{hashlib.sha256(text.encode()).hexdigest()[:6]}'"


def cite_evidence(prompt: str, question: str) -> list[dict[str, Any]]:
    """With an evidence section, a citation of its first passage: 1 to 3 of its lines, quoted verbatim.

    Which lines and how many follow a digest of the question, so a run repeats;
    blank lines and lines the prompt shows cut are never quoted.
    """
    if _EVIDENCE not in prompt:
        return []
    passage = _PASSAGE.search(prompt.split(_EVIDENCE, 1)[1])
    if passage is None:  # no passage matched the question: nothing to cite
        return []
    numbered = [line.split(": ", 1) for line in passage.group(4).split("\n")[1:]]
    lines = [(int(n), text) for n, text in numbered if text.strip() and not text.endswith("…")]
    if not lines:
        return []
    pick = id_free_digest(question)
    first = pick[0] % len(lines)
    run = [lines[first]]
    for number, text in lines[first + 1 : first + 1 + pick[1] % 3]:  # the next lines, while consecutive
        if number != run[-1][0] + 1:
            break
        run.append((number, text))
    return [
        {
            "source": passage.group(1),
            "line_start": run[0][0],
            "line_end": run[-1][0],
            "quote": "\n".join(text for _, text in run),
        }
    ]


def evidence_lines(prompt: str, about: str) -> list[tuple[str, int, str]]:
    """One line per evidence block shown: source, line number, text of its line nearest ``about``.

    Nearest: the most words of four letters or more shared with ``about``; the first at a tie.
    """
    wanted = {w.lower() for w in re.findall(r"[^\W\d_]{4,}", about)}
    blocks: list[tuple[str, list[tuple[int, str]]]] = []
    for row in prompt.splitlines():
        head = _HEAD.match(row.strip())
        numbered = _NUMBERED.match(row)
        if head:
            blocks.append((head.group(1), []))
        elif blocks and numbered and re.search(r"[^\W\d_]{3,}", numbered.group(2)):
            blocks[-1][1].append((int(numbered.group(1)), numbered.group(2)))
    found = []
    for source, lines in blocks:
        if lines:
            line, text = max(
                lines,
                key=lambda lt: (
                    len(wanted & {w.lower() for w in re.findall(r"[^\W\d_]{4,}", lt[1])}),
                    -lt[0],
                ),
            )
            found.append((source, line, text))
    return found
