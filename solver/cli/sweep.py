"""``main.py sweep GRAPH [GRAPH ...] --device gpu --from 100% --to 10% --steps 10 [-o CSV]``.

Solves every method over a range of one device's budget, for one or more graphs, in worker
processes (or on a Dask cluster with ``--scheduler``). The arguments are checked here, before
any solve; :mod:`solver.cli.sweep_output` runs the tasks and prints the rows as they finish.
"""

from __future__ import annotations

import argparse

from solver.cli.arguments import UsageError, load_with_budgets, parse_fraction
from solver.cli.options import add_solver_arguments, solve_options
from solver.cli.sweep_output import graph_label, run_sweep_command
from solver.document.atomic import check_writable
from solver.optimize.methods import parse_method
from solver.sweeps.sweep import budget_steps

__all__ = ["MAX_JOBS", "MAX_STEPS", "add_arguments", "run"]

MAX_STEPS = 10_000
MAX_JOBS = 64
"""The most sweep worker processes (each holds the solver: about 100 MB before it solves)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The solver's arguments, the device and budget range, the methods and the output."""
    add_solver_arguments(parser)
    parser.add_argument("--device", required=True)
    parser.add_argument("--from", dest="start", default="100%")
    parser.add_argument("--to", dest="stop", default="10%")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--method", action="append", help="repeat for several (default: xengine and checkmate)"
    )
    parser.add_argument(
        "--offload",
        action="store_true",
        help="xengine and overlap may offload (copy tensors to another device and keep them "
        "there); other methods run unchanged",
    )
    parser.add_argument("-o", "--output", help="write the results as CSV here")
    parser.add_argument("more", nargs="*", metavar="GRAPH", help="more graphs to sweep alike")
    parser.add_argument("--jobs", type=int, help="worker processes (default: cores / --threads)")
    parser.add_argument("--no-store", action="store_true", help="neither look up nor store")
    parser.add_argument(
        "--scheduler", metavar="tcp://HOST:PORT", help="run on a Dask cluster ([dask] extra)"
    )


def run(args: argparse.Namespace) -> int:
    """Check every argument against every graph, then run the sweep; the exit status."""
    if args.output:
        check_writable(args.output)  # before any row or progress line
    graphs = [
        (graph_label(text), load_with_budgets(text, args.budget))
        for text in [args.graph, *args.more]
    ]
    for label, graph in graphs:
        if args.device not in graph.device_index:
            devices = ", ".join(graph.device_index)
            raise UsageError(f"--device {args.device!r}: devices of {label} are {devices}")
    if not 1 <= args.steps <= MAX_STEPS:
        raise UsageError(f"--steps must be from 1 to {MAX_STEPS}")
    if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be from 1 to {MAX_JOBS}")
    methods = args.method or ["xengine", "checkmate"]
    for _, graph in graphs:
        for method in methods:
            parse_method(graph, method)
    fractions = {
        label: budget_steps(
            parse_fraction(args.start, graph), parse_fraction(args.stop, graph), args.steps
        )
        for label, graph in graphs
    }
    return run_sweep_command(args, graphs, fractions, methods, solve_options(args))
