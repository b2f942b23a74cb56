"""``main.py check GRAPH SCHEDULE [--budget DEVICE=SIZE ...] [--json]``: replay and validate.

The simulator replays the schedule on the graph (with ``--budget`` applied) and says whether
every rule holds. Exit status 0 for a valid schedule, 1 for one that breaks a rule (named on
stderr), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from solver.cli.arguments import EXIT_NO_SCHEDULE, EXIT_OK, parse_budget, resolve_graph_path
from solver.cli.output import concurrent_ms, json_text, ms_or_dash
from solver.document.graph_io import load_graph
from solver.document.schedule_io import load_schedule
from solver.document.units import format_ms, format_size
from solver.errors import printable
from solver.execution.simulate import effective_graph, simulate

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A graph, its schedule, and budgets to check it against."""
    parser.add_argument("graph")
    parser.add_argument("schedule")
    parser.add_argument("--budget", action="append", default=[], metavar="DEVICE=SIZE")
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Replay the schedule and print the summary; the exit status."""
    graph = load_graph(resolve_graph_path(args.graph))
    schedule = load_schedule(args.schedule, graph)
    overrides = dict(parse_budget(graph, b) for b in args.budget)
    replay_graph = effective_graph(graph, schedule, overrides)
    timeline = simulate(replay_graph, schedule)
    concurrent = concurrent_ms(replay_graph, schedule, timeline)
    if args.json:
        print(json_text({**timeline.summary(), "concurrent_ms": concurrent}))
    elif timeline.valid:
        print(
            f"valid: {format_ms(timeline.total_ms)} (concurrent {ms_or_dash(concurrent)}), "
            f"{timeline.recomputations} recomputations, "
            f"{len(timeline.transfers)} transfers"
        )
        for device, peak in timeline.peaks.items():
            budget = timeline.activation_budgets[device]
            print(f"  {device}: peak {format_size(peak)} of {format_size(budget)}")
    else:
        print(printable(f"invalid: {timeline.violation}"), file=sys.stderr)
    return EXIT_OK if timeline.valid else EXIT_NO_SCHEDULE
