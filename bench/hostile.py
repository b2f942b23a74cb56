"""The hostile-input kit (issue 22): generated cases against every surface, one table.

Each case runs one command of ``main.py`` on hostile input (files, paths, arguments, ONNX
models, damaged or locked result stores, inputs at scale) and is judged by the contract of
docs/formats.md and docs/spec-notes.md:

- **traceback**: a Python traceback, or the CLI's last-resort "internal error" line;
- **hang**: still running at the case's timeout (killed with its process group);
- **multi-line**: a failed command (exit 1 or 2) whose stderr holds more than one line beside
  ``note:``, ``warning:`` and ``progress:`` lines, or an exit 2 without any;
- **exit**: an exit status other than 0, 1 or 2;
- **wrong**: the case's own check failed (a bad ONNX model imported, a damaged store that cost
  a solve, a schedule whose verdict or peaks differ from the independent replay,
  ``tests/solver/replay_reference.py``, a file written that our loaders refuse, a locked store
  that took seconds, ...).

Seeded: the same ``--seed`` gives the same cases. By default each case runs in a process of
its own (``python main.py ...``, the truth); ``--inproc`` runs ``solver.cli.main`` in this
process (faster; cases that need a real process are skipped). ``--root`` runs another checkout
(the figures before a change). ``--quick`` is the subset the test suite runs.

    .venv/bin/python bench/hostile.py [--quick] [--seed 22] [--surface NAME ...] [--jobs 2]
                                      [--inproc] [--root PATH] [--show 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_cases import KIT_ROOT, Case, Run, cases

__all__ = ["KINDS", "judge", "run_case", "run_kit", "main"]

KINDS = ("traceback", "hang", "multi-line", "exit", "wrong")
_QUIET = ("note: ", "warning: ", "progress: ")


def judge(case: Case, run: Run) -> list[tuple[str, str]]:
    """The contract's verdict on one run: ``(kind, detail)`` for every problem found."""
    problems = []
    if run.code is None:
        return [("hang", f"still running after {case.timeout:g} s")]
    text = run.out + run.err
    if "Traceback (most recent call last)" in text or "internal error" in run.err:
        problems.append(("traceback", _last_lines(run.err)))
    if run.code not in (0, 1, 2):
        problems.append(("exit", f"exit {run.code}"))
    lines = [line for line in run.err.splitlines() if line.strip() and not line.startswith(_QUIET)]
    if run.code in (1, 2) and len(lines) > 1 and not case.name.startswith("sweep"):
        problems.append(("multi-line", " | ".join(lines[:3])[:300]))
    elif run.code == 2 and not lines:
        problems.append(("multi-line", "exit 2 without a message"))
    if case.check is not None:
        try:
            reason = case.check(run)
        except Exception as exc:  # noqa: BLE001 - a check that cannot read the output fails
            reason = f"its output could not be checked ({type(exc).__name__}: {exc})"
        if reason:
            problems.append(("wrong", reason))
    return problems


def _last_lines(text: str) -> str:
    return " | ".join(text.strip().splitlines()[-2:])[:300]


# ----- running ---------------------------------------------------------------------------------
def run_case(case: Case, root: Path, inproc: bool) -> tuple[Run, list[tuple[str, str]]]:
    """Prepare the case's folder, run its command, judge it, and clean up."""
    folder = Path(tempfile.mkdtemp(prefix="hostile-"))
    teardown = None
    try:
        for name, data in case.files.items():
            (folder / name).write_bytes(data)
        store = case.store.replace("{dir}", str(folder))

        def setup_run(argv: list[str]) -> Run:
            return _execute(argv, root, inproc, store, folder, 300.0)

        if case.setup is not None:
            teardown = case.setup(folder, setup_run)
        run = _execute(
            case.path(folder), root, inproc, store, folder, case.timeout, case.memory_gib
        )
        return run, judge(case, run)
    finally:
        if callable(teardown):
            teardown()
        shutil.rmtree(folder, ignore_errors=True)


def _execute(argv, root: Path, inproc: bool, store: str, folder: Path, timeout: float,
             memory_gib: float = 8.0) -> Run:  # fmt: skip
    if inproc:
        return _in_process(argv, store, folder, timeout)
    cap = int(memory_gib * 2**30)

    def limit_memory() -> None:  # in the child, before main.py starts
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = dict(os.environ, XENGINE_STORE=store, QT_QPA_PLATFORM="offscreen")
    env.pop("XENGINE_DEBUG", None)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "main.py", *argv],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=limit_memory,
    )
    try:
        out, err = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        code = None
    seconds = time.monotonic() - started
    decode = lambda data: data.decode("utf-8", "replace")  # noqa: E731
    return Run(code, decode(out), decode(err), seconds, folder)


class _Hang(BaseException):
    """Raised by the interval timer; a BaseException, so no safety net of the CLI catches it."""


def _in_process(argv, store: str, folder: Path, timeout: float) -> Run:
    from solver.cli import main as cli_main

    out, err = io.StringIO(), io.StringIO()
    saved = os.environ.get("XENGINE_STORE")
    os.environ["XENGINE_STORE"] = store

    def on_alarm(*_: object) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    started = time.monotonic()
    code: int | None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except _Hang:
                code = None
            except BaseException:  # noqa: BLE001 - what escaped the CLI is the finding
                err.write(traceback.format_exc())
                code = 99
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if saved is None:
            os.environ.pop("XENGINE_STORE", None)
        else:
            os.environ["XENGINE_STORE"] = saved
    return Run(code, out.getvalue(), err.getvalue(), time.monotonic() - started, folder)


def run_kit(seed: int, quick: bool, surfaces: list[str] | None, root: Path, inproc: bool,
            jobs: int = 1, max_timeout: float = float("inf"),
            process_only: bool = False):  # fmt: skip
    """Run every case (but those allowed more than ``max_timeout`` seconds);
    ``(table rows by surface, findings)``."""
    chosen = [
        c
        for c in cases(seed, quick, surfaces)
        if not (inproc and c.subprocess_only)
        and c.timeout <= max_timeout
        and (c.subprocess_only or not process_only)
    ]
    counts: dict[str, Counter] = defaultdict(Counter)
    findings: list[tuple[Case, list[tuple[str, str]]]] = []

    def one(case: Case):
        return case, run_case(case, root, inproc)

    runner = map(one, chosen) if inproc or jobs == 1 else ThreadPoolExecutor(jobs).map(one, chosen)
    for case, (run, problems) in runner:
        row = counts[case.surface]
        row["cases"] += 1
        row["seconds"] += run.seconds
        for kind in {kind for kind, _ in problems}:
            row[kind] += 1
        if problems:
            findings.append((case, problems))
    return counts, findings


def format_table(counts: dict[str, Counter]) -> str:
    header = f"{'surface':<16} {'cases':>6} " + " ".join(f"{k:>10}" for k in KINDS) + f" {'s':>7}"
    lines = [header, "-" * len(header)]
    total: Counter = Counter()
    for surface in sorted(counts):
        row = counts[surface]
        total.update(row)
        lines.append(_row(surface, row))
    lines.append("-" * len(header))
    lines.append(_row("all", total))
    return "\n".join(lines)


def _row(label: str, row: Counter) -> str:
    kinds = " ".join(f"{row[k]:>10}" for k in KINDS)
    return f"{label:<16} {row['cases']:>6} {kinds} {row['seconds']:>7.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--quick", action="store_true", help="the test suite's subset")
    parser.add_argument("--surface", action="append", help="only these generators")
    parser.add_argument("--inproc", action="store_true", help="run in this process")
    parser.add_argument("--root", type=Path, default=KIT_ROOT, help="the checkout to run")
    parser.add_argument("--jobs", type=int, default=1, help="cases at once (processes)")
    parser.add_argument("--show", type=int, default=5, help="findings listed per kind")
    parser.add_argument(
        "--max-timeout", type=float, default=float("inf"), help="skip cases allowed longer"
    )
    parser.add_argument(
        "--process-only", action="store_true", help="only the cases that need a process"
    )
    args = parser.parse_args(argv)
    if args.inproc:
        sys.path.insert(0, str(args.root))
    started = time.monotonic()
    counts, findings = run_kit(args.seed, args.quick, args.surface, args.root, args.inproc,
                               args.jobs, args.max_timeout, args.process_only)  # fmt: skip
    print(format_table(counts))
    total = sum(r["cases"] for r in counts.values())
    how = "in process" if args.inproc else "one process each"
    print(f"\n{total} cases in {time.monotonic() - started:.0f} s (seed {args.seed}, {how}, "
          f"root {args.root})")  # fmt: skip
    shown: Counter = Counter()
    for case, problems in findings:
        for kind, detail in problems:
            if shown[kind] < args.show:
                shown[kind] += 1
                what = " ".join(case.argv)[:120]
                print(f"  {kind:<10} [{case.surface}] {case.name}: {what}\n             {detail}")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
