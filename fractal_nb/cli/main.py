"""``fractal-nb``: run an exploration from the shell; ``demo`` runs one offline.

docs/architecture.md, "Layers" (the faces): :func:`main` parses the command line
(:mod:`.parser`), checks every option before a file is opened or created
(:mod:`.option_checks`) and hands the command to the module that does it:
:mod:`.running` (run, demo, resume, ask, harvest, seed), :mod:`.copying` (fork, copy),
:mod:`.serving` (serve-mcp, worker) and :mod:`.inspection` (the read-only
commands). The exit code says how the work ended (``exit_codes.EXIT_CODES``,
printed by ``--help``). These modules load only the standard library and the
package's leaves: the facade, the models, pandas and DuckDB load inside the
commands that need them, so ``--help``, ``--version`` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ..errors import FractalError, InvalidInputError
from .copying import copy, fork
from .exit_codes import EXIT_ERROR, EXIT_OK
from .inspection_help import INSPECTION_HELP
from .option_checks import checked_model
from .parser import build_parser
from .profiles import with_profile
from .running import ask, demo_local, explore, harvest, resume, seed
from .serving import serve, work

if TYPE_CHECKING:
    from ..llm.protocol import LLM


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (``exit_codes.EXIT_CODES``)."""
    parser = build_parser()
    try:
        argv = with_profile(sys.argv[1:] if argv is None else argv)
    except InvalidInputError as exc:
        parser.error(str(exc))
    args = parser.parse_args(argv)
    llm = checked_model(parser, args)  # every option, before any file is touched
    try:
        return _dispatch(parser, args, llm)
    except BrokenPipeError:  # the reader left (`| head`): what was written stands, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush is quiet
        return EXIT_OK


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, llm: LLM | None) -> int:
    try:
        if args.command in INSPECTION_HELP:
            return _inspect(parser, args)
        if args.command == "fork":
            return fork(args)
        if args.command == "copy":
            return copy(args)
        if llm is None:
            return serve(args)
        if args.command == "ask":
            return ask(args, llm)
        if args.command == "worker":
            return work(args, llm)
        if args.command == "resume":
            return resume(args, llm)
        if args.command == "harvest":
            return harvest(args, llm)
        if args.command == "seed":
            return seed(args, llm)
        if args.command == "demo" and args.local:
            return demo_local(args)
        return explore(args.question if args.command == "demo" else args.seed, llm, args)
    except FractalError as exc:
        print(f"fractal-nb: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _inspect(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """A read-only command (inspection.COMMANDS) on FILE; several graphs without --graph-id: usage, 2."""
    from .inspection import InspectionUsageError, inspect_file

    try:
        print(inspect_file(args))
    except InspectionUsageError as exc:
        parser.error(f"{args.command}: {exc}")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
