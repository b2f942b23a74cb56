"""Solve through the result store: look up first, solve only when needed, store what finished.

This is the one place where "stored or solved" is decided, for the CLI, the sweep workers and
the GUI alike (docs/formats.md ``--no-store``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from solver.document.graph import Graph
from solver.optimize.methods import solve
from solver.optimize.solve import ProgressCallback, SolveOptions, SolveResult
from solver.results.store import ResultStore, StoredResult

__all__ = ["CachedSolve", "solve_cached", "stored_answer"]


@dataclass(frozen=True)
class CachedSolve:
    """A result and where it came from.

    ``from_store`` is true when the stored result answered the solve; ``stored_note`` says
    when a stored result fell short (a shorter time limit) and was solved again, else it is
    empty.
    """

    result: SolveResult
    from_store: bool = False
    stored_note: str = ""


def solve_cached(
    graph: Graph,
    method: str,
    options: SolveOptions,
    store: ResultStore | None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    on_stored: Callable[[StoredResult], None] | None = None,
    lookup: bool = True,
) -> CachedSolve:
    """``solver.optimize.methods.solve`` with the store in front (``store=None``: no store).

    A stored result that is final or ran under at least ``options.time_limit_s`` is returned
    as it is. A shorter-limit one is handed to ``on_stored`` (so a caller can show it at
    once) and the graph is solved again; the better of the two is stored. ``lookup=False``
    always solves and only stores (the CLI's ``solve``: it is what people time). A store that
    fails only logs a warning: the solve's result is always returned.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from solver.document.generators import unit_chain
    >>> store = ResultStore(pathlib.Path(tempfile.mkdtemp()) / "r.sqlite3")
    >>> graph = unit_chain(3, budget=5)
    >>> first = solve_cached(graph, "checkpoint-all", SolveOptions(), store)
    >>> again = solve_cached(graph, "checkpoint-all", SolveOptions(), store)
    >>> first.from_store, again.from_store, again.result.timeline.total_ms
    (False, True, 7.0)
    """
    note = ""
    if lookup:
        stored, final = stored_answer(graph, method, options, store)
        if stored is not None and final:
            return CachedSolve(stored.result, from_store=True)
        if stored is not None:
            note = stored.note(options.time_limit_s)
            if on_stored is not None:
                on_stored(stored)
    result = solve(graph, method, options, on_progress, cancel)
    if store is not None:
        store.put(graph, method, options, result)
    return CachedSolve(result, stored_note=note)


def stored_answer(
    graph: Graph, method: str, options: SolveOptions, store: ResultStore | None
) -> tuple[StoredResult | None, bool]:
    """The stored result (if any) and whether it answers the solve without solving again.

    The one rule of "stored or solved": a stored result answers when it is final or ran
    under at least ``options.time_limit_s``; a shorter-limit one is returned too (to show at
    once, with a note) but the solve runs again.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> stored_answer(unit_chain(3), "checkpoint-all", SolveOptions(), store=None)
    (None, False)
    """
    if store is None:
        return None, False
    stored = store.lookup(graph, method, options)
    return stored, stored is not None and stored.reusable_for(options.time_limit_s)
