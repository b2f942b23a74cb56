"""torch and onnx stay optional: the package imports without them and says how to get them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

WITHOUT = """
import importlib, pkgutil, sys
sys.modules["torch"] = None  # makes `import torch` raise ModuleNotFoundError
sys.modules["onnx"] = None
import solver.importers
for info in pkgutil.iter_modules(solver.importers.__path__):
    importlib.import_module(f"solver.importers.{info.name}")
import solver.executors
for info in pkgutil.iter_modules(solver.executors.__path__):
    importlib.import_module(f"solver.executors.{info.name}")
from solver.importers import MissingDependencyError, import_onnx, import_torch
from solver.importers.zoo_models import ResNet18
for call in (lambda: import_torch("solver.importers.zoo_models:ResNet18", (1, 3, 32, 32)),
             lambda: import_onnx("model.onnx"), ResNet18):
    try:
        call()
    except MissingDependencyError as exc:
        assert isinstance(exc, ImportError)
        print(exc)
    else:
        raise AssertionError("no error")
from solver.cli import main
print("exit", main(["import-torch", "solver.importers.zoo_models:ResNet18", "--input", "1x3"]))
print("exit", main(["execute", "m:M", "--input", "1x3", "--schedule", "s.json"]))
"""

CORE_ONLY = """
import importlib, pkgutil, sys
import solver
for info in pkgutil.walk_packages(solver.__path__, "solver."):
    if not info.name.startswith(("solver.importers", "solver.executors")):  # torch's rooms
        try:
            importlib.import_module(info.name)
        except ImportError:
            pass  # a module under construction elsewhere; only the imports matter here
import solver.importers, solver.cli
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "onnx")))
"""


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_importers_work_without_torch_and_onnx():
    done = run(WITHOUT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "pip install -e .[torch]" in lines[0] and "torch==2.13.0" in lines[0]
    assert "pip install -e .[onnx]" in lines[1]
    assert "the model zoo needs the optional package 'torch'" in lines[2]
    assert lines[3] == "exit 2"
    assert lines[4] == "exit 2"
    assert "error: the ATen importer needs the optional package 'torch'" in done.stderr
    assert done.stderr.count("\n") == 2  # one line per command


def test_core_and_cli_do_not_import_torch_or_onnx():
    done = run(CORE_ONLY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


HELP_WITHOUT = """
import contextlib, io, sys
sys.modules["torch"] = None
sys.modules["onnx"] = None
from solver.cli import COMMANDS, main
for argv in (["--help"], *([c.name, "--help"] for c in COMMANDS)):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    print(argv[0], code, out.getvalue().startswith("usage: main.py"))
"""

HELP_LOADS_NO_TORCH = """
import contextlib, io, sys
from solver.cli import COMMANDS, main
for argv in (["--help"], *([c.name, "--help"] for c in COMMANDS)):
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "onnx")))
"""


def test_every_command_help_works_without_torch_and_onnx():
    done = run(HELP_WITHOUT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "--help 0 True"
    assert "import-torch 0 True" in lines and "import-onnx 0 True" in lines
    assert "execute 0 True" in lines
    assert all(line.endswith(" 0 True") for line in lines), lines


def test_parsing_every_command_imports_neither_torch_nor_onnx():
    done = run(HELP_LOADS_NO_TORCH)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
