"""The ecosystem's model builders (:mod:`solver.importers.corpus`): each imports at ATen level,
solves at GPU 60 % and runs by its schedule with both devices on the CPU, with the gradients of
a plain ``loss.backward()`` and every device's measured peak the simulator's prediction.

The default run takes the fast models (a few seconds each); the whole corpus runs with
``XENGINE_CORPUS=all`` (marked ``slow``)::

    XENGINE_CORPUS=all .venv/bin/python -m pytest tests/solver/importers/test_corpus.py
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

torch = pytest.importorskip("torch")

from solver.executors.aten_runtime import execute_schedule  # noqa: E402
from solver.importers.aten import capture_model, graph_from_plan  # noqa: E402
from solver.importers.aten_groups import plan_groups  # noqa: E402
from solver.importers.corpus import CORPUS  # noqa: E402
from solver.importers.hardware import make_platform  # noqa: E402
from solver.optimize.bounds import no_remat_peak  # noqa: E402
from solver.optimize.methods import solve  # noqa: E402

ALL = os.environ.get("XENGINE_CORPUS") == "all"


def cases():
    for name, model in sorted(CORPUS.items()):
        marks = (
            []
            if model.fast
            else [
                pytest.mark.slow,
                pytest.mark.skipif(not ALL, reason="the whole corpus: XENGINE_CORPUS=all"),
            ]
        )
        yield pytest.param(name, marks=marks, id=name)


def imported(name: str):
    model = CORPUS[name]
    library = "torchvision" if model.family.startswith("torchvision") else "transformers"
    if importlib.util.find_spec(library) is None:  # its import may fail for other reasons
        pytest.skip(f"{library} is not installed (scripts/setup.sh test installs it)")
    started = time.perf_counter()
    plan = plan_groups(capture_model(model.factory, model.inputs, name=name), "layer")
    graph = graph_from_plan(plan, make_platform())
    return plan, graph, time.perf_counter() - started


@pytest.mark.parametrize("name", list(cases()))
def test_corpus_model_imports_solves_and_runs_with_torchs_gradients(name):
    plan, graph, _ = imported(name)  # import times: bench/README.md, not a timed test
    fixed = graph.device("gpu").fixed_memory
    graph = graph.with_memory_limits({"gpu": fixed + int(0.6 * no_remat_peak(graph))})
    result = solve(graph, "greedy")
    assert result.schedule is not None, result.status
    report = execute_schedule(plan, graph, result.schedule, {"gpu": "cpu"})
    assert report.gradients_match, report.max_abs_error
    for device, peak in report.measured_peak.items():
        assert peak <= report.budgets[device]
        assert abs(peak - report.predicted_peak[device]) <= 0.15 * report.predicted_peak[device]
