"""The Python API (solver.api): the README's example runs as written, and each call does what
its command does (budgets as the CLI reads them, a checked step, a policy PyTorch applies)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import solver  # noqa: E402
from solver.document.units import format_size  # noqa: E402
from solver.errors import XEngineError  # noqa: E402
from solver.optimize.bounds import no_remat_peak  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


def test_the_readme_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), namespace)
    assert namespace["report"].gradients_match
    plan, gpu_only, net = namespace["plan"], namespace["gpu_only"], namespace["net"]
    assert gpu_only.devices == ["gpu"] and gpu_only.result.method == "checkmate:gpu"
    assert (tmp_path / "policy.py").read_text().startswith('"""Selective activation')
    assert float(namespace["loss"]) > 0 and net[0].weight.grad is not None
    # the budgets are the CLI's: a percentage of the no-remat peak on top of fixed memory
    graph = namespace["model"].graph
    for device in ("gpu", "cpu"):
        fixed = graph.device(device).fixed_memory
        assert plan.graph.device(device).memory_limit == fixed + int(0.6 * no_remat_peak(graph))
    assert "gpu: peak" in plan.summary() and "cpu: peak" in plan.summary()


def test_train_step_recomputes_what_the_plan_recomputes_and_gives_torchs_gradients():
    """The gradients of train_step equal a plain loss.backward() on the same weights."""
    torch.manual_seed(0)
    layers = [m for _ in range(6) for m in (torch.nn.Linear(64, 64), torch.nn.Tanh())]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(64, 4))
    x = torch.randn(32, 64)
    model = solver.import_model(net, (x,))
    plan = model.solve(gpu="60%", method="checkmate:gpu", time_limit=10)
    assert plan.timeline.recomputations > 0
    plan.train_step(net, x)
    got = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    (net(x) ** 2).mean().backward()
    for a, p in zip(got, net.parameters(), strict=True):
        assert torch.allclose(a, p.grad, rtol=1e-5, atol=1e-7)


def test_budgets_in_bytes_and_units_and_their_errors():
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    model = solver.import_model(net, torch.randn(4, 8))
    plan = model.solve(gpu="1GiB", cpu=2**30, method="greedy")
    assert plan.graph.device("gpu").memory_limit == plan.graph.device("cpu").memory_limit == 2**30
    with pytest.raises(XEngineError, match="a percentage from 0% to 1000%"):
        model.solve(gpu="-5%")
    with pytest.raises(XEngineError, match="no schedule"):
        model.solve(gpu="1KiB", cpu="1KiB", method="greedy")
    with pytest.raises(XEngineError, match="not a tensor"):
        solver.import_model(net, [[1.0, 2.0]])


def test_a_two_device_plan_is_not_trained_by_pytorch_and_says_what_is():
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    model = solver.import_model(net, torch.randn(4, 8))
    plan = model.solve(gpu=None, cpu=None, method="greedy")
    two = plan if len(plan.devices) == 2 else None
    if two is None:  # force a split: the greedy's best may be one device; take a hand split
        from solver.api import Plan
        from solver.execution.simulate import check_schedule
        from solver.optimize.baselines import schedule_with_checkpoints
        from solver.optimize.incumbents import SolveResult
        from solver.status import SolveStatus

        graph = plan.graph
        placement = ["gpu" if j % 2 else "cpu" for j in range(graph.n)]
        schedule = schedule_with_checkpoints(graph, placement, lambda *a: True, "split")
        result = SolveResult(
            "by hand", SolveStatus.FEASIBLE, schedule, check_schedule(graph, schedule)
        )
        two = Plan(model, graph, result)
    with pytest.raises(XEngineError, match="PyTorch has no equivalent of a CPU\\+GPU split"):
        two.train_step(net, torch.randn(4, 8))
    assert two.single_device("gpu").devices == ["gpu"]


def test_import_solver_stays_light():
    """``import solver`` loads neither torch nor the API until it is used."""
    import subprocess
    import sys

    code = "import sys, solver; print('torch' in sys.modules, 'solver.api' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ},
        timeout=60,
    )
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_a_saved_bytes_plan_says_what_it_saved_and_its_single_device_plan_keeps_the_limit():
    """Plan.summary() left the saved bytes out, and single_device() solved without the limit
    (a plan for a different question than the user asked)."""
    torch.manual_seed(0)
    layers = [m for _ in range(4) for m in (torch.nn.Linear(32, 32), torch.nn.Tanh())]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(32, 4))
    model = solver.import_model(net, (torch.randn(16, 32),))
    unlimited = model.solve(gpu=None, cpu=None, method="checkmate:gpu", time_limit=10)
    kept = unlimited.timeline.saved_bytes["gpu"]
    assert kept > 0
    plan = model.solve(
        gpu=None, cpu=None, method="checkmate:gpu", time_limit=10, saved={"gpu": kept // 2}
    )
    held = plan.timeline.saved_bytes["gpu"]
    assert held <= kept // 2
    assert f"saved for the backward, of {format_size(kept // 2)}" in plan.summary()
    alone = plan.single_device("gpu", time_limit=10)
    assert alone.graph.device("gpu").saved_limit == kept // 2
    assert alone.timeline.saved_bytes["gpu"] <= kept // 2
