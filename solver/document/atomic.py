"""Atomic file writing: a crash, a full disk or a read-only target never leaves a half-written file.

A temporary file in the same folder is renamed over the target (through a symlink to its target),
the folder is synced, a read-only target is refused as editors do, and temporary files an earlier
crash left behind are removed. Every save of the program (documents, projects, exports) goes
through :func:`atomic_write_bytes`.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import tempfile
import time
from pathlib import Path

from solver.errors import FileWriteError

__all__ = ["STALE_TEMP_SECONDS", "atomic_write_bytes", "atomic_write_text", "check_writable"]

logger = logging.getLogger(__name__)

STALE_TEMP_SECONDS = 10 * 60
"""A writer's temporary file older than this is a crash leftover and is removed on the next save."""


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so that a crash or a
    full disk never leaves a half-written file behind.

    A symlink is written through (its target is replaced, the link stays); an existing file
    without write permission is refused, as editors do; the folder is synced after the rename
    so the new name survives a power cut; temporary files that an earlier crash left next to
    the target are removed.

    Raises
    ------
    FileWriteError
        An :class:`OSError` naming the file, what went wrong and what to do.
    """
    target = Path(os.path.realpath(path))  # through symlinks: replace the file, keep the link
    _refuse_read_only(target, str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _write_error(str(path), exc) from None
    try:
        os.chmod(tmp, _file_mode(target))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, FileWriteError):
            raise _write_error(str(path), exc) from None
        raise
    _sync_folder(target.parent)
    _remove_stale_temps(target)


def check_writable(path: str | os.PathLike) -> None:
    """Raise the :class:`FileWriteError` a later :func:`atomic_write_bytes` to ``path`` would
    raise for a missing or unwritable folder, or a target that is no regular file or is
    read-only: a command checks its output path before it spends a solve or prints progress.

    Examples
    --------
    >>> try:
    ...     check_writable("/no/such/folder/results.csv")
    ... except OSError as exc:
    ...     print(exc.what)
    the folder /no/such/folder does not exist
    """
    name = str(path)
    target = Path(os.path.realpath(path))
    _refuse_read_only(target, name)
    folder = target.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise FileWriteError(
            name, f"the folder {folder} {what}", "create it first or choose another"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileWriteError(
            name, f"the folder {folder} is not writable", "choose a folder you can write to"
        )


def _refuse_read_only(target: Path, name: str) -> None:
    try:
        mode = target.stat().st_mode
    except OSError:
        return  # a new file
    if not stat.S_ISREG(mode):
        raise FileWriteError(name, "not a regular file", "choose a file name")
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise FileWriteError(
            name, "the file is read-only", "save under another name, or make it writable first"
        )


def _write_error(name: str, exc: OSError) -> FileWriteError:
    reason = exc.strerror or str(exc)
    fixes = {
        errno.ENOSPC: "free some disk space and save again",
        errno.EACCES: "choose a folder you can write to",
        errno.EROFS: "the disk is read-only; choose another folder",
        errno.ENOENT: "the folder does not exist; choose another",
    }
    fix = fixes.get(exc.errno, "") if exc.errno is not None else ""
    return FileWriteError(name, f"could not write: {reason}", fix)


def _sync_folder(folder: Path) -> None:
    """fsync the folder, so that the rename itself is on disk (not every system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        logger.debug("could not sync folder %s: %s", folder, exc)
    finally:
        os.close(fd)


def _remove_stale_temps(target: Path) -> None:
    """Remove this writer's temporary files for ``target`` that a crash left behind.

    Only names this writer makes (``.NAME.XXXXXXXX.tmp``) older than :data:`STALE_TEMP_SECONDS`
    are removed: a younger one may belong to a save in progress in another process.
    """
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[A-Za-z0-9_]{{8}}\.tmp")
    cutoff = time.time() - STALE_TEMP_SECONDS
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                logger.info("removed %s, left by an interrupted save", entry.path)
        except OSError as exc:
            logger.debug("could not remove %s: %s", entry.path, exc)


def _file_mode(target: Path) -> int:
    """Keep an existing file's permissions; give a new one the umask's default."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
