"""A mixed-integer linear program as plain arrays, the one form both backends read.

PuLP's expression objects cost about 100 bytes and microseconds per coefficient: building
ResNet-50's MIQP through them took 15 s and 2.5 GB. The XEngine model is therefore built
directly as arrays (:mod:`solver.optimize.miqp`); a PuLP problem (tests, small reference models) is
converted with :func:`from_pulp`. CBC gets the program as an MPS file (:func:`write_mps`) and
answers with a solution file (:func:`read_cbc_solution`); HiGHS takes the arrays in process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pulp

from solver.optimize.backends._common import Cancel

__all__ = [
    "LinearProgram",
    "WriteStopped",
    "from_pulp",
    "write_mps",
    "write_mip_start",
    "read_cbc_solution",
]


@dataclass(frozen=True)
class LinearProgram:
    """``min cost @ x + offset`` s.t. ``row_lower <= A x <= row_upper``, bounds, integrality.

    ``A`` is given as coordinates (``rows``, ``cols``, ``vals``); duplicates are summed.
    Column ``j`` is named ``X{j:07d}`` and row ``r`` ``C{r:07d}`` in files, as PuLP names
    them (integers only). ``integer`` marks integer columns; binaries are
    integer columns with bounds [0, 1].
    """

    cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    offset: float = 0.0

    @property
    def num_cols(self) -> int:
        return len(self.cost)

    @property
    def num_rows(self) -> int:
        return len(self.row_lower)

    def with_bounds(self, lower: np.ndarray, upper: np.ndarray) -> LinearProgram:
        """The same program with other column bounds (variable fixing, neighbourhoods)."""
        from dataclasses import replace

        return replace(self, col_lower=lower, col_upper=upper)

    def restricted(self, free: np.ndarray, x: np.ndarray) -> tuple[LinearProgram, np.ndarray]:
        """The program over the ``free`` columns with every other column fixed at ``x``.

        Fixed columns move into the rows' bounds and the objective's constant; rows left
        without a free column are dropped (``x`` must satisfy them). Returns the smaller
        program and, per column of it, the column it was in this one.
        """
        columns = np.flatnonzero(free)
        fixed_x = np.where(free, 0.0, x)
        contribution = self.activity(fixed_x)
        entry_free = free[self.cols]
        rows_used = np.unique(self.rows[entry_free])
        row_map = np.full(self.num_rows, -1, dtype=np.int64)
        row_map[rows_used] = np.arange(len(rows_used))
        col_map = np.full(self.num_cols, -1, dtype=np.int64)
        col_map[columns] = np.arange(len(columns))
        sub = LinearProgram(
            cost=self.cost[columns],
            col_lower=self.col_lower[columns],
            col_upper=self.col_upper[columns],
            integer=self.integer[columns],
            rows=row_map[self.rows[entry_free]],
            cols=col_map[self.cols[entry_free]],
            vals=self.vals[entry_free],
            row_lower=self.row_lower[rows_used] - contribution[rows_used],
            row_upper=self.row_upper[rows_used] - contribution[rows_used],
            offset=self.offset + float(self.cost @ fixed_x),
        )
        return sub, columns

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Column-wise (start, index, value) of ``A`` with duplicates summed."""
        order = np.lexsort((self.rows, self.cols))
        cols, rows, vals = self.cols[order], self.rows[order], self.vals[order]
        if len(cols):
            keep = np.ones(len(cols), dtype=bool)
            keep[1:] = (cols[1:] != cols[:-1]) | (rows[1:] != rows[:-1])
            groups = np.cumsum(keep) - 1
            vals = np.bincount(groups, weights=vals)
            cols, rows = cols[keep], rows[keep]
            nonzero = vals != 0
            cols, rows, vals = cols[nonzero], rows[nonzero], vals[nonzero]
        start = np.searchsorted(cols, np.arange(self.num_cols + 1)).astype(np.int32)
        return start, rows.astype(np.int32), vals.astype(np.float64)

    def activity(self, x: np.ndarray) -> np.ndarray:
        """``A x``: what each row evaluates to at ``x``."""
        return np.bincount(self.rows, weights=self.vals * x[self.cols], minlength=self.num_rows)

    def is_feasible(self, x: np.ndarray, tol: float = 1e-6) -> bool:
        """Whether ``x`` satisfies every row and bound (and integrality) within ``tol``."""
        ax = self.activity(x)
        rows_ok = np.all(ax >= self.row_lower - tol) and np.all(ax <= self.row_upper + tol)
        bounds_ok = np.all(x >= self.col_lower - tol) and np.all(x <= self.col_upper + tol)
        integral = np.all(np.abs(x[self.integer] - np.round(x[self.integer])) <= tol)
        return bool(rows_ok and bounds_ok and integral)


def from_pulp(prob: pulp.LpProblem) -> tuple[LinearProgram, list[pulp.LpVariable]]:
    """Convert a (small) PuLP minimisation problem; returns the program and its columns."""
    variables = prob.variables()
    column = {var.name: j for j, var in enumerate(variables)}
    inf = math.inf
    lower = np.array([-inf if v.lowBound is None else v.lowBound for v in variables], float)
    upper = np.array([inf if v.upBound is None else v.upBound for v in variables], float)
    integer = np.array([v.cat in (pulp.LpInteger, pulp.LpBinary) for v in variables], bool)
    cost = np.zeros(len(variables))
    objective = prob.objective if prob.objective is not None else pulp.LpAffineExpression()
    for var, coef in objective.items():
        cost[column[var.name]] += coef
    rows, cols, vals, row_lower, row_upper = [], [], [], [], []
    for r, constraint in enumerate(prob.constraints.values()):
        for var, coef in constraint.items():
            rows.append(r)
            cols.append(column[var.name])
            vals.append(coef)
        rhs = -constraint.constant
        sense = constraint.sense
        row_lower.append(rhs if sense in (pulp.LpConstraintGE, pulp.LpConstraintEQ) else -inf)
        row_upper.append(rhs if sense in (pulp.LpConstraintLE, pulp.LpConstraintEQ) else inf)
    program = LinearProgram(
        cost=cost,
        col_lower=lower,
        col_upper=upper,
        integer=integer,
        rows=np.array(rows, dtype=np.int64),
        cols=np.array(cols, dtype=np.int64),
        vals=np.array(vals, dtype=float),
        row_lower=np.array(row_lower, dtype=float),
        row_upper=np.array(row_upper, dtype=float),
        offset=float(objective.constant),
    )
    return program, variables


MPS_CHUNK_LINES = 50_000
"""Lines :func:`write_mps` gathers before writing them out: a 1.6 M-coefficient relaxation
held its whole file as 1.6 M strings (about 250 MB) beside a solve's CP-SAT."""


class WriteStopped(Exception):
    """Writing the MPS file was cancelled."""


def write_mps(program: LinearProgram, path: str, cancel: Cancel | None = None) -> None:
    """Write free-format MPS that CBC reads; rows are ranged where both sides are finite.

    The file is written in chunks of :data:`MPS_CHUNK_LINES` lines, never held whole; between
    two chunks :class:`WriteStopped` is raised once ``cancel`` is set (a 1.6 M-coefficient
    relaxation takes seconds to write, and a solve at its time limit waits for it to stop).
    """
    start, index, value = program.csc()
    kinds = np.where(
        np.isfinite(program.row_upper),
        np.where(
            np.isfinite(program.row_lower),
            np.where(program.row_lower == program.row_upper, "E", "L"),
            "L",
        ),
        np.where(np.isfinite(program.row_lower), "G", "N"),
    )
    with open(path, "w", encoding="ascii") as handle:
        out: list[str] = []

        def emit(line: str) -> None:
            out.append(line)
            if len(out) >= MPS_CHUNK_LINES:
                if cancel is not None and cancel.is_set():
                    raise WriteStopped
                handle.write("".join(out))
                out.clear()

        for line in ("NAME          XENGINE\n", "ROWS\n", " N  OBJ\n"):
            emit(line)
        for r, kind in enumerate(kinds.tolist()):
            emit(f" {kind}  C{r:07d}\n")
        emit("COLUMNS\n")
        cost = program.cost.tolist()
        integer = program.integer.tolist()
        start_list = start.tolist()
        in_int = False
        for j in range(program.num_cols):
            if integer[j] != in_int:
                marker = "INTORG" if integer[j] else "INTEND"
                emit(f"    MARK      'MARKER'                 '{marker}'\n")
                in_int = integer[j]
            name = f"X{j:07d}"
            if cost[j] != 0:
                emit(f"    {name}  OBJ        {cost[j]!r}\n")
            first, end = start_list[j], start_list[j + 1]
            for row, val in zip(index[first:end].tolist(), value[first:end].tolist(), strict=True):
                emit(f"    {name}  C{row:07d}   {val!r}\n")
            if cost[j] == 0 and first == end:
                emit(f"    {name}  OBJ        0.0\n")  # keep an empty column known to CBC
        if in_int:
            emit("    MARK      'MARKER'                 'INTEND'\n")
        emit("RHS\n")
        if program.offset:
            emit(f"    RHS       OBJ        {-program.offset!r}\n")
        rhs = np.where(kinds == "G", program.row_lower, program.row_upper)
        for r in np.flatnonzero((kinds != "N") & (rhs != 0)).tolist():
            emit(f"    RHS       C{r:07d}   {float(rhs[r])!r}\n")
        ranged = np.isfinite(program.row_lower) & np.isfinite(program.row_upper) & (kinds == "L")
        if ranged.any():
            emit("RANGES\n")
            for r in np.flatnonzero(ranged).tolist():
                width = float(program.row_upper[r] - program.row_lower[r])
                emit(f"    RNG       C{r:07d}   {width!r}\n")
        emit("BOUNDS\n")
        for line in _bound_lines(program):
            emit(line)
        emit("ENDATA\n")
        handle.write("".join(out))


def _bound_lines(program: LinearProgram) -> list[str]:
    lines = []
    lower, upper = program.col_lower.tolist(), program.col_upper.tolist()
    integer = program.integer.tolist()
    for j in range(program.num_cols):
        lo, up, name = lower[j], upper[j], f"X{j:07d}"
        if lo == up:
            lines.append(f" FX BND       {name}  {lo!r}\n")
        elif integer[j] and lo == 0 and up == 1:
            lines.append(f" BV BND       {name}\n")
        else:
            if lo == -math.inf:
                lines.append(f" MI BND       {name}\n")
            elif lo != 0:
                lines.append(f" LO BND       {name}  {lo!r}\n")
            if up != math.inf:
                lines.append(f" UP BND       {name}  {up!r}\n")
            elif integer[j]:
                lines.append(f" PL BND       {name}\n")
    return lines


def write_mip_start(values: np.ndarray, path: str) -> None:
    """CBC's ``-mips`` file: a header line, then ``index name value`` per column."""
    lines = ["Stopped on iterations - objective value 0\n"]
    lines.extend(f"{j} X{j:07d} {float(v)!r} 0\n" for j, v in enumerate(values.tolist()))
    with open(path, "w", encoding="ascii") as handle:
        handle.write("".join(lines))


def read_cbc_solution(path: str, num_cols: int) -> np.ndarray:
    """Column values from CBC's ``-solution`` file (``printingOptions all``): rows are skipped."""
    values = np.zeros(num_cols)
    with open(path, encoding="utf-8", errors="replace") as handle:
        handle.readline()  # the status header
        for line in handle:
            parts = line.replace("**", " ").split()
            if len(parts) >= 3 and parts[1].startswith("X"):
                try:
                    j = int(parts[1][1:])
                    values[j] = float(parts[2])
                except (ValueError, IndexError):
                    continue
    return values
