"""The hostile-input kit's seeded quick subset (issue 22): nothing it throws gets a traceback,
a hang, a multi-line error, an exit status outside 0/1/2 or a wrong answer.

The kit is ``bench/hostile.py`` (its cases in ``bench/hostile_cases.py``); the full kit, with
the cases that need a process of their own (a locked store's timing, ``/dev/zero``, 1,000
devices, 10,000 nodes), runs as ``.venv/bin/python bench/hostile.py``. Here it runs in this
process: about 260 cases over every surface (graph and schedule files with workspaces and
offloading keeps, paths, arguments, ONNX models, damaged stores, files we write, limits).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

pytest.importorskip("onnx")

import hostile  # noqa: E402
import hostile_cases  # noqa: E402


def test_the_quick_kit_finds_nothing():
    counts, findings = hostile.run_kit(22, True, None, ROOT, inproc=True)
    report = [
        f"{case.surface} {case.name}: {kind}: {detail}"
        for case, problems in findings
        for kind, detail in problems
    ]
    assert not report, hostile.format_table(counts) + "\n" + "\n".join(report[:20])
    assert sum(row["cases"] for row in counts.values()) > 200
    assert {"import-onnx", "result-store", "offload-keeps", "workspaces"} <= set(counts)


def test_the_kit_judges_what_the_contract_forbids(tmp_path):
    case = hostile_cases.Case("x", "x", ["solve"])
    run = hostile_cases.Run
    assert hostile.judge(case, run(0, "", "", 0.1, tmp_path)) == []
    assert hostile.judge(case, run(None, "", "", 9, tmp_path))[0][0] == "hang"
    trace = "Traceback (most recent call last):\n  ...\nValueError: x\n"
    assert {k for k, _ in hostile.judge(case, run(1, "", trace, 0.1, tmp_path))} == {
        "traceback",
        "multi-line",
    }
    assert hostile.judge(case, run(2, "", "error: a\nerror: b\n", 0.1, tmp_path))[0][0] == (
        "multi-line"
    )
    assert hostile.judge(case, run(2, "", "warning: w\nerror: a\n", 0.1, tmp_path)) == []
    assert hostile.judge(case, run(7, "", "error: a\n", 0.1, tmp_path)) == [("exit", "exit 7")]
    naming = hostile_cases.refused_naming("If")
    refused = hostile_cases.Case("x", "x", ["import-onnx"], check=naming)
    assert hostile.judge(refused, run(0, "", "", 0.1, tmp_path))[0][0] == "wrong"
