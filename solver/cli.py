"""The command line of docs/formats.md: ``solve``, ``check``, ``sweep``, ``examples``.

Exit status: 0 a valid schedule, 1 no schedule (infeasible, time limit without incumbent,
cancelled, or a schedule that breaks a rule), 2 bad input or usage. Errors are one line on
stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from solver.document.atomic import check_writable
from solver.document.examples import bundled_graphs
from solver.document.graph import Graph
from solver.document.graph_io import load_graph
from solver.document.schedule import Schedule
from solver.document.schedule_io import load_schedule, save_schedule
from solver.document.units import MAX_SIZE, format_ms, format_size, parse_size
from solver.errors import FileWriteError, XEngineError, printable
from solver.execution.concurrent import concurrent_makespan
from solver.execution.simulate import Timeline, effective_graph, simulate
from solver.optimize.backends.registry import BACKENDS, available_backends
from solver.optimize.bounds import no_remat_peak
from solver.optimize.intervals import DEFAULT_RUNS
from solver.optimize.methods import METHODS, OFFLOAD_METHODS, offload_applies, parse_method
from solver.optimize.solve import FORMULATIONS, SolveOptions, SolveResult
from solver.status import SolveStatus
from solver.sweeps.sweep import budget_steps

__all__ = ["main", "parse_budget", "resolve_graph_path"]

EXIT_OK, EXIT_NO_SCHEDULE, EXIT_BAD_INPUT = 0, 1, 2
MAX_TIME_LIMIT_S = 10**7
"""The longest time limit accepted (about 115 days); more is a typo."""
MAX_THREADS = 256
MAX_RUNS = 64
MAX_PERCENT = 10**6
"""The largest ``--budget DEVICE=P%`` (ten thousand times the no-remat peak)."""
MAX_STEPS = 10_000
MAX_JOBS = 64
"""The most sweep worker processes (each holds the solver: about 100 MB before it solves)."""
_SOLVER_HELP = "; ".join(f"{b.name}: {b.description}" for b in BACKENDS.values())
CANCEL_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals that cancel a running solve (it stops and keeps its incumbent), like Ctrl-C."""


class UsageError(XEngineError):
    """A command-line argument is wrong; exit status 2."""


def resolve_graph_path(text: str) -> Path:
    """A graph file path, or the name of a bundled graph (``chain``, ``vgg16``, ...)."""
    path = Path(text)
    if not path.exists() and text in bundled_graphs():
        return bundled_graphs()[text]
    return path


def parse_budget(graph: Graph, text: str) -> tuple[str, int]:
    """Parse ``DEVICE=SIZE`` where SIZE has a unit or is a percentage of the no-remat peak.

    A percentage sets the activation budget; the device's fixed memory is added on top.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> parse_budget(unit_chain(4), "cpu=50%"), parse_budget(unit_chain(4), "cpu=2KiB")
    (('cpu', 3), ('cpu', 2048))
    """
    device, sep, size = text.partition("=")
    if not sep or not device or not size:
        raise UsageError(f"--budget {text!r}: write DEVICE=SIZE, e.g. gpu=2GiB or gpu=60%")
    if device not in graph.device_index:
        names = ", ".join(graph.device_index)
        raise UsageError(f"--budget {text!r}: unknown device {device!r}; devices are {names}")
    if size.strip().endswith("%"):
        percent = _percent(size, f"--budget {text!r}")
        fixed = graph.device(device).fixed_memory
        budget = fixed + int(percent / 100 * no_remat_peak(graph))
        if budget > MAX_SIZE:
            raise UsageError(f"--budget {text!r}: {budget} bytes is more than {MAX_SIZE}")
        return device, budget
    try:
        return device, parse_size(size)
    except ValueError as exc:
        raise UsageError(f"--budget {text!r}: {exc}") from None


def _percent(text: str, where: str) -> float:
    """A finite percentage in [0, MAX_PERCENT] from ``"60%"`` (NaN and inf are refused)."""
    try:
        percent = float(text.strip()[:-1])
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a percentage") from None
    if not math.isfinite(percent) or percent < 0 or percent > MAX_PERCENT:
        raise UsageError(f"{where}: a percentage must be a number from 0 to {MAX_PERCENT}")
    return percent


def _load(path_text: str, budgets: Sequence[str]) -> Graph:
    graph = load_graph(resolve_graph_path(path_text))
    for note in graph.notes:
        print(printable(f"note: {note}"), file=sys.stderr)
    overrides = dict(parse_budget(graph, b) for b in budgets)
    return graph.with_memory_limits(overrides) if overrides else graph


def _options(args: argparse.Namespace) -> SolveOptions:
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
    chosen = getattr(args, "formulation", "auto")
    if chosen == "intervals" and BACKENDS[args.solver].kind != "cp":
        raise UsageError("--formulation intervals runs on CP-SAT: add --solver cpsat")
    if chosen == "stages" and BACKENDS[args.solver].kind == "cp":
        raise UsageError("--formulation stages runs on cbc or highs, not --solver cpsat")
    return chosen


def _cancel_on_interrupt() -> threading.Event:
    """Ctrl-C, SIGTERM and SIGHUP stop the solver, which keeps its incumbent (and stops CBC),
    instead of killing the program and orphaning CBC. :func:`main` restores the handlers."""
    cancel = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in CANCEL_SIGNALS:
            signal.signal(sig, lambda *_: cancel.set())
    return cancel


@contextlib.contextmanager
def _restored_signal_handlers():
    """Put back the signal handlers a command installed (the CLI also runs inside tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in CANCEL_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send what native code prints (HiGHS's banner) to stderr, so stdout stays pure output."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _concurrent_ms(
    graph: Graph, schedule: Schedule | None, timeline: Timeline | None
) -> float | None:
    """The concurrent-execution estimate (solver/execution/concurrent.py) of a valid replay.

    None when there is no schedule or its replay is invalid.
    """
    if schedule is None or timeline is None or not timeline.valid:
        return None
    return round(concurrent_makespan(graph, schedule, timeline), 6)


def _ms_or_dash(ms: float | None) -> str:
    return "-" if ms is None else format_ms(ms)


def _report(result: SolveResult, concurrent_ms: float | None = None) -> dict:
    block: dict[str, object] = {
        "method": result.method,
        "backend": result.backend,
        "status": result.status.value,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "seconds": round(result.seconds, 3),
        "build_seconds": round(result.build_seconds, 3),
        "variables": result.variables,
        "constraints": result.constraints,
        "message": result.message,
        "formulation": result.formulation,
        "advice": result.advice,
    }
    if result.restricted is not None:
        block["restricted"] = {
            "runs_per_node": result.restricted.runs,
            "bound": result.restricted.bound,
            "proven": result.restricted.proven,
        }
    if result.timeline is not None:
        block["summary"] = result.timeline.summary()
        block["concurrent_ms"] = concurrent_ms
    return block


def _print_result(result: SolveResult, concurrent_ms: float | None = None) -> None:
    how = result.backend or "heuristic"
    if not result.backend and result.status is SolveStatus.INFEASIBLE and result.schedule is None:
        how = "no solver run: the budgets fail a necessary condition"
    print(f"method     {result.method} ({how})")
    print(f"status     {result.status.value}")
    if result.message and not result.ok:
        print(printable(f"why        {result.message}"))
    if result.timeline is None:
        return
    t = result.timeline
    bound = f", bound {result.bound:.6g}, gap {result.gap:.2%}" if result.gap is not None else ""
    print(
        f"time       {format_ms(t.total_ms)} (compute {format_ms(t.compute_ms)}, "
        f"transfers {format_ms(t.transfer_ms)}){bound}"
    )
    if concurrent_ms is not None:
        print(f"concurrent {format_ms(concurrent_ms)} (devices and links in parallel)")
    print(
        f"recompute  {t.recomputations} operations, {format_ms(t.recompute_ms)}; "
        f"{len(t.transfers)} transfers"
    )
    offloads = [tr for tr in t.transfers if tr.offload]
    if offloads:
        ms = sum(tr.end - tr.start for tr in offloads)
        print(f"offload    {len(offloads)} copies kept on another device, {format_ms(ms)}")
    for device, peak in t.peaks.items():
        budget = t.activation_budgets[device]
        share = f" ({peak / budget:.0%})" if budget else ""
        print(f"memory     {device}: peak {format_size(peak)} of {format_size(budget)}{share}")
    model = f", {result.formulation}" if result.formulation else ""
    print(
        f"solved in  {result.seconds:.2f} s ({result.variables} variables, "
        f"{result.constraints} constraints{model})"
    )
    if result.restricted is not None and result.restricted.proven:
        print(printable(f"restricted {result.restricted.describe()}"))
    if result.advice:
        print(printable(f"advice     {result.advice}"))


def cmd_solve(args: argparse.Namespace) -> int:
    if args.output:
        check_writable(args.output)  # before the solve, not after it
    graph = _load(args.graph, args.budget)
    parse_method(graph, args.method)
    options = _options(args)
    with _stdout_to_stderr():
        result = _solve_stored(graph, args, options)
    unwritten = None
    if args.output and result.schedule is not None:
        summary = result.timeline.summary() if result.timeline is not None else None
        try:
            save_schedule(result.schedule, args.output, summary)
        except FileWriteError as exc:  # e.g. past the size check reads: the result still shows
            unwritten = exc
    concurrent = _concurrent_ms(graph, result.schedule, result.timeline)
    if args.json:
        print(_json_text(_report(result, concurrent)))
    else:
        _print_result(result, concurrent)
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
    cancel = _cancel_on_interrupt()
    return solve_cached(graph, args.method, options, store, cancel=cancel, lookup=False).result


def cmd_check(args: argparse.Namespace) -> int:
    graph = load_graph(resolve_graph_path(args.graph))
    schedule = load_schedule(args.schedule, graph)
    overrides = dict(parse_budget(graph, b) for b in args.budget)
    replay_graph = effective_graph(graph, schedule, overrides)
    timeline = simulate(replay_graph, schedule)
    concurrent = _concurrent_ms(replay_graph, schedule, timeline)
    if args.json:
        print(_json_text({**timeline.summary(), "concurrent_ms": concurrent}))
    elif timeline.valid:
        print(
            f"valid: {format_ms(timeline.total_ms)} (concurrent {_ms_or_dash(concurrent)}), "
            f"{timeline.recomputations} recomputations, "
            f"{len(timeline.transfers)} transfers"
        )
        for device, peak in timeline.peaks.items():
            budget = timeline.activation_budgets[device]
            print(f"  {device}: peak {format_size(peak)} of {format_size(budget)}")
    else:
        print(printable(f"invalid: {timeline.violation}"), file=sys.stderr)
    return EXIT_OK if timeline.valid else EXIT_NO_SCHEDULE


def _json_text(doc: dict) -> str:
    """One JSON document for stdout; a non-finite number (a sum of costs near 1e308 that
    overflowed) is written as null, since JSON has no Infinity or NaN."""
    return json.dumps(_finite(doc), indent=1, allow_nan=False)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _fraction(text: str, graph: Graph) -> float:
    text = text.strip()
    if text.endswith("%"):
        return _percent(text, "--from/--to") / 100
    try:
        return parse_size(text) / max(no_remat_peak(graph), 1)
    except ValueError as exc:
        raise UsageError(f"{text!r}: {exc}") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    from solver.sweeps.cli import graph_label, run_sweep_command

    if args.output:
        check_writable(args.output)  # before any row or progress line

    graphs = [(graph_label(text), _load(text, args.budget)) for text in [args.graph, *args.more]]
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
        label: budget_steps(_fraction(args.start, graph), _fraction(args.stop, graph), args.steps)
        for label, graph in graphs
    }
    return run_sweep_command(args, graphs, fractions, methods, _options(args))


def cmd_examples(args: argparse.Namespace) -> int:
    for name, path in bundled_graphs().items():
        try:
            graph = load_graph(path)
        except XEngineError as exc:
            print(printable(f"{name:<16} (unreadable: {exc})"))
            continue
        devices = ", ".join(f"{d.name} {format_size(d.memory)}" for d in graph.devices)
        print(
            printable(
                f"{name:<16} {graph.n:>4} nodes  {len(graph.edges):>4} edges  {devices}  "
                f"[{graph.name}]"
            )
        )
    return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: what is wrong and where to look."""

    def error(self, message: str):
        self.exit(
            EXIT_BAD_INPUT,
            printable(f"{self.prog}: error: {message}; see {self.prog} --help") + "\n",
        )


def _seconds(text: str) -> float:
    value = _float_arg(text)
    if not 0 < value <= MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a number of seconds above 0 and at most {MAX_TIME_LIMIT_S}"
        )
    return value


def _gap(text: str) -> float:
    value = _float_arg(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0 (e.g. 0.01 for 1%)")
    return value


def _runs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_RUNS:
        raise argparse.ArgumentTypeError(f"{value} must be from 1 to {MAX_RUNS}")
    return value


def _threads(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{value} must be from 1 to {MAX_THREADS}")
    return value


def _float_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        epilog="Also: main.py import-torch MODULE:CLASS --input 32x3x224x224 [-o FILE] imports a "
        "PyTorch module as a training graph (needs the torch extra; see its --help); "
        "main.py import-onnx FILE.onnx [-o FILE] imports an ONNX file (needs the onnx extra); "
        "main.py execute MODULE:CLASS --input SHAPE --schedule FILE runs a schedule for real.",
        prog="main.py",
        description="XEngine Studio: tensor "
        "rematerialization on heterogeneous devices. With no "
        "command, opens the GUI.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def solver_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("graph", help="a *.graph.json file or a bundled graph name")
        p.add_argument(
            "--budget",
            action="append",
            default=[],
            metavar="DEVICE=SIZE",
            help="device memory, e.g. gpu=2GiB or gpu=60%% (of the no-remat peak)",
        )
        p.add_argument("--time-limit", type=_seconds, default=60.0, metavar="SECONDS")
        p.add_argument("--solver", choices=list(BACKENDS), default="cbc", help=_SOLVER_HELP)
        p.add_argument("--gap", type=_gap, default=1e-4, help="relative gap (default 1e-4)")
        p.add_argument("--threads", type=_threads, default=None)
        p.add_argument(
            "--formulation",
            choices=FORMULATIONS,
            default="auto",
            help="auto: the paper's model while small, retention intervals above (CP-SAT); "
            "stages: the paper's model at any size; intervals: with --solver cpsat",
        )
        p.add_argument(
            "--runs",
            type=_runs,
            default=DEFAULT_RUNS,
            help=f"the interval model's computations per node and device (default {DEFAULT_RUNS})",
        )
        p.add_argument(
            "--no-improve",
            action="store_true",
            help="no neighbourhood search beside the full model (it takes a second core)",
        )

    solve_p = sub.add_parser("solve", help="find the fastest schedule")
    solver_args(solve_p)
    solve_p.add_argument(
        "--method",
        default="xengine",
        help=f"one of {', '.join(METHODS)}; single-device ones take :DEVICE",
    )
    solve_p.add_argument(
        "--offload",
        action="store_true",
        help="let the MIQP copy tensors to another device and keep them there (off: the "
        "paper's model); for --method xengine and overlap",
    )
    solve_p.add_argument("-o", "--output", help="write the schedule JSON here")
    solve_p.add_argument("--json", action="store_true", help="print one JSON object")
    solve_p.add_argument("--no-store", action="store_true", help="neither look up nor store")
    solve_p.set_defaults(run=cmd_solve)

    check_p = sub.add_parser("check", help="replay and validate a schedule")
    check_p.add_argument("graph")
    check_p.add_argument("schedule")
    check_p.add_argument("--budget", action="append", default=[], metavar="DEVICE=SIZE")
    check_p.add_argument("--json", action="store_true")
    check_p.set_defaults(run=cmd_check)

    sweep_p = sub.add_parser("sweep", help="solve over a range of one device's budget")
    solver_args(sweep_p)
    sweep_p.add_argument("--device", required=True)
    sweep_p.add_argument("--from", dest="start", default="100%")
    sweep_p.add_argument("--to", dest="stop", default="10%")
    sweep_p.add_argument("--steps", type=int, default=10)
    sweep_p.add_argument(
        "--method", action="append", help="repeat for several (default: xengine and checkmate)"
    )
    sweep_p.add_argument(
        "--offload",
        action="store_true",
        help="xengine and overlap may offload (copy tensors to another device and keep them "
        "there); other methods run unchanged",
    )
    sweep_p.add_argument("-o", "--output", help="write the results as CSV here")
    sweep_p.add_argument("more", nargs="*", metavar="GRAPH", help="more graphs to sweep alike")
    sweep_p.add_argument("--jobs", type=int, help="worker processes (default: cores / --threads)")
    sweep_p.add_argument("--no-store", action="store_true", help="neither look up nor store")
    sweep_p.add_argument(
        "--scheduler", metavar="tcp://HOST:PORT", help="run on a Dask cluster ([dask] extra)"
    )
    sweep_p.set_defaults(run=cmd_sweep)

    examples_p = sub.add_parser("examples", help="list the bundled graphs")
    examples_p.set_defaults(run=cmd_examples)
    from solver.results.cli import add_results_parser

    add_results_parser(sub)
    return parser


class _WarningLines(logging.Handler):
    """The core's warnings (the result store's) as one ``warning: ...`` line each on stderr,
    told apart from the one ``error:`` line a failed command ends with."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(printable(f"warning: {record.getMessage()}"), file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging's own contract: never raise from emit
            self.handleError(record)


def _warnings_to_stderr() -> None:
    core = logging.getLogger("solver")
    if not any(isinstance(h, _WarningLines) for h in core.handlers):
        core.addHandler(_WarningLines(logging.WARNING))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _warnings_to_stderr()
    if argv and argv[0] == "import-torch":
        from solver.importers.cli import import_torch_command

        return import_torch_command(argv[1:])
    if argv and argv[0] == "import-onnx":
        from solver.importers.onnx_cli import import_onnx_command

        return import_onnx_command(argv[1:])
    if argv and argv[0] == "execute":
        from solver.executors.cli import execute_command

        return execute_command(argv[1:])
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    with _restored_signal_handlers():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the command; every error becomes one line on stderr, never a traceback."""
    try:
        return args.run(args)
    except (XEngineError, OSError) as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_NO_SCHEDULE
    except Exception as exc:  # noqa: BLE001 - the last line of defence of the contract
        if os.environ.get("XENGINE_DEBUG"):
            raise
        what = printable(f"{type(exc).__name__}: {exc}")[:300]
        print(f"error: internal error ({what}); please report it with the input", file=sys.stderr)
        return EXIT_BAD_INPUT
