"""``main.py results list|show|export|prune``: see and manage the result store.

``list`` prints one line per stored solve (newest first), ``show ID`` one row in full (``-o``
writes its schedule file), ``export -o FILE`` every row as CSV or JSON (by the file's suffix;
JSON keeps the schedules), and ``prune`` deletes rows by age or method (``--all`` for all).
``--store PATH`` picks the database (default: ``$XENGINE_STORE`` or the user's data directory).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import sys
from pathlib import Path

from solver.cli.arguments import resolve_graph_path
from solver.document.atomic import atomic_write_text, check_writable
from solver.document.json_io import write_json
from solver.document.units import format_ms, format_size
from solver.errors import XEngineError
from solver.results.store import (
    MAX_ROW_ID,
    DamagedRow,
    ResultStore,
    StoredRow,
    default_store_path,
)

__all__ = ["add_arguments", "run"]

EXPORT_FIELDS = (
    "id", "created", "graph_name", "graph_hash", "budgets", "method", "backend", "gap_rel",
    "time_limit_s", "threads", "status", "objective", "bound", "gap", "total_ms", "seconds",
    "build_seconds", "variables", "constraints", "message",
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--store`` and the four actions, each a subcommand of ``results``."""
    parser.add_argument("--store", metavar="PATH", help="the database (default: see --help)")
    actions = parser.add_subparsers(dest="action", required=True)
    list_p = actions.add_parser("list", help="stored solves, newest first")
    list_p.add_argument("--graph", help="only this graph (a file or bundled name)")
    list_p.add_argument("--method", help="only this method, e.g. xengine or checkmate:gpu")
    show_p = actions.add_parser("show", help="one stored solve in full")
    show_p.add_argument("id", type=_row_id)
    show_p.add_argument("-o", "--output", help="write its schedule JSON here")
    show_p.add_argument("--json", action="store_true", help="print one JSON object")
    export_p = actions.add_parser("export", help="every row as CSV or JSON (by suffix)")
    export_p.add_argument("-o", "--output", required=True, help="a .csv or .json file")
    prune_p = actions.add_parser("prune", help="delete stored solves")
    prune_p.add_argument("--older-than", type=float, metavar="DAYS")
    prune_p.add_argument("--method")
    prune_p.add_argument("--all", action="store_true", help="delete every row")


def _row_id(text: str) -> int:
    """A row id as SQLite can hold one (a larger integer overflowed the driver)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a row id") from None
    if not 1 <= value <= MAX_ROW_ID:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a row id (ids run from 1 to {MAX_ROW_ID}; see 'results list')"
        )
    return value


def run(args: argparse.Namespace) -> int:
    """Run ``results ACTION``; the exit status (2 for bad usage, 1 for an unknown id)."""
    path = Path(args.store) if args.store else default_store_path()
    if path is None:
        raise XEngineError("the result store is off (XENGINE_STORE=off); pass --store PATH")
    store = ResultStore(path)
    if args.action == "list":
        return _list(store, args)
    if args.action == "show":
        return _show(store, args)
    if args.action == "export":
        return _export(store, args)
    return _prune(store, args)


def _list(store: ResultStore, args: argparse.Namespace) -> int:
    graph_hash = None
    if args.graph:
        from solver.document.graph_io import load_graph
        from solver.results.key import graph_hash as content_hash

        graph_hash = content_hash(load_graph(resolve_graph_path(args.graph)))
    rows = store.rows(graph_hash, args.method)
    print(
        f"{'id':>5}  {'stored':<16} {'graph':<20} {'method':<18} {'budgets':<26} "
        f"{'status':<10} {'time':>10} {'limit':>7}"
    )
    for row in rows:
        limit = "any" if row.final else f"{row.time_limit_s or 0:g} s"
        total = format_ms(row.total_ms) if row.total_ms is not None else "-"
        print(
            f"{row.id:>5}  {_when(row.created):<16} {row.graph_name[:20]:<20} "
            f"{row.method[:18]:<18} {_budgets(row)[:26]:<26} {row.status:<10} {total:>10} "
            f"{limit:>7}"
        )
    print(f"{len(rows)} stored solves in {store.path}", file=sys.stderr)
    return 1 if store.problem else 0


def _show(store: ResultStore, args: argparse.Namespace) -> int:
    if args.output:
        check_writable(args.output)
    row = store.row(args.id)
    if row is None:
        what = f"no stored solve with id {args.id}"
        if args.id in store.damaged:
            what = f"stored solve {args.id} is damaged (see the warning)"
        print(f"error: {what}; see 'results list'", file=sys.stderr)
        return 1
    if args.output:
        try:
            doc = row.schedule_doc()
        except DamagedRow as exc:
            store.report_damaged(exc)
            print(f"error: stored solve {row.id} has a damaged schedule", file=sys.stderr)
            return 1
        if doc is None:
            print(f"error: solve {row.id} has no schedule ({row.status})", file=sys.stderr)
            return 1
        write_json(doc, args.output)  # as a schedule file: refused past what check reads
    if args.json:
        print(json.dumps(row.to_dict(with_schedule=False), indent=1))
        return 0
    for name in EXPORT_FIELDS:
        value = getattr(row, name)
        if name == "created":
            value = _when(value)
        elif name == "budgets":
            value = _budgets(row)
        print(f"{name:<14} {value}")
    print(f"{'reusable':<14} {'for any time limit' if row.final else 'up to its limit'}")
    if args.output:
        print(f"schedule       written to {args.output}")
    return 0


def _export(store: ResultStore, args: argparse.Namespace) -> int:
    check_writable(args.output)
    rows = store.rows()
    if str(args.output).lower().endswith(".json"):
        docs = []
        for row in rows:
            try:
                docs.append(row.to_dict())
            except DamagedRow as exc:
                store.report_damaged(exc)
        rows = [row for row in rows if row.id not in store.damaged]
        text = json.dumps(docs, indent=1) + "\n"
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(EXPORT_FIELDS)
        for row in rows:
            data = row.to_dict(with_schedule=False)
            data["budgets"] = json.dumps(row.budgets)
            writer.writerow(["" if data[f] is None else data[f] for f in EXPORT_FIELDS])
        text = buffer.getvalue()
    atomic_write_text(args.output, text)
    print(f"{len(rows)} stored solves written to {args.output}", file=sys.stderr)
    return 1 if store.problem else 0


def _prune(store: ResultStore, args: argparse.Namespace) -> int:
    if args.older_than is None and args.method is None and not args.all:
        raise XEngineError("results prune: say what to delete: --older-than DAYS, --method, --all")
    if args.older_than is not None and not args.older_than >= 0:
        raise XEngineError(f"results prune --older-than {args.older_than:g}: give days >= 0")
    older = args.older_than * 86400.0 if args.older_than is not None else None
    count = store.prune(older, args.method, everything=args.all)
    print(f"deleted {count} stored solves from {store.path}")
    return 1 if store.problem else 0


def _when(created: float) -> str:
    return datetime.datetime.fromtimestamp(created).strftime("%Y-%m-%d %H:%M")


def _budgets(row: StoredRow) -> str:
    return ", ".join(f"{d} {format_size(b)}" for d, b in row.budgets.items())
