"""Model benchmark: does a run keep a one-slot local server busy without wasting its work?

Run: ``python bench/model_bench.py`` (``--quick`` for a shorter model delay).

A local OpenAI-compatible server on 127.0.0.1 serves one request at a time (the
rest queue, as llama.cpp's server does with one slot), each taking a fixed
delay; its answers come from ``SimulatedLLM`` so a real tree grows. An explore
exploration runs with 8 workers through ``OpenAILLM`` twice, side by side:

- ``bounded``: the default, one request in flight for a server on this machine;
- ``unbounded``: ``max_concurrency=None``, every worker's request sent at once
  (what the first wave did), with the same client timeout and retries.

Printed per run: the share of server time spent on requests whose client had
already left (it timed out while queued; goal 0%), the server's busy share of the
run (goal >= 95%), requests per processed node, and how the run ended.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from machine import print_header  # noqa: E402  (bench/machine.py, beside this script)

from fractal_nb import Exploration, OpenAILLM, SimulatedLLM  # noqa: E402
from fractal_nb.llm.schemas import SCHEMAS as ALL_SCHEMAS  # noqa: E402

SEED = "What would it take for a mid-sized city to halve its car traffic in ten years?"
SCHEMAS = {schema.__name__: schema for schema in ALL_SCHEMAS}


class OneSlotServer:
    """Serves one request at a time after ``delay_s``; notes the work done for clients that left."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.brain = SimulatedLLM(seed=3)
        self.slot = threading.Lock()
        self.requests = 0
        self.busy_s = 0.0
        self.wasted_s = 0.0
        self.first: float | None = None
        self.last = 0.0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> OneSlotServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def answer(self, body: dict[str, Any]) -> str:
        fmt = body.get("response_format") or {}
        name = fmt.get("json_schema", {}).get("name") or (fmt.get("schema") or {}).get("title")
        return json.dumps(self.brain.complete(body["messages"], SCHEMAS[name]))

    def serve(self, body: dict[str, Any], connection: socket.socket) -> bytes | None:
        """One request in the slot: the model's time, then the reply, or None if the client left."""
        with self.slot:
            started = time.perf_counter()
            self.first = self.first if self.first is not None else started
            self.requests += 1
            time.sleep(self.delay_s)  # the model generating
            content = self.answer(body)
            spent = time.perf_counter() - started
            self.busy_s += spent
            self.last = time.perf_counter()
            if client_left(connection):
                self.wasted_s += spent
                return None
        reply = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
        }
        return json.dumps(reply).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 1 << 16  # headers and body leave in one write: no delayed-ACK stall
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                payload = server.serve(body, self.connection)
                if payload is None:
                    self.close_connection = True
                    return
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def client_left(connection: socket.socket) -> bool:
    """Whether the client closed its end (it gave up waiting): readable with nothing to read."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def one_run(delay_s: float, timeout_s: float, *, bounded: bool) -> dict[str, Any]:
    with OneSlotServer(delay_s) as server:
        llm = OpenAILLM(
            "one-slot",
            base_url=server.base_url,
            timeout=timeout_s,
            max_retries=2,
            max_concurrency="auto" if bounded else None,
        )
        with llm, Exploration.create(SEED, intensity="explore", llm=llm) as ex:
            started = time.perf_counter()
            status = ex.run(max_workers=8, progress=False)
            wall = time.perf_counter() - started
            nodes = len(ex.events().query("kind == 'claimed'")) + 1  # the root, by the seed phase
            calls = ex.llm_calls()
        return {
            "status": status,
            "wall": wall,
            "requests": server.requests,
            "nodes": nodes,
            "busy": server.busy_s / wall,
            "wasted": server.wasted_s / max(server.busy_s, 1e-9),
            "failed_calls": int((calls["outcome"] == "error").sum()),
            "calls": len(calls),
            "queue_s": float(calls["queue_s"].sum()),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter model delay")
    args = parser.parse_args()
    print_header(__doc__.splitlines()[0])
    delay = 0.1 if args.quick else 0.4  # a small local model takes seconds; keep the run short
    timeout = delay * 4  # a queue of 8 outlasts it, as 8 llama.cpp requests outlast 60 s
    print(
        f"one slot, {delay * 1000:.0f} ms a request; client timeout {timeout * 1000:.0f} ms, 2 retries; "
        "explore, 8 workers\n"
    )
    rows = {
        "bounded (default)": one_run(delay, timeout, bounded=True),
        "unbounded": one_run(delay, timeout, bounded=False),
    }
    print("| run | status | server time wasted | server busy | requests/node | failed calls | wall s |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['status']} | {r['wasted'] * 100:.1f}% | {r['busy'] * 100:.1f}% | "
            f"{r['requests'] / r['nodes']:.2f} | {r['failed_calls']} of {r['calls']} | {r['wall']:.1f} |"
        )
    bounded, unbounded = rows["bounded (default)"], rows["unbounded"]
    print(
        f"\nwasted share: bounded {bounded['wasted'] * 100:.1f}% vs unbounded "
        f"{unbounded['wasted'] * 100:.1f}%; busy share ratio {bounded['busy'] / unbounded['busy']:.2f}"
    )


if __name__ == "__main__":
    main()
