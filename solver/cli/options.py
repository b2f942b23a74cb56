"""How to solve, as ``solve`` and ``sweep`` both read it: ``--solver``, ``--time-limit``, ...

The two commands take the same solver arguments, added by :func:`add_solver_arguments` and
turned into :class:`~solver.optimize.solve.SolveOptions` by :func:`solve_options`, which refuses
the combinations no solver runs (``--formulation intervals`` without CP-SAT, ``--offload`` with
a method that cannot offload) with one line naming the fix.
"""

from __future__ import annotations

import argparse

from solver.cli.arguments import UsageError, parse_gap, parse_runs, parse_seconds, parse_threads
from solver.optimize.backends.registry import BACKENDS, available_backends
from solver.optimize.intervals import DEFAULT_RUNS
from solver.optimize.methods import OFFLOAD_METHODS, offload_applies
from solver.optimize.solve import FORMULATIONS, SolveOptions

__all__ = ["add_solver_arguments", "solve_options"]

_SOLVER_HELP = "; ".join(f"{b.name}: {b.description}" for b in BACKENDS.values())


def add_solver_arguments(parser: argparse.ArgumentParser) -> None:
    """The graph, ``--budget`` and the solver's settings (``solve`` and ``sweep``)."""
    parser.add_argument("graph", help="a *.graph.json file or a bundled graph name")
    parser.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="DEVICE=SIZE",
        help="device memory, e.g. gpu=2GiB or gpu=60%% (of the no-remat peak)",
    )
    parser.add_argument("--time-limit", type=parse_seconds, default=60.0, metavar="SECONDS")
    parser.add_argument("--solver", choices=list(BACKENDS), default="cbc", help=_SOLVER_HELP)
    parser.add_argument("--gap", type=parse_gap, default=1e-4, help="relative gap (default 1e-4)")
    parser.add_argument("--threads", type=parse_threads, default=None)
    parser.add_argument(
        "--formulation",
        choices=FORMULATIONS,
        default="auto",
        help="auto: the paper's model while small, retention intervals above (CP-SAT); "
        "stages: the paper's model at any size; intervals: with --solver cpsat",
    )
    parser.add_argument(
        "--runs",
        type=parse_runs,
        default=DEFAULT_RUNS,
        help=f"the interval model's computations per node and device (default {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--no-improve",
        action="store_true",
        help="no neighbourhood search beside the full model (it takes a second core)",
    )


def solve_options(args: argparse.Namespace) -> SolveOptions:
    """The parsed solver arguments as options; :class:`UsageError` for what cannot run here."""
    if args.time_limit <= 0:
        raise UsageError("--time-limit must be positive")
    if args.solver not in available_backends():
        missing = BACKENDS[args.solver]
        raise UsageError(
            f"--solver {args.solver}: {missing.label} is not installed here; "
            f"{missing.install_hint()}, or use cbc"
        )
    offload = bool(getattr(args, "offload", False))
    methods = getattr(args, "method", None) or ["xengine"]
    methods = [methods] if isinstance(methods, str) else methods
    if offload and not any(offload_applies(m) for m in methods):
        raise UsageError(
            f"--offload is an option of --method {' and '.join(OFFLOAD_METHODS)}; drop one of them"
        )
    return SolveOptions(
        backend=args.solver,
        time_limit_s=args.time_limit,
        gap_rel=args.gap,
        threads=args.threads,
        offload=offload,
        improve=not getattr(args, "no_improve", False),
        formulation=_formulation(args),
        runs=getattr(args, "runs", DEFAULT_RUNS),
    )


def _formulation(args: argparse.Namespace) -> str:
    """``--formulation``, checked against ``--solver`` (one line naming the fix)."""
    chosen: str = getattr(args, "formulation", "auto")
    if chosen == "intervals" and BACKENDS[args.solver].kind != "cp":
        raise UsageError("--formulation intervals runs on CP-SAT: add --solver cpsat")
    if chosen == "stages" and BACKENDS[args.solver].kind == "cp":
        raise UsageError("--formulation stages runs on cbc or highs, not --solver cpsat")
    return chosen
