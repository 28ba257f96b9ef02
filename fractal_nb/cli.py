"""``fractal-nb``: run an exploration from the shell; ``demo`` runs one offline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import FractalError
from .exploration import Exploration
from .llm.protocol import LLM
from .llm.simulated import SimulatedLLM
from .results import FractalResult
from .store import GraphStore

DEMO_SEED = "Should a mid-sized city build a tram line or expand its bus network?"
DEMO_DB = "fractal-demo.duckdb"


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (also the source of ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="fractal-nb",
        description="Fractal thinking: LLM workers decompose a question recursively into a DuckDB graph.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="explore a seed and print the harvest",
                              description="Explore SEED and print the harvest summary.")
    run.add_argument("seed", help="the question, claim, goal or fact to explore")
    _add_run_options(run, db_default="exploration.duckdb")
    _add_model_options(run)

    demo = commands.add_parser(
        "demo", help="run an offline exploration with the simulated model",
        description="Explore a sample question with the simulated model (no network, no API key) "
                    "into a DuckDB file, and print the harvest.")
    _add_run_options(demo, db_default=DEMO_DB, intensity="explore")

    serve = commands.add_parser(
        "serve-mcp", help="serve a DuckDB file as MCP tools (stdio or HTTP)",
        description="Serve the fractal tool contract (fractal_create_graph, fractal_claim_work, ...) "
                    "from a DuckDB file, so MCP agents and worker processes share its graphs. This "
                    "process owns the file while it runs.")
    serve.add_argument("--db", required=True, help="DuckDB file (created if missing)")
    serve.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")

    worker = commands.add_parser(
        "worker", help="work a graph served over MCP",
        description="Run the engine's worker loop against a graph served by `fractal-nb serve-mcp --http` "
                    "or Exploration.serve_mcp(): claim, answer, synthesize until no work is left.")
    worker.add_argument("--mcp-url", required=True, help="the server's URL, e.g. http://127.0.0.1:8765/mcp")
    worker.add_argument("--graph-id", help="the graph to work (default: the server's only active graph)")
    worker.add_argument("--worker-id", default="remote", help="worker name prefix (default remote)")
    worker.add_argument("--threads", type=int, default=1, help="worker threads in this process (default 1)")
    _add_model_options(worker)
    return parser


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", choices=["simulated", "openai"], default="simulated",
                        help="simulated (offline, deterministic) or openai (any OpenAI-compatible server)")
    parser.add_argument("--model", help="model name for --llm openai (or env FRACTAL_NB_MODEL)")
    parser.add_argument("--base-url", help="server URL for --llm openai (or env OPENAI_BASE_URL)")
    parser.add_argument("--seed-value", type=int, default=0, help="seed of the simulated model")


def _add_run_options(parser: argparse.ArgumentParser, *, db_default: str,
                     intensity: str = "pulse") -> None:
    parser.add_argument("--intensity", choices=["pulse", "explore", "deep"], default=intensity,
                        help=f"budget: agents, depth, seed questions (default {intensity})")
    parser.add_argument("--checkpoint", default="autonomous",
                        help="autonomous (default), convergence, interactive or depth:N")
    parser.add_argument("--db", default=db_default, help=f"DuckDB file (default {db_default})")
    parser.add_argument("--workers", type=int, default=None, help="worker threads (default: budget)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        llm: LLM
        if args.command == "serve-mcp":
            return _serve(args)
        if args.command == "worker":
            return _work(args)
        if args.command == "demo":
            seed, llm = DEMO_SEED, SimulatedLLM(seed=7)
        else:
            seed, llm = args.seed, _model(args)
        return _explore(seed, llm, args)
    except FractalError as exc:
        print(f"fractal-nb: error: {exc}", file=sys.stderr)
        return 1


def _serve(args: argparse.Namespace) -> int:
    from .mcp_server import build_server

    with GraphStore(Path(args.db)) as store:
        server = build_server(store)
        if args.http:
            print(f"fractal-nb: MCP over HTTP at http://{args.host}:{args.port}/mcp for {args.db}",
                  file=sys.stderr, flush=True)
            server.run("streamable-http", host=args.host, port=args.port)
        else:
            server.run("stdio")
    return 0


def _work(args: argparse.Namespace) -> int:
    from .engine.remote import work_remotely
    from .remote_store import RemoteStore

    llm = _model(args)
    with RemoteStore(args.mcp_url) as store:
        reports = work_remotely(store, llm, worker_id=args.worker_id, graph_id=args.graph_id,
                                threads=args.threads)
    for report in reports:
        print(f"{report.worker}: {report.answered} answered, {report.synthesized} synthesized, "
              f"{report.failures} failed; exit: {report.exit_reason}")
    return 0


def _model(args: argparse.Namespace) -> LLM:
    if args.llm == "simulated":
        return SimulatedLLM(seed=args.seed_value)
    from .llm.openai_llm import OpenAILLM

    return OpenAILLM(model=args.model, base_url=args.base_url)


def _explore(seed: str, llm: LLM, args: argparse.Namespace) -> int:
    with Exploration.create(seed, intensity=args.intensity, checkpoint=args.checkpoint,
                            llm=llm, path=Path(args.db)) as exploration:
        status = exploration.run(max_workers=args.workers, progress=not args.quiet)
        result = exploration.harvest()
        print(render(result, run_status=status, path=args.db))
        calls = exploration.llm_calls()
    failed = int((calls["outcome"] == "error").sum())
    print(f"\n{len(calls)} model calls ({failed} failed), "
          f"{int(calls['prompt_tokens'].sum())} prompt tokens; model: {llm!r}")
    print(f"Open it in a notebook: Exploration.open({args.db!r}, {result.graph_id!r}, llm=...)")
    return 0


def render(result: FractalResult, *, run_status: str, path: str) -> str:
    """The harvest as plain text for a terminal."""
    lines = [
        f"Seed: {result.seed}",
        f"Run: {run_status}; graph {result.graph_id} is {result.status} in {path}",
        f"{result.node_count} nodes, {result.edge_count} edges, depth {result.max_depth}, "
        f"{result.convergence_count} convergences, {result.contradiction_count} contradictions",
        "",
        "Summary:",
        f"  {result.summary}",
    ]
    if result.findings:
        lines += ["", "Findings:"] + [f"  - {f['finding']} ({f['confidence']})" for f in result.findings]
    if result.gaps:
        lines += ["", f"Gaps ({len(result.gaps)}):"] + [f"  - {g}" for g in result.gaps[:10]]
        if len(result.gaps) > 10:
            lines.append(f"  ... and {len(result.gaps) - 10} more")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
