"""The result store: every finished solve in an SQLite database, looked up before solving again.

One row per :class:`~solver.results.key.ResultKey` (graph content, memory limits, method, backend,
gap) holds the status, objective, bound, timings, the time limit it ran under and the schedule
as JSON (docs/formats.md). A row is reusable for any time limit when it is final (proven
optimal, proven infeasible, or a deterministic heuristic), else only for limits up to its own:
a caller may still show a shorter-limit row at once, and say so, while it solves again.

Several processes (sweep workers, the GUI, a second terminal) share the file: it is in WAL mode,
writers take the lock up front (``BEGIN IMMEDIATE``) and wait up to ``timeout_s`` in all for
it. A store that cannot be opened, is corrupt or stays locked never raises and never loses a
solve: the operation is skipped, one warning line is logged, and the caller carries on with its
own result. Once a store stayed locked for a whole ``timeout_s``, later operations of the same
process try it once without waiting (a locked store used to add 16 s to every operation: 61 s
for a 2-step sweep). A damaged row (garbage JSON, a text in a number column, a list where a map
belongs) is skipped with one warning line naming it, and every command works on the others.
Stored schedules are replayed by the simulator when loaded; a row that does not replay to its
stored time is reported, skipped and removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from solver.document.graph import Graph
from solver.document.schedule_io import schedule_from_dict, schedule_to_dict
from solver.document.units import MAX_SIZE
from solver.errors import XEngineError
from solver.execution.simulate import simulate
from solver.optimize.solve import SolveOptions, SolveResult
from solver.results.key import ResultKey, is_deterministic, result_key
from solver.status import SolveStatus

__all__ = [
    "STORE_ENV",
    "SCHEMA_VERSION",
    "StoredResult",
    "StoredRow",
    "DamagedRow",
    "ResultStore",
    "default_store_path",
]

logger = logging.getLogger(__name__)

STORE_ENV = "XENGINE_STORE"
"""Environment variable: the store's path, or ``off`` to store nothing."""
SCHEMA_VERSION = 1
_STORED = (
    SolveStatus.OPTIMAL,
    SolveStatus.FEASIBLE,
    SolveStatus.INFEASIBLE,
    SolveStatus.TIME_LIMIT,
)
_FINAL = (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE)
_COLUMNS = (
    "key, graph_hash, graph_name, budgets, method, backend, gap_rel, time_limit_s, threads, "
    "status, objective, bound, gap, total_ms, seconds, build_seconds, variables, constraints, "
    "message, schedule, created"
)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE, graph_hash TEXT NOT NULL, graph_name TEXT NOT NULL,
    budgets TEXT NOT NULL, method TEXT NOT NULL, backend TEXT NOT NULL, gap_rel REAL,
    time_limit_s REAL, threads INTEGER, status TEXT NOT NULL, objective REAL, bound REAL,
    gap REAL, total_ms REAL, seconds REAL NOT NULL, build_seconds REAL NOT NULL,
    variables INTEGER NOT NULL, constraints INTEGER NOT NULL, message TEXT NOT NULL,
    schedule TEXT, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS results_graph ON results (graph_hash);
PRAGMA user_version = {SCHEMA_VERSION};
"""
MAX_ROW_ID = 2**63 - 1
"""SQLite's largest integer: a larger id is no row (it used to overflow the driver)."""
LATEST_TIME = 253402300799.0
"""9999-12-31: a ``created`` time beyond any the clock gives (and datetime can show)."""
T = TypeVar("T")


def default_store_path() -> Path | None:
    """``$XENGINE_STORE``, else ``results.sqlite3`` in the user's data directory.

    ``XENGINE_STORE=off`` (or ``none``) turns the store off: ``None``.
    """
    value = os.environ.get(STORE_ENV, "").strip()
    if value.lower() in ("off", "none"):
        return None
    if value:
        return Path(value).expanduser()
    import platformdirs  # only here: the core imports without it until a store is opened

    return platformdirs.user_data_path("xengine-studio", appauthor=False) / "results.sqlite3"


_COLUMN = {"memory_limits": "budgets"}
"""Attributes of :class:`StoredRow` whose column has another name (the files' word)."""


@dataclass(frozen=True)
class StoredRow:
    """One row as stored (not replayed): what ``results list|show|export`` print."""

    id: int
    key: str
    graph_hash: str
    graph_name: str
    memory_limits: dict[str, int]
    """Each device's memory limit in bytes (its column keeps the files' word, ``budgets``)."""
    method: str
    backend: str
    gap_rel: float | None
    time_limit_s: float | None
    threads: int | None
    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    total_ms: float | None
    seconds: float
    build_seconds: float
    variables: int
    constraints: int
    message: str
    schedule: str | None
    created: float

    @property
    def final(self) -> bool:
        """Reusable under any time limit (proven, or a deterministic heuristic)."""
        return is_deterministic(self.method) or self.status in {s.value for s in _FINAL}

    def schedule_doc(self) -> dict | None:
        """The stored schedule document, or ``None`` without one.

        Raises
        ------
        DamagedRow
            When the stored text is not a JSON object.
        """
        if self.schedule is None:
            return None
        try:
            doc = json.loads(self.schedule)
        except (ValueError, RecursionError):
            doc = None
        if not isinstance(doc, dict):
            raise DamagedRow(self.id, "column 'schedule' is not a JSON object")
        return doc

    def to_dict(self, with_schedule: bool = True) -> dict:
        """The row as plain JSON-able data (the schedule parsed, when kept), keyed by its
        columns: the memory limits under ``budgets``, as in the store and schedule files."""
        data = {_COLUMN.get(name, name): getattr(self, name) for name in self.__dataclass_fields__}
        data["schedule"] = self.schedule_doc() if with_schedule else None
        if not with_schedule:
            del data["schedule"]
        return data


class DamagedRow(ValueError):
    """A stored row whose columns do not hold what the store writes (skipped, never shown)."""

    def __init__(self, row_id: object, reason: str):
        super().__init__(f"row {row_id} is damaged ({reason}); skipped")
        self.row_id, self.reason = row_id, reason


@dataclass(frozen=True)
class StoredResult:
    """A stored result for the graph asked about, its schedule replayed by the simulator."""

    row_id: int
    result: SolveResult
    time_limit_s: float | None
    final: bool
    created: float

    def reusable_for(self, time_limit_s: float) -> bool:
        """Whether this answers a solve with ``time_limit_s``: final, or run at least as long."""
        if self.final:
            return True
        return self.time_limit_s is not None and self.time_limit_s >= time_limit_s - 1e-9

    def note(self, time_limit_s: float) -> str:
        """One line saying where the result comes from, and whether it falls short."""
        if self.reusable_for(time_limit_s):
            return f"from the result store (row {self.row_id})"
        return (
            f"stored result (row {self.row_id}) came from a {self.time_limit_s:g} s time limit, "
            f"shorter than the {time_limit_s:g} s asked"
        )


class ResultStore:
    """The SQLite result store at ``path`` (see the module docstring).

    Every public method returns a neutral value (``None``, ``False``, ``[]``, ``0``) after
    logging one warning when the database cannot be used; ``problem`` keeps the last one.
    """

    _locked: set[str] = set()
    """Stores this process found locked for a whole ``timeout_s`` (shared by every instance:
    the CLI and each sweep worker open one per operation); tried without waiting until free."""
    _locked_guard = threading.Lock()

    def __init__(self, path: str | os.PathLike, timeout_s: float = 2.0, retries: int = 3):
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.retries = retries
        self.problem: str | None = None
        self.damaged: set[int | str] = set()
        """Ids of the damaged rows skipped so far (each reported once)."""
        self._ready = False

    # ----- writing ------------------------------------------------------------------------------
    def put(self, graph: Graph, method: str, options: SolveOptions, result: SolveResult) -> bool:
        """Store a finished solve; ``False`` when it was not stored (cancelled, error, failure).

        A row already there is kept when it is better: final where the new one is not, or run
        under a longer time limit.
        """
        if result.status not in _STORED or (result.ok is False and result.schedule is not None):
            return False
        key = result_key(graph, method, options)
        values = _row_values(graph, key, options, result)
        return self._guarded(
            "store a result", False, lambda db: self._replace_if_better(db, values), create=True
        )

    def prune(
        self, older_than_s: float | None = None, method: str | None = None, everything=False
    ) -> int:
        """Delete rows older than ``older_than_s`` seconds and/or of ``method``; the count."""
        clauses: list[str] = []
        args: list[object] = []
        if older_than_s is not None:
            clauses.append("created < ?")
            args.append(time.time() - older_than_s)
        if method is not None:
            clauses.append("method = ?")
            args.append(method)
        if not clauses and not everything:
            return 0
        where = " AND ".join(clauses) or "1"

        def run(db: sqlite3.Connection) -> int:
            with _write(db):
                return db.execute(f"DELETE FROM results WHERE {where}", args).rowcount

        return self._guarded("prune", 0, run)

    # ----- reading ------------------------------------------------------------------------------
    def lookup(self, graph: Graph, method: str, options: SolveOptions) -> StoredResult | None:
        """The stored result of this solve, replayed on ``graph``; ``None`` if none is usable."""
        key = result_key(graph, method, options)
        rows: list[StoredRow] = self._guarded(
            "look up a result",
            [],
            lambda db: self._fetch(db, "WHERE key = ?", (key.digest,)),
        )
        if not rows:
            return None
        row = rows[0]
        try:
            return _revive(graph, row)
        except (XEngineError, ValueError, TypeError, KeyError) as exc:
            self._report(f"row {row.id} ({row.method}) is corrupt: {exc}; skipped and removed")
            self._guarded("remove a corrupt row", 0, lambda db: _delete(db, row.id))
            return None

    def rows(self, graph_hash: str | None = None, method: str | None = None) -> list[StoredRow]:
        """Stored rows, newest first, optionally of one graph (content hash) or method."""
        clauses: list[str] = []
        args: list[str] = []
        if graph_hash is not None:
            clauses.append("graph_hash = ?")
            args.append(graph_hash)
        if method is not None:
            clauses.append("method = ?")
            args.append(method)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        none: list[StoredRow] = []
        return self._guarded("read results", none, lambda db: self._fetch(db, where, tuple(args)))

    def row(self, row_id: int) -> StoredRow | None:
        """The row with id ``row_id``, or ``None`` (also for a damaged row, reported)."""
        if not 0 < row_id <= MAX_ROW_ID:
            return None
        none: list[StoredRow] = []
        found = self._guarded(
            "read a result", none, lambda db: self._fetch(db, "WHERE id = ?", (row_id,))
        )
        return found[0] if found else None

    # ----- connection ---------------------------------------------------------------------------
    def _guarded(
        self,
        what: str,
        default: T,
        action: Callable[[sqlite3.Connection], T],
        create: bool = False,
    ) -> T:
        """Run ``action`` on a fresh connection, waiting at most ``timeout_s`` in all for a
        lock (retrying what fails at once); never raise.

        Only writers (``create``) make a missing database: a lookup in a store that does not
        exist yet costs one ``stat``, no file and no fsync (the GUI looks up on its thread).
        A path that is no regular file (a folder, a FIFO, a device) is refused before SQLite
        opens it: a FIFO blocked the open forever.
        """
        try:
            mode = self.path.stat().st_mode
        except OSError:
            mode = None
        if mode is None and not create:
            return default
        if mode is not None and not stat.S_ISREG(mode):
            self._report(f"cannot {what}: not a regular file (a folder, device or pipe)")
            return default
        key = os.path.realpath(self.path)
        was_locked = key in self._locked
        deadline = time.monotonic() + (0.0 if was_locked else self.timeout_s)
        for attempt in range(self.retries):
            try:
                with self._connect(max(deadline - time.monotonic(), 0.0)) as db:
                    result = action(db)
                if was_locked:
                    with self._locked_guard:
                        self._locked.discard(key)
                return result
            except sqlite3.OperationalError as exc:
                locked = "locked" in str(exc) or "busy" in str(exc)
                pause = 0.05 * 2**attempt * (1 + random.random())
                if locked and attempt + 1 < self.retries and time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    continue
                if locked:
                    with self._locked_guard:
                        self._locked.add(key)
                    if was_locked:  # reported when it was found locked; still is
                        self.problem = f"cannot {what}: {exc}"
                        break
                    exc = sqlite3.OperationalError(
                        f"{exc} for {self.timeout_s:g} s; until it is free, this process "
                        "tries it once without waiting"
                    )
                self._report(f"cannot {what}: {exc}")
            except (sqlite3.Error, OSError) as exc:
                self._report(f"cannot {what}: {exc}")
            break
        return default

    def _fetch(self, db: sqlite3.Connection, where: str, args: tuple) -> list[StoredRow]:
        """The rows matching ``where``, newest first; a damaged row is reported and skipped."""
        cursor = db.execute(f"SELECT id, {_COLUMNS} FROM results {where}", args)
        rows = []
        for values in cursor.fetchall():
            try:
                rows.append(_row(values))
            except DamagedRow as exc:
                self.report_damaged(exc)
        rows.sort(key=lambda row: row.created, reverse=True)
        return rows

    def report_damaged(self, exc: DamagedRow) -> None:
        """Log one warning line for a damaged row (once per row and store)."""
        if exc.row_id in self.damaged:
            return
        self.damaged.add(exc.row_id)  # type: ignore[arg-type]
        logger.warning(
            "result store %s: %s (the other rows are used; a new solve of the same problem "
            "replaces it)",
            self.path,
            exc,
        )

    def _replace_if_better(self, db: sqlite3.Connection, values: dict) -> bool:
        with _write(db):
            old = self._fetch(db, "WHERE key = ?", (values["key"],))
            if old and not _better(values, old[0]):
                return True
            # also replaces a damaged row of the same key (skipped by the fetch)
            db.execute("DELETE FROM results WHERE key = ?", (values["key"],))
            marks = ", ".join("?" for _ in values)
            db.execute(f"INSERT INTO results ({_COLUMNS}) VALUES ({marks})", tuple(values.values()))
        return True

    @contextlib.contextmanager
    def _connect(self, patience_s: float) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=patience_s, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(patience_s * 1000)}")
            db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable but for a power cut
            if not self._ready:
                _prepare(db)
                self._ready = True
            yield db
        finally:
            db.close()

    def _report(self, message: str) -> None:
        self.problem = message
        logger.warning(
            "result store %s: %s (the solve itself is not affected; --no-store or "
            "XENGINE_STORE=off skips the store)",
            self.path,
            message,
        )


# ----- helpers ----------------------------------------------------------------------------------
def _prepare(db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"written by a newer version (schema {version}, this one reads {SCHEMA_VERSION})"
        )
    if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        db.execute("PRAGMA journal_mode = WAL")
    if version < SCHEMA_VERSION:
        db.executescript(_SCHEMA)


@contextlib.contextmanager
def _write(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that takes the lock first (no read-to-write upgrade deadlock)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _row_values(graph: Graph, key: ResultKey, options: SolveOptions, result: SolveResult) -> dict:
    schedule = None
    if result.ok and result.schedule is not None:
        schedule = json.dumps(schedule_to_dict(result.schedule), separators=(",", ":"))
    return {
        "key": key.digest,
        "graph_hash": key.graph_hash,
        "graph_name": graph.name,
        "budgets": json.dumps(dict(key.memory_limits)),
        "method": key.method,
        "backend": result.backend or key.backend,
        "gap_rel": key.gap_rel,
        "time_limit_s": None if is_deterministic(key.method) else float(options.time_limit_s),
        "threads": options.threads,
        "status": result.status.value,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "total_ms": result.timeline.total_ms if result.ok and result.timeline else None,
        "seconds": float(result.seconds),
        "build_seconds": float(result.build_seconds),
        "variables": int(result.variables),
        "constraints": int(result.constraints),
        "message": result.message,
        "schedule": schedule,
        "created": time.time(),
    }


def _better(new: dict, old: StoredRow) -> bool:
    new_final = is_deterministic(new["method"]) or new["status"] in {s.value for s in _FINAL}
    if old.final != new_final:
        return new_final
    if new_final:
        return True
    return (new["time_limit_s"] or 0.0) >= (old.time_limit_s or 0.0)


_TEXT = ("key", "graph_hash", "graph_name", "method", "backend", "status", "message")
_NUMBER = ("seconds", "build_seconds", "created")
_OPTIONAL_NUMBER = ("gap_rel", "time_limit_s", "objective", "bound", "gap", "total_ms")
_COUNT = ("variables", "constraints")
_STATUSES = {status.value for status in SolveStatus}


def _row(values: tuple) -> StoredRow:
    """A :class:`StoredRow` from one ``SELECT``, every column checked for what ``put`` writes.

    SQLite keeps whatever a column is given (a text in an INTEGER column stays a text), so a
    row damaged by hand or by another program is refused here, as :class:`DamagedRow`.
    """
    names = ["id", *(name.strip() for name in _COLUMNS.split(","))]
    data = dict(zip(names, values, strict=True))
    row_id = data["id"]

    def damaged(column: str, expected: str) -> DamagedRow:
        found = type(data[column]).__name__ if data[column] is not None else "NULL"
        return DamagedRow(row_id, f"column {column!r} holds {found}, not {expected}")

    for column in _TEXT:
        if not isinstance(data[column], str):
            raise damaged(column, "a text")
    if data["status"] not in _STATUSES:
        raise DamagedRow(row_id, f"column 'status' holds an unknown status {data['status']!r}")
    for column in _NUMBER + _OPTIONAL_NUMBER:
        value = data[column]
        if value is None and column in _OPTIONAL_NUMBER:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise damaged(column, "a number")
    if not 0 <= data["created"] <= LATEST_TIME:
        raise DamagedRow(row_id, f"column 'created' holds {data['created']!r}, not a time")
    for column in (*_COUNT, "threads"):
        value = data[column]
        if value is None and column == "threads":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SIZE:
            raise damaged(column, "a count")
    if data["schedule"] is not None and not isinstance(data["schedule"], str):
        raise damaged("schedule", "a JSON text")
    data["memory_limits"] = _memory_limits(row_id, data.pop("budgets"))
    return StoredRow(**data)


def _memory_limits(row_id: object, text: object) -> dict[str, int]:
    try:
        limits = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        limits = None
    if not isinstance(limits, dict) or not all(
        isinstance(device, str)
        and not isinstance(size, bool)
        and isinstance(size, int)
        and 0 <= size <= MAX_SIZE
        for device, size in limits.items()
    ):
        raise DamagedRow(row_id, "column 'budgets' is not a JSON map of devices to bytes")
    return limits


def _delete(db: sqlite3.Connection, row_id: int) -> int:
    with _write(db):
        return db.execute("DELETE FROM results WHERE id = ?", (row_id,)).rowcount


def _revive(graph: Graph, row: StoredRow) -> StoredResult:
    """Rebuild the :class:`SolveResult` of ``row``, replaying its schedule on ``graph``."""
    status = SolveStatus(row.status)
    result = SolveResult(
        method=row.method,
        status=status,
        objective=row.objective,
        bound=row.bound,
        gap=row.gap,
        seconds=row.seconds,
        build_seconds=row.build_seconds,
        variables=row.variables,
        constraints=row.constraints,
        backend=row.backend,
        message=row.message,
    )
    if row.schedule is not None:
        schedule = schedule_from_dict(json.loads(row.schedule), graph)
        schedule = replace(schedule, graph=graph.name)
        timeline = simulate(graph, schedule)
        if not timeline.valid:
            raise ValueError(f"its schedule does not replay: {timeline.violation}")
        stored = row.total_ms if row.total_ms is not None else float("nan")
        if not abs(timeline.total_ms - stored) <= 1e-6 * max(1.0, abs(stored)):
            raise ValueError(
                f"its schedule replays to {timeline.total_ms:.6g} ms, not the stored "
                f"{stored:.6g} ms"
            )
        result = replace(result, schedule=schedule, timeline=timeline)
        if schedule.solver is not None and schedule.solver.method:
            # the method that found it, as a fresh solve names it ("checkmate:gpu" for a
            # "checkmate" row): a sweep's rows read the same solved or stored
            result = replace(result, method=schedule.solver.method)
    elif status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        raise ValueError(f"status {row.status} but no schedule")
    return StoredResult(row.id, result, row.time_limit_s, row.final, row.created)
