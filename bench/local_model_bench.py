"""Local model benchmark: what the packaged Gemma 3 270M gets accepted, per role and design, and its slots.

Run from the repository root (needs the ``[local]`` extra; without it, it says so and exits 0)::

    python bench/local_model_bench.py                  # every role and design, then runs on 1 and 2 slots
    python bench/local_model_bench.py --quick          # a smoke run: two inputs, the served design, one run
    python bench/local_model_bench.py --record FILE    # also write each reply, its prompt and verdict (JSON)

Acceptance: each role's prompt (the engine's own, prompts/*.txt) on five inputs,
each asked with two request seeds, one request each (no correction round trip),
judged by the role's schema and gates as the engine judges it
(:class:`~fractal_nb.llm.quality.ReplyContext`). Printed per role and design: replies
accepted, and list items dropped by a gate. The designs are the server's setup:

- ``served``: ChatML and a repeat penalty, what ``LocalModelServer`` runs;
- ``no-penalty``: ChatML without the repeat penalty;
- ``gemma-template``: Gemma's own turn format with the penalty (``--designs`` adds it:
  a second server start).

Slots: a pulse exploration on the same server started with 1 and 2 slots, the
client learning the count from ``/props``: wall time, nodes, and the share of
``/slots`` samples (every 0.1 s) in which every slot was computing while the run
had work in flight (goal: near 100%, no slot idle while a request waits).

Nothing here is a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from machine import print_header  # noqa: E402  (bench/machine.py, beside this script)

from fractal_nb import Exploration  # noqa: E402
from fractal_nb.llm.local_server import SAMPLING, LocalModelServer, local_model_available  # noqa: E402
from fractal_nb.llm.protocol import Message  # noqa: E402
from fractal_nb.llm.quality import ReplyContext, describe  # noqa: E402
from fractal_nb.llm.schemas import Answer, Connections, HarvestFindings, LeafAnswer, SeedPlan, Synthesis  # noqa: E402
from fractal_nb.prompts import chat, render  # noqa: E402

SEEDS = [
    "Should our city build a tram line or expand its bus network?",
    "Why do some cities grow faster than others?",
    "What causes inflation to rise after a pandemic?",
    "How can a small bakery increase its profits?",
    "Does remote work make teams less productive?",
]
QUESTIONS = [
    "How much does a tram line cost compared with more buses?",
    "How do jobs draw people into a city?",
    "How did supply chain delays raise prices after the pandemic?",
    "Which products earn a small bakery the most per hour of work?",
    "How does remote work change how often team members talk?",
]
FINDINGS = [
    (
        "A tram costs more to build but less to run per rider than buses.",
        "Buses can start on new routes at once.",
    ),
    ("Jobs pull workers into cities.", "Housing that cannot be built holds growth back."),
    ("Supply chain delays raised the cost of goods.", "Spending saved in lockdowns came back all at once."),
    ("Bread sells most but earns little per hour.", "Cakes to order earn the most per hour of work."),
    (
        "Remote teams talk less often but in longer meetings.",
        "Teams that meet in person weekly keep their pace.",
    ),
]


def prompts(case: int) -> dict[str, tuple[type[Any], list[Message]]]:
    """Each role's messages for one input, as the engine builds them (prompts/*.txt)."""
    seed, question, (first, second) = SEEDS[case], QUESTIONS[case], FINDINGS[case]
    where = {
        "seed": seed,
        "ancestry": "(this is a seed question)",
        "depth": 1,
        "siblings": "(none)",
        "syntheses": "(none yet)",
        "elsewhere": "(none yet)",
        "question": question,
    }
    return {
        "seed": (SeedPlan, chat("seed", seed=seed, lo=3, hi=4)),
        "answer (last level)": (
            LeafAnswer,
            chat("answer", **where, max_depth=1, task=render("halt") + "\n\n" + render("answer_leaf")),
        ),
        "answer (branching)": (
            Answer,
            chat("answer", **where, max_depth=3, task=render("halt") + "\n\n" + render("answer_branch")),
        ),
        "synthesize": (
            Synthesis,
            chat(
                "synthesize",
                question=seed,
                conclusion=render("conclusion"),  # the seed's synthesis: the run's conclusion
                answer=first,
                children=f"- {question}\n  {first}\n- {second}",
            ),
        ),
        "connect": (
            Connections,
            chat(
                "connect",
                question=question,
                node_id="n-1",
                answer=first,
                candidates=f"- [n-2] (sibling) {second}",
            ),
        ),
        "harvest": (
            HarvestFindings,
            chat("harvest", seed=seed, chain=f"- {seed}\n  {first} {second}", gaps="(none)"),
        ),
    }


def acceptance(
    server: LocalModelServer, design: str, cases: int, sampling: dict[str, Any], record: dict[str, Any] | None
) -> None:
    """Each role's replies on ``cases`` inputs, two request seeds each: accepted, and items dropped."""
    with server.llm(sampling=sampling or None) as llm:
        client = llm._client
        counts: dict[str, Counter[str]] = {}
        for case in range(cases):
            for role, (schema, messages) in prompts(case).items():
                for seed in (11, 12):
                    options = {
                        "max_tokens": 600,
                        "temperature": 0.2,
                        "seed": seed,
                        "response_format": {
                            "type": "json_schema",
                            "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
                        },
                        **({"extra_body": sampling} if sampling else {}),
                    }
                    response = client.chat.completions.create(model=llm.model, messages=messages, **options)
                    text = response.choices[0].message.content or ""
                    verdict, why, dropped = "accepted", "", 0
                    try:
                        reply = schema.model_validate(
                            json.loads(text), context=ReplyContext.of(messages, schema)
                        )
                        dropped = len(reply.refused)
                    except ValueError as exc:
                        verdict, why = "refused", describe(exc)
                    counted = counts.setdefault(role, Counter())
                    counted[verdict] += 1
                    counted["dropped"] += dropped
                    if record is not None:  # tests/llm/corpus: each prompt once, each reply with its key
                        key = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:12]
                        record["prompts"].setdefault(key, messages)
                        entry = {
                            "design": design,
                            "role": role,
                            "schema": schema.__name__,
                            "request_seed": seed,
                        }
                        entry |= {"verdict": verdict, "why": why, "reply": text, "prompt": key}
                        record["replies"].append(entry)
        for role, counted in counts.items():
            asked = counted["accepted"] + counted["refused"]
            print(
                f"  {design:15} {role:20} accepted {counted['accepted']:2} of {asked:2}"
                f" ({counted['accepted'] / asked:4.0%}); list items dropped: {counted['dropped']}"
            )


def busy_share(base_url: str, slots: int, stop: threading.Event, samples: list[tuple[int, int]]) -> None:
    """Poll llama.cpp's ``/slots`` every 0.1 s: (slots computing, slots) per sample."""
    url = base_url.removesuffix("/v1") + "/slots"
    while not stop.wait(0.1):
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - 127.0.0.1
                state = json.load(response)
        except OSError:
            continue
        samples.append((sum(bool(s.get("is_processing")) for s in state), slots))


def slots_run(slots: int, seed: str) -> None:
    """A pulse exploration on a server with ``slots`` slots: wall time, nodes, and how busy the slots were."""
    with LocalModelServer(slots=slots) as server, server.llm() as llm:
        samples: list[tuple[int, int]] = []
        stop = threading.Event()
        poller = threading.Thread(
            target=busy_share, args=(server.base_url, slots, stop, samples), daemon=True
        )
        with Exploration.create(seed, intensity="pulse", llm=llm) as ex:
            poller.start()
            started = time.perf_counter()
            ex.run(progress=False)
            wall = time.perf_counter() - started
            stop.set()
            poller.join()
            nodes = len(ex.nodes())
            calls = ex.llm_calls()
        working = [busy for busy, _ in samples if busy]
        full = sum(busy == slots for busy in working) / len(working) if working else 0.0
        print(
            f"  {slots} slot(s): client keeps {llm.max_concurrency} in flight; {wall:5.1f} s, {nodes} nodes, "
            f"{len(calls)} calls ({len(calls) / wall:.2f}/s); all slots computing in {full:.0%} of the "
            f"samples with any computing"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two inputs, the served design, one slots run")
    parser.add_argument("--record", type=Path, help="write each reply, its prompt and verdict here (JSON)")
    parser.add_argument("--designs", default="served,no-penalty", help="served, no-penalty, gemma-template")
    args = parser.parse_args()
    print_header("Local model benchmark: Gemma 3 270M on llama.cpp's server (xllamacpp), 1 thread")
    if not local_model_available():
        print('  the [local] extra is not installed: pip install -e ".[local]"; nothing measured')
        return
    cases = 2 if args.quick else len(SEEDS)
    designs = ["served"] if args.quick else args.designs.split(",")
    record: dict[str, Any] | None = None
    if args.record:
        model = "gemma-3-270m (Q4_K_M, the [local] extra), llama.cpp's server via xllamacpp, 1 thread"
        how = f"python bench/local_model_bench.py --designs {','.join(designs)} --record FILE"
        record = {"model": model, "recorded_by": how, "prompts": {}, "replies": []}
    print("Acceptance, one request per reply (no correction round trip):")
    with LocalModelServer() as server:
        for design in (d for d in designs if d != "gemma-template"):
            acceptance(server, design, cases, dict(SAMPLING) if design == "served" else {}, record)
    if "gemma-template" in designs:
        with LocalModelServer(chat_template="gemma") as server:
            acceptance(server, "gemma-template", cases, dict(SAMPLING), record)
    if record is not None:
        args.record.write_text(json.dumps(record, indent=0, ensure_ascii=False) + "\n")
    print("\nSlots: a pulse exploration, the client learning the slots from /props:")
    for slots in (1,) if args.quick else (1, 2):
        slots_run(slots, SEEDS[1])


if __name__ == "__main__":
    main()
