"""torchvision's model definitions beside the CPU torch wheel, without its C extension.

PyPI's torchvision wheel is built against the CUDA build of torch. Beside the CPU wheel this
project installs, its C extension (``_C.so``: NMS, RoIAlign and the other detection ops) does
not load, and ``import torchvision`` then fails in the package's ``__init__``, which registers
fake kernels for those missing ops (``RuntimeError: operator torchvision::nms does not exist``).
The model definitions themselves (``torchvision.models``: classification, segmentation, video,
and the detection models' Python) are plain ``torch.nn`` code that never needs the extension to
be built or trained, only the detection models' NMS at inference.

:func:`import_torchvision` imports a ``torchvision`` submodule with the package's ``__init__``
left out: ``torchvision`` is entered in ``sys.modules`` as a bare package over the installed
folder, so ``torchvision.models`` and what it imports load as usual. When the extension does
load (a matching torch and torchvision), the real package is used. :func:`prepare_torchvision`
does this before a model module is imported, for the libraries that import torchvision
themselves (``transformers`` does, where it finds it installed).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

__all__ = ["import_torchvision", "prepare_torchvision"]


def import_torchvision(module_name: str = "torchvision.models") -> types.ModuleType:
    """Import ``module_name`` (``torchvision.models``, ``torchvision.models.video``, ...).

    Raises
    ------
    ModuleNotFoundError
        If torchvision is not installed (``scripts/setup.sh test`` installs it).
    """
    if "torchvision" not in sys.modules:
        try:
            importlib.import_module("torchvision")
        except RuntimeError as exc:  # the C extension is missing: definitions only
            if "torchvision::" not in str(exc):
                raise
            _bare_package()
    return importlib.import_module(module_name)


def prepare_torchvision() -> None:
    """Make ``import torchvision`` work, if torchvision is installed (a no-op otherwise, and
    without torch: the caller then says which extra is missing)."""
    if "torchvision" not in sys.modules and importlib.util.find_spec("torchvision") is not None:
        try:
            import_torchvision("torchvision")
        except ImportError:
            return


def _bare_package() -> None:
    """``torchvision`` as a package without its ``__init__`` (and without what the failed
    import left half-imported)."""
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError("No module named 'torchvision'", name="torchvision")
    package = types.ModuleType("torchvision")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__file__ = spec.origin
    sys.modules["torchvision"] = package
