"""The worker's claims and writes that bring their work's read along: one round trip, not two.

docs/architecture/engine.md, "A worker's round trips" (and "The store's layout"):
``claim_work(with_context=True)`` carries the claimed question's context,
``claim_synthesis(with_inputs=True)`` and the writes that climb
(``submit_answer`` and ``submit_synthesis`` with ``claim_next=True,
with_inputs=True``) the claimed synthesis's inputs. The claim or the write
commits first; the read runs after it, outside the write lock, and a read that
fails leaves its key out: the claim stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

from ..checks import require_flag
from ..errors import FractalError, InvalidInputError
from ..vocabulary import JsonArgument
from .answer import Answers
from .base import StoreCore
from .claim import Claims
from .context import NodeContext
from .holders import OWN_HOLDER, HolderArgument
from .records import AnswerSubmitted, CallRows, Claim, ClaimRecord, SynthesisClaim, Synthesized
from .synthesis import Synthesis


class RoundTrips:
    """Claims and writes with what their work reads: a question's context, a synthesis's inputs."""

    def __init__(
        self, core: StoreCore, claims: Claims, synthesis: Synthesis, answers: Answers, context: NodeContext
    ) -> None:
        self._core = core
        self._claims = claims
        self._synthesis = synthesis
        self._answers = answers
        self._context = context

    def claim_work(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        with_context: bool = False,
    ) -> Claim:
        """:meth:`Claims.claim_question`'s claim, with the question's context when ``with_context``."""
        wanted = require_flag(with_context, "with_context")
        claim, question = self._claims.claim_question(graph_id, worker_id, holder=holder)
        if wanted and question is not None:
            with suppress(FractalError):  # the claim stands; the worker's own read meets the error
                claim["context"] = self._context.around(self._core.known_graph(question.graph_id), question)
        return claim

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        skip: list[str] | None = None,
        with_inputs: bool = False,
    ) -> SynthesisClaim:
        """:meth:`Synthesis.claim_synthesis`'s claim, with the synthesis's inputs when ``with_inputs``."""
        wanted = require_flag(with_inputs, "with_inputs")
        claim = self._synthesis.claim_synthesis(graph_id, worker_id, holder=holder, skip=skip)
        return self._with_inputs(claim) if wanted else claim

    def submit_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        links: JsonArgument | None = None,
        calls: CallRows | None = None,
        saturation: str | None = None,
        boundary: JsonArgument | None = None,
        claim_next: bool = False,
        with_inputs: bool = False,
    ) -> AnswerSubmitted:
        """:meth:`Answers.submit_answer`'s write; with ``with_inputs``, its next synthesis's inputs."""
        wanted = self._inputs_wanted(with_inputs, claim_next)
        written = self._answers.submit_answer(
            graph_id,
            question_id,
            text,
            owner=owner,
            metadata=metadata,
            sub_questions=sub_questions,
            links=links,
            calls=calls,
            saturation=saturation,
            boundary=boundary,
            claim_next=claim_next,
        )
        if wanted:  # claim_next was given: the write says what it claimed
            self._with_inputs(written["next_synthesis"])
        return written

    def submit_synthesis(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        worker_id: str,
        calls: CallRows | None = None,
        claims: list[ClaimRecord] | None = None,
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
        claim_next: bool = False,
        with_inputs: bool = False,
    ) -> Synthesized:
        """:meth:`Synthesis.submit_synthesis`'s write; with ``with_inputs``, its next synthesis's inputs."""
        wanted = self._inputs_wanted(with_inputs, claim_next)
        written = self._synthesis.submit_synthesis(
            graph_id,
            node_id,
            synthesis_text,
            worker_id=worker_id,
            calls=calls,
            claims=claims,
            findings=findings,
            extra=extra,
            claim_next=claim_next,
        )
        if wanted:  # claim_next was given: the write says what it claimed
            self._with_inputs(written["next_synthesis"])
        return written

    def _inputs_wanted(self, with_inputs: object, claim_next: object) -> bool:
        """``with_inputs`` of a write: the inputs of the synthesis it claims, so only with ``claim_next``."""
        if require_flag(with_inputs, "with_inputs") and claim_next is not True:
            raise InvalidInputError(
                "with_inputs=True needs claim_next=True: the inputs are the next synthesis's"
            )
        return bool(with_inputs)

    def _with_inputs(self, claim: SynthesisClaim) -> SynthesisClaim:
        """``claim`` with its question's synthesis inputs, when it holds one."""
        if claim["node_id"] is not None:
            with suppress(FractalError):  # the claim stands; the worker's own read meets the error
                claim["inputs"] = self._context.get_synthesis_inputs(claim["graph_id"], claim["node_id"])
        return claim
