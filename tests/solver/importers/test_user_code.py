"""The user-code boundary of import-torch and execute (issue 22): whatever a model module does
at import, build or capture time, the command prints one line naming the module and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver.importers.user_code import UserCodeError, debug_enabled, user_code

ROOT = Path(__file__).resolve().parents[3]

MODULES = {
    "zero": ("x = 1 / 0\n", "importing the module raised ZeroDivisionError: division by zero at"),
    "runtime": ("raise RuntimeError('no GPU found')\n", "raised RuntimeError: no GPU found at"),
    "value": ("raise ValueError\n", "raised ValueError at"),
    "key": ("{}['missing']\n", "raised KeyError: 'missing' at"),
    "recursion": ("def f():\n    return f()\nf()\n", "raised RecursionError: maximum recursion"),
    "interrupt": ("raise KeyboardInterrupt\n", "KeyboardInterrupt while importing the module"),
    "sys_exit": ("import sys\nsys.exit(7)\n", "called sys.exit(7) while importing the module"),
    "os_exit": ("import os\nos._exit(5)\n", "called os._exit(5) while importing the module"),
}


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "main.py"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_that_fails_at_import_is_one_line_and_exit_2(name, tmp_path):
    """import-torch and execute on the same module: exit 2, one line naming the module, the
    failing line (file:line where the module has one) and no traceback; never the module's
    own exit code."""
    pytest.importorskip("torch")
    source, expected = MODULES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    schedule = tmp_path / "s.schedule.json"
    schedule.write_text("{}")
    commands = [("import-torch", f"{path}:Net", "--input", "2x8")]
    if name in ("zero", "sys_exit", "os_exit"):  # execute shares the boundary: three suffice
        commands.append(("execute", f"{path}:Net", "--input", "2x8", "--schedule", str(schedule)))
    for argv in commands:
        done = run(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"error: {path}: ") and expected in lines[0], lines[0]
        if name != "interrupt":
            assert f"{name}.py:" in lines[0]  # where it raised


def test_debug_prints_the_traceback_first(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "zero.py"
    path.write_text("x = 1 / 0\n")
    for done in (
        run("import-torch", f"{path}:Net", "--input", "2x8", "--debug"),
        run("import-torch", f"{path}:Net", "--input", "2x8", env={"XENGINE_DEBUG": "1"}),
    ):
        assert done.returncode == 2
        assert done.stderr.startswith("Traceback (most recent call last):")
        assert "ZeroDivisionError" in done.stderr
        assert done.stderr.splitlines()[-1].startswith(f"error: {path}: importing the module")


def test_torch_logs_nothing_while_a_capture_fails(tmp_path):
    """A shape the model cannot take made torch's fake-tensor kernel log dozens of lines
    (E1201 ... fake_tensor.py) before our one-line error."""
    pytest.importorskip("torch")
    path = tmp_path / "net.py"
    path.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = torch.nn.Conv2d(3, 4, 3)\n"
        "    def forward(self, x):\n"
        "        return self.conv(x) + torch.ones(7)\n"
    )
    done = run("import-torch", f"{path}:Net", "--input", "2x3x8x8")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "cannot capture the training step" in done.stderr and "net.py:7" in done.stderr


def test_measured_costs_of_a_huge_input_are_refused_before_allocating(tmp_path):
    """--cost measured runs the step for real: 1,000,000 x 4096 floats through two 4096-wide
    layers needs hundreds of GiB; refused in one line naming both sizes, nothing allocated."""
    pytest.importorskip("torch")
    path = tmp_path / "wide.py"
    path.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4096, 4096)\n"
        "    def forward(self, x):\n"
        "        return self.fc(torch.relu(self.fc(x)))\n"
    )
    done = run("import-torch", f"{path}:Net", "--input", "1000000x4096", "--cost", "measured")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "measuring the step op by op needs about" in line and "available" in line
    assert "--cost roofline" in line


def test_the_boundary_keeps_our_own_errors_and_restores_os_exit(monkeypatch):
    from solver.errors import XEngineError

    exit_before = os._exit
    with pytest.raises(XEngineError, match="ours") as caught, user_code("m:Net", "building it"):
        raise XEngineError("ours")
    assert not isinstance(caught.value, UserCodeError)
    with pytest.raises(UserCodeError, match=r"m: the model code called os._exit\(3\)"):
        with user_code("m:Net", "building it"):
            os._exit(3)
    assert os._exit is exit_before
    monkeypatch.delenv("XENGINE_DEBUG", raising=False)
    assert debug_enabled(True) and not debug_enabled(False)
    monkeypatch.setenv("XENGINE_DEBUG", "1")
    assert debug_enabled(False)
