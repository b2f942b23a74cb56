"""``main.py examples``: the bundled graphs, one line each (nodes, edges, devices, name).

A bundled file that does not load is listed as unreadable rather than stopping the list.
"""

from __future__ import annotations

import argparse

from solver.cli.arguments import EXIT_OK
from solver.document.examples import bundled_graphs
from solver.document.graph_io import load_graph
from solver.document.units import format_size
from solver.errors import XEngineError, printable

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def run(args: argparse.Namespace) -> int:
    """Print the list; always 0."""
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
