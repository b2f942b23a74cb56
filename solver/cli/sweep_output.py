"""``main.py sweep``, once its arguments are checked: run the tasks, stream rows as they finish,
keep the CSV, show progress.

Rows are printed as solves finish (in any order); the CSV file (``-o``) is rewritten atomically
after each one, sorted by network, budget and method, so a sweep stopped by Ctrl-C or SIGTERM
leaves every finished row behind (and the result store has them too). The progress bar goes to
stderr, redrawn in place only when stderr is a terminal; otherwise one plain line per solve.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from solver.cli.arguments import EXIT_NO_SCHEDULE, EXIT_OK
from solver.cli.signals import cancel_on_signals
from solver.document.atomic import atomic_write_text
from solver.document.csvsafe import neutralise_row
from solver.document.graph import Graph
from solver.document.units import format_ms, format_size
from solver.optimize.bounds import lower_bound
from solver.optimize.solve import SolveOptions
from solver.results.store import ResultStore, StoredResult, default_store_path
from solver.status import SolveStatus
from solver.sweeps.sweep import SweepPoint, SweepTask, default_jobs, run_sweep, sweep_tasks

__all__ = ["CSV_HEADER", "ProgressLine", "graph_label", "run_sweep_command", "sweep_csv"]

CSV_HEADER = (
    "device",
    "fraction",
    "budget_bytes",
    "method",
    "status",
    "total_ms",
    "seconds",
    "graph",
    "from_store",
    "offload",
)


def graph_label(text: str) -> str:
    """The network's name in rows: a bundled name as given, a file's name without suffix.

    Examples
    --------
    >>> graph_label("chain"), graph_label("models/vgg16.graph.json")
    ('chain', 'vgg16')
    """
    name = Path(text).name
    return name[: -len(".graph.json")] if name.endswith(".graph.json") else Path(name).stem


def sweep_csv(points: Sequence[SweepPoint]) -> str:
    """The CSV text of ``points`` (header first, one row per point, in the given order)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for p in points:
        total = "" if p.total_ms is None else f"{p.total_ms:.6g}"
        writer.writerow(
            neutralise_row(  # ids from a graph file must not run as spreadsheet formulas
                [
                    p.device,
                    p.fraction,
                    p.budget,
                    p.result.method,
                    p.result.status.value,
                    total,
                    f"{p.result.seconds:.3f}",
                    p.graph,
                    "yes" if p.from_store else "no",
                    "yes" if p.offload else "no",
                ]
            )
        )
    return buffer.getvalue()


class ProgressLine:
    """``[#####.....] 12/24 solves (3 stored) 14 s`` on stderr: in place on a terminal, else
    one plain line per update."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total = total
        self.done = 0
        self.stored = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()

    def text(self) -> str:
        width = 24
        filled = width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (width - filled)
        seconds = time.monotonic() - self.started
        counts = f"{self.done}/{self.total} solves ({self.stored} from the store)"
        return f"[{bar}] {counts} {seconds:.0f} s"

    def advance(self, point: SweepPoint) -> None:
        self.done += 1
        self.stored += point.from_store
        if self.tty:
            self.stream.write("\r\x1b[K" + self.text())
        else:
            self.stream.write(f"progress: {self.text()}\n")
        self.stream.flush()

    def clear(self) -> None:
        """Wipe the in-place bar before other output (a terminal only)."""
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def redraw(self) -> None:
        if self.tty and self.done:
            self.stream.write(self.text())
            self.stream.flush()


def run_sweep_command(
    args: argparse.Namespace,
    graphs: Sequence[tuple[str, Graph]],
    fractions: dict[str, list[float]],
    methods: Sequence[str],
    options: SolveOptions,
) -> int:
    """Run a parsed ``sweep`` command over ``graphs`` (label, graph); the exit status."""
    tasks: list[SweepTask] = []
    for label, graph in graphs:
        tasks += sweep_tasks(
            graph, args.device, fractions[label], methods, options, label, len(tasks)
        )
    path = None if args.no_store else default_store_path()
    store = ResultStore(path) if path is not None else None
    jobs = args.jobs or default_jobs(options)
    progress = ProgressLine(len(tasks))
    finished: dict[int, SweepPoint] = {}
    order = {(t.label, t.fraction, t.method): t.index for t in tasks}
    print(f"{'network':<12} {'budget':>12} {'fraction':>8}  {'method':<22} {'status':<11} "
          f"{'time':>10}  source")  # fmt: skip
    sys.stdout.flush()

    def on_point(point: SweepPoint) -> None:
        finished[order[point.graph, point.fraction, point.method]] = point
        progress.clear()
        _print_row(point)
        progress.redraw()
        progress.advance(point)
        if args.output:
            atomic_write_text(args.output, sweep_csv([finished[i] for i in sorted(finished)]))

    def on_stored(task: SweepTask, stored: StoredResult) -> None:
        progress.clear()
        print(
            f"note: {task.label} {task.device} {task.fraction:.0%} {task.method}: "
            f"{stored.note(task.options.time_limit_s)}; solving again",
            file=sys.stderr,
        )
        progress.redraw()

    with cancel_on_signals() as cancel:
        points = run_sweep(
            tasks, jobs, store, on_point, cancel, on_stored, getattr(args, "scheduler", None)
        )
    progress.clear()
    if progress.tty:
        print(progress.text(), file=sys.stderr)
    if args.output:
        atomic_write_text(args.output, sweep_csv(points))
    for label, graph in graphs:
        floor = format_size(lower_bound(graph, args.device))
        print(f"({label}: nothing runs on {args.device} below {floor})")
    if cancel.is_set():
        _print_cancelled(points, len(tasks), store is not None)
        return EXIT_NO_SCHEDULE
    return EXIT_OK if any(p.result.ok for p in points) else EXIT_NO_SCHEDULE


def _print_cancelled(points: Sequence[SweepPoint], total: int, stored: bool) -> None:
    stopped = sum(p.result.status is SolveStatus.CANCELLED for p in points)
    failed = sum(p.result.status is SolveStatus.ERROR for p in points)
    finished = len(points) - stopped - failed
    print(
        f"cancelled: {finished} of {total} solves finished"
        + (" (they are in the result store)" if stored and finished else "")
        + f"; {stopped} stopped early (best schedule so far shown, not stored); "
        + (f"{failed} failed (see their rows); " if failed else "")
        + f"{total - len(points)} not started",
        file=sys.stderr,
    )


def _print_row(p: SweepPoint) -> None:
    total = format_ms(p.total_ms) if p.total_ms is not None else "-"
    source = "store" if p.from_store else "solved"
    print(
        f"{p.graph:<12} {format_size(p.budget):>12} {p.fraction:>8.0%}  {p.result.method:<22} "
        f"{p.result.status.value:<11} {total:>10}  {source}",
        flush=True,
    )
