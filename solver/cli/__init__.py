"""The command line of docs/formats.md: one table of commands, each an argparse subcommand.

``main.py --help`` lists every command and ``main.py COMMAND --help`` describes one. A command
is a module with ``add_arguments(parser)`` and ``run(args) -> int``; :data:`COMMANDS` names
them. The torch and onnx commands import torch and onnx inside ``run`` only, so the parser (and
every ``--help``) works where they are not installed.

Exit status: 0 success (a valid schedule); 1 no schedule (infeasible, time limit without
incumbent, cancelled, a schedule that breaks a rule, gradients that differ); 2 bad input or
usage. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from solver.cli import (
    check,
    examples,
    execute,
    import_onnx,
    import_torch,
    results,
    solve,
    sweep,
)
from solver.cli.arguments import (
    EXIT_BAD_INPUT,
    EXIT_NO_SCHEDULE,
    OneLineParser,
    parse_budget,
    resolve_graph_path,
)
from solver.cli.output import warnings_to_stderr
from solver.errors import XEngineError, printable

__all__ = ["COMMANDS", "Command", "build_parser", "main", "parse_budget", "resolve_graph_path"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one line for ``--help``, its arguments and what runs it."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None
    """The paragraph of ``main.py NAME --help`` (default: ``help``)."""


COMMANDS: tuple[Command, ...] = (
    Command("solve", "find the fastest schedule", solve.add_arguments, solve.run),
    Command("check", "replay and validate a schedule", check.add_arguments, check.run),
    Command("sweep", "solve over a range of one device's budget", sweep.add_arguments, sweep.run),
    Command("results", "see and manage the result store", results.add_arguments, results.run),
    Command("examples", "list the bundled graphs", examples.add_arguments, examples.run),
    Command(
        "import-torch",
        "import a PyTorch module as a training graph (torch extra)",
        import_torch.add_arguments,
        import_torch.run,
        description="Import a PyTorch nn.Module as a training graph.",
    ),
    Command(
        "import-onnx",
        "import an ONNX file as a training graph (onnx extra)",
        import_onnx.add_arguments,
        import_onnx.run,
        description=import_onnx.DESCRIPTION,
    ),
    Command(
        "execute",
        "run a schedule on PyTorch and measure it (torch extra)",
        execute.add_arguments,
        execute.run,
        description=execute.DESCRIPTION,
    ),
)


def build_parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    """``main.py`` with one subparser per command; the parsed arguments name their command."""
    parser = OneLineParser(
        prog="main.py",
        description="XEngine Studio: tensor rematerialization on heterogeneous devices. With no "
        "command, opens the GUI.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in commands:
        command_parser = sub.add_parser(
            command.name, help=command.help, description=command.description or command.help
        )
        command.add_arguments(command_parser)
        command_parser.set_defaults(run=command.run, command_parser=command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings_to_stderr()
    try:
        args, unknown = build_parser().parse_known_args(argv)
        if unknown:  # named by the command, whose --help lists what it takes
            args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse printed the help or the one-line usage error
        return int(exc.code or 0)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the command; every error becomes one line on stderr, never a traceback."""
    try:
        return int(args.run(args))
    except (XEngineError, OSError) as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_NO_SCHEDULE
    except Exception as exc:  # the last line of defence of the contract
        if os.environ.get("XENGINE_DEBUG"):
            raise
        what = printable(f"{type(exc).__name__}: {exc}")[:300]
        print(f"error: internal error ({what}); please report it with the input", file=sys.stderr)
        return EXIT_BAD_INPUT
