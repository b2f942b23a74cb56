"""The optional extras (torch, onnx) and the error raised when one is missing.

The core never needs torch or onnx: graph files are plain JSON. Only the importers do, so every
importer module must stay importable without them and fail late, at call time, with a message
that says which extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from solver.errors import XEngineError

__all__ = ["MissingDependencyError", "TORCH_PIN", "require_torch", "require_onnx"]

TORCH_PIN = "torch==2.13.0"


class MissingDependencyError(XEngineError, ImportError):
    """An optional extra needed by an importer is not installed.

    Both an :class:`XEngineError` (so the command line prints it on one line) and an
    :class:`ImportError` (so ``except ImportError`` around an optional feature still works).
    """


def require_torch(feature: str) -> ModuleType:
    """Return the ``torch`` module, or raise :class:`MissingDependencyError` naming ``feature``.

    Examples
    --------
    >>> require_torch("the model zoo").__name__  # doctest: +SKIP
    'torch'
    """
    return _require("torch", feature, f"pip install -e .[torch]  (i.e. {TORCH_PIN}, CPU wheel)")


def require_onnx(feature: str) -> ModuleType:
    """Return the ``onnx`` module, or raise :class:`MissingDependencyError` naming ``feature``."""
    return _require("onnx", feature, "pip install -e .[onnx]  (i.e. onnx)")


def _require(name: str, feature: str, how: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise MissingDependencyError(
            f"{feature} needs the optional package '{name}', which is not installed; {how}"
        ) from None
