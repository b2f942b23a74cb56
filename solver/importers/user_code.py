"""The boundary around the user's model code: its import, its constructor, its forward.

``import-torch``, ``execute`` and the Python API run code we did not write, and that code may
raise anything (``ZeroDivisionError`` at import, ``RecursionError``, ``KeyboardInterrupt``),
call ``sys.exit(7)`` or even ``os._exit(5)``, or make torch log pages of its own tracebacks.
Inside :func:`user_code` every such ending becomes one :class:`UserCodeError`: one line that
names the module, what was being done, where the code raised (``file.py:line``) and what to do.
``os._exit`` is refused for the duration (it would end our process with the user's code), and
torch's loggers are quiet (a failing fake-tensor kernel logs its whole traceback before it
raises). The traceback is kept in :attr:`UserCodeError.detail`, printed only with ``--debug``
or ``XENGINE_DEBUG=1`` (:func:`debug_enabled`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from collections.abc import Iterator

from solver.errors import XEngineError

__all__ = ["UserCodeError", "debug_enabled", "quiet_torch_logs", "user_code"]

#: torch's loggers that print tracebacks of their own while a capture fails.
_TORCH_LOGGERS = ("torch", "torch._subclasses.fake_tensor", "torch.fx.experimental")


class UserCodeError(XEngineError):
    """The user's model code raised or tried to exit; ``detail`` is the traceback."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class _RefusedExit(BaseException):
    """``os._exit(code)`` called by user code, turned into an exception we can catch."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def debug_enabled(flag: bool = False) -> bool:
    """``--debug`` given, or ``XENGINE_DEBUG`` set to anything but empty or ``0``."""
    return flag or os.environ.get("XENGINE_DEBUG", "") not in ("", "0")


@contextlib.contextmanager
def quiet_torch_logs() -> Iterator[None]:
    """torch's own loggers silent (their levels restored after)."""
    loggers = [logging.getLogger(name) for name in _TORCH_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@contextlib.contextmanager
def user_code(
    spec: str, doing: str, passing: tuple[type[BaseException], ...] = ()
) -> Iterator[None]:
    """Run user code for model ``spec`` (``module:Class``) while ``doing`` (``importing it``,
    ``capturing its training step``, ...); any exception or exit becomes a
    :class:`UserCodeError`. Our own one-line errors (:class:`XEngineError`) and the types in
    ``passing`` (which the caller words itself) pass unchanged.

    Examples
    --------
    >>> with user_code("nets:Net", "building it"):  # doctest: +ELLIPSIS
    ...     1 / 0
    Traceback (most recent call last):
    ...
    solver.importers.user_code.UserCodeError: nets: building it raised ZeroDivisionError: \
division by zero at <doctest ...>:2; fix the model code (run it on its own with python \
to see the traceback, or add --debug)
    """
    module = spec.rpartition(":")[0] or spec
    real_exit = os._exit

    def refused_exit(code: int) -> None:
        raise _RefusedExit(code)

    os._exit = refused_exit  # type: ignore[assignment]
    try:
        with quiet_torch_logs():
            yield
    except XEngineError:
        raise
    except passing:
        raise
    except _RefusedExit as exc:
        raise UserCodeError(
            f"{module}: the model code called os._exit({exc.code}) while {doing}{_at(exc)}; "
            "remove the exit from the code that imports, builds or runs the model",
            traceback.format_exc(),
        ) from None
    except SystemExit as exc:
        raise UserCodeError(
            f"{module}: the model code called sys.exit({exc.code!r}) while {doing}{_at(exc)}; "
            "guard the script part of the module with `if __name__ == '__main__':`",
            traceback.format_exc(),
        ) from None
    except KeyboardInterrupt:
        raise UserCodeError(
            f"{module}: KeyboardInterrupt while {doing} (raised by the model code, or Ctrl-C)",
            traceback.format_exc(),
        ) from None
    except MemoryError as exc:
        raise UserCodeError(
            f"{module}: out of memory while {doing}{_at(exc)}; use a smaller input (batch) "
            "or the roofline cost model (--cost roofline), which runs nothing",
            traceback.format_exc(),
        ) from None
    except BaseException as exc:  # noqa: BLE001 - the boundary: any ending of user code
        text = (str(exc).strip().splitlines() or [""])[0][:300]
        what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        raise UserCodeError(
            f"{module}: {doing} raised {what}{_at(exc)}; fix the model code (run it on its "
            "own with python to see the traceback, or add --debug)",
            traceback.format_exc(),
        ) from None
    finally:
        os._exit = real_exit


def _at(exc: BaseException) -> str:
    """`` at file.py:line`` of the innermost frame outside torch and this package, if any."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or "/solver/" in path or "/contextlib.py" in path:
            continue
        return f" at {path.rsplit('/', 1)[-1]}:{frame.lineno}"
    return ""
