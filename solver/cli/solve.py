"""``main.py solve GRAPH [--budget DEVICE=SIZE ...] [--saved DEVICE=SIZE ...] [--method M]
[-o SCHEDULE] [--json]``.

Finds the fastest schedule, replays it, prints the report (docs/formats.md) and keeps the
result in the result store. Exit status 0 for a valid schedule; 1 for none (infeasible, a time
limit without incumbent, cancelled); 2 for bad input, including an output file that could not
be written (the result is still printed).
"""

from __future__ import annotations

import argparse
import sys

from solver.cli.arguments import (
    EXIT_BAD_INPUT,
    EXIT_NO_SCHEDULE,
    EXIT_OK,
    UsageError,
    load_with_budgets,
)
from solver.cli.options import add_solver_arguments, solve_options
from solver.cli.output import concurrent_ms, json_text, print_result, report, stdout_to_stderr
from solver.cli.signals import cancel_on_signals
from solver.document.atomic import check_writable
from solver.document.graph import Graph
from solver.document.schedule_io import save_schedule
from solver.document.units import parse_size
from solver.errors import FileWriteError, GraphFormatError, printable
from solver.optimize.methods import METHODS, parse_method
from solver.optimize.solve import SolveOptions, SolveResult
from solver.status import SolveStatus

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The solver's arguments, the method, and where the result goes."""
    add_solver_arguments(parser)
    parser.add_argument(
        "--method",
        default="xengine",
        help=f"one of {', '.join(METHODS)}; single-device ones take :DEVICE",
    )
    parser.add_argument(
        "--offload",
        action="store_true",
        help="let the MIQP copy tensors to another device and keep them there (off: the "
        "paper's model); for --method xengine and overlap",
    )
    parser.add_argument(
        "--saved",
        action="append",
        default=[],
        metavar="DEVICE=SIZE",
        help="at most SIZE bytes resident on DEVICE when the backward starts (the activations "
        "saved for it), e.g. cpu=2MiB; with or without --budget; for the paper's model",
    )
    parser.add_argument("-o", "--output", help="write the schedule JSON here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-store", action="store_true", help="neither look up nor store")


def with_saved(graph: Graph, limits: list[str]) -> Graph:
    """The graph with ``--saved DEVICE=SIZE`` applied (``Graph.with_saved_limits``)."""
    parsed: dict[str, int | None] = {}
    for text in limits:
        device, sep, size = text.partition("=")
        if not sep or not device or not size:
            raise UsageError(f"--saved {text!r}: write DEVICE=SIZE, e.g. cpu=2MiB")
        try:
            parsed[device] = parse_size(size)
        except ValueError as exc:
            raise UsageError(f"--saved {text!r}: {exc}") from None
    try:
        return graph.with_saved_limits(parsed) if parsed else graph
    except GraphFormatError as exc:
        raise UsageError(f"--saved: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Solve, write ``-o``, print the report; the exit status."""
    if args.output:
        check_writable(args.output)  # before the solve, not after it
    graph = with_saved(load_with_budgets(args.graph, args.budget), args.saved)
    parse_method(graph, args.method)
    options = solve_options(args)
    with stdout_to_stderr():
        result = _solve_stored(graph, args, options)
    unwritten = None
    if args.output and result.schedule is not None:
        summary = result.timeline.summary() if result.timeline is not None else None
        try:
            save_schedule(result.schedule, args.output, summary)
        except FileWriteError as exc:  # e.g. past the size check reads: the result still shows
            unwritten = exc
    concurrent = concurrent_ms(graph, result.schedule, result.timeline)
    if args.json:
        print(json_text(report(result, concurrent)))
    else:
        print_result(result, concurrent)
        if args.output and result.schedule is not None and unwritten is None:
            print(f"schedule   written to {args.output}")
    if unwritten is not None:
        sys.stdout.flush()
        print(printable(f"error: {unwritten}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    ok = result.ok and result.status is not SolveStatus.CANCELLED
    return EXIT_OK if ok else EXIT_NO_SCHEDULE


def _solve_stored(graph: Graph, args: argparse.Namespace, options: SolveOptions) -> SolveResult:
    """Solve, then keep the result in the result store unless ``--no-store`` (issue 13).

    ``solve`` always solves (it is what people time); ``sweep`` and the GUI look up first.
    """
    from solver.results.cached import solve_cached
    from solver.results.store import ResultStore, default_store_path

    path = None if args.no_store else default_store_path()
    store = ResultStore(path) if path is not None else None
    with cancel_on_signals() as cancel:
        return solve_cached(graph, args.method, options, store, cancel=cancel, lookup=False).result
