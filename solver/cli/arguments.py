"""What every command shares about its arguments: the parser, the exit statuses, argument types.

A usage error is one line, ``<prog>: error: <what>; see <prog> --help``, and exit status 2
(docs/formats.md); an argument is checked here, where it is read, so that nothing below the
command line sees a NaN time limit or a budget for a device the graph does not have.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from solver.document.examples import bundled_graphs
from solver.document.graph import Graph
from solver.document.graph_io import load_graph
from solver.document.units import MAX_SIZE, parse_size
from solver.errors import XEngineError, printable
from solver.optimize.bounds import no_remat_peak
from solver.optimize.intervals import MAX_RUNS

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_NO_SCHEDULE",
    "EXIT_OK",
    "OneLineParser",
    "UsageError",
    "load_with_budgets",
    "parse_budget",
    "parse_fraction",
    "parse_gap",
    "parse_percent",
    "parse_runs",
    "parse_seconds",
    "parse_threads",
    "resolve_graph_path",
]

EXIT_OK, EXIT_NO_SCHEDULE, EXIT_BAD_INPUT = 0, 1, 2
MAX_TIME_LIMIT_S = 10**7
"""The longest time limit accepted (about 115 days); more is a typo."""
MAX_THREADS = 256
MAX_PERCENT = 10**6
"""The largest ``--budget DEVICE=P%`` (ten thousand times the no-remat peak)."""


class UsageError(XEngineError):
    """A command-line argument is wrong; exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: what is wrong and where to look.

    Its subcommands' parsers are of this class too (argparse makes them of the parent's).

    Examples
    --------
    >>> import contextlib, io
    >>> parser = OneLineParser(prog="main.py x")
    >>> _ = parser.add_argument("--n", type=int, required=True)
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     try:
    ...         parser.parse_args(["--n", "a"])
    ...     except SystemExit as exc:
    ...         code = exc.code
    >>> code, err.getvalue()
    (2, "main.py x: error: argument --n: invalid int value: 'a'; see main.py x --help\\n")
    """

    def error(self, message: str) -> NoReturn:
        self.exit(
            EXIT_BAD_INPUT,
            printable(f"{self.prog}: error: {message}; see {self.prog} --help") + "\n",
        )


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
        percent = parse_percent(size, f"--budget {text!r}")
        fixed = graph.device(device).fixed_memory
        budget = fixed + int(percent / 100 * no_remat_peak(graph))
        if budget > MAX_SIZE:
            raise UsageError(f"--budget {text!r}: {budget} bytes is more than {MAX_SIZE}")
        return device, budget
    try:
        return device, parse_size(size)
    except ValueError as exc:
        raise UsageError(f"--budget {text!r}: {exc}") from None


def parse_percent(text: str, where: str) -> float:
    """A finite percentage in [0, MAX_PERCENT] from ``"60%"`` (NaN and inf are refused)."""
    try:
        percent = float(text.strip()[:-1])
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a percentage") from None
    if not math.isfinite(percent) or percent < 0 or percent > MAX_PERCENT:
        raise UsageError(f"{where}: a percentage must be a number from 0 to {MAX_PERCENT}")
    return percent


def parse_fraction(text: str, graph: Graph) -> float:
    """``--from``/``--to`` as a share of the no-remat peak: ``"60%"`` or a size (``"2GiB"``)."""
    text = text.strip()
    if text.endswith("%"):
        return parse_percent(text, "--from/--to") / 100
    try:
        return parse_size(text) / max(no_remat_peak(graph), 1)
    except ValueError as exc:
        raise UsageError(f"{text!r}: {exc}") from None


def load_with_budgets(path_text: str, budgets: Sequence[str]) -> Graph:
    """The graph named on the command line, its notes on stderr, with ``--budget`` applied."""
    graph = load_graph(resolve_graph_path(path_text))
    for note in graph.notes:
        print(printable(f"note: {note}"), file=sys.stderr)
    overrides = dict(parse_budget(graph, b) for b in budgets)
    return graph.with_memory_limits(overrides) if overrides else graph


def parse_seconds(text: str) -> float:
    """``--time-limit``: seconds above 0 and at most :data:`MAX_TIME_LIMIT_S`."""
    value = _parse_float(text)
    if not 0 < value <= MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a number of seconds above 0 and at most {MAX_TIME_LIMIT_S}"
        )
    return value


def parse_gap(text: str) -> float:
    """``--gap``: a relative gap >= 0."""
    value = _parse_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0 (e.g. 0.01 for 1%)")
    return value


def parse_runs(text: str) -> int:
    """``--runs``: computations per node and device in the interval model."""
    return _parse_count(text, MAX_RUNS)


def parse_threads(text: str) -> int:
    """``--threads``: the solver's threads."""
    return _parse_count(text, MAX_THREADS)


def _parse_count(text: str, most: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"{value} must be from 1 to {most}")
    return value


def _parse_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value
