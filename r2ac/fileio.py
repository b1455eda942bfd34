"""Atomic file writes: a temp file in the target's directory, flushed and fsynced, then renamed over the
target (and the directory fsynced), so a crash leaves either the old file or the new one, never a torn one.
Files get the mode a plain ``open()`` would give them (0644 under umask 022), so the group can read runs."""

from __future__ import annotations

import os
import tempfile
from typing import IO, Any, Callable, Optional


def fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (/proc/self/status)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, and put it back at once
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open()`` gives a new file (0644 under the usual umask 022): what ``atomic_write`` gives its
    files too, where ``mkstemp`` alone would leave them readable by their owner only (0600)."""
    return 0o666 & ~_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[IO[Any]], Any], *, text: bool = False,
                 tmp_prefix: Optional[str] = None) -> str:
    """Write ``path`` through ``write(fileobj)`` (binary, or text in UTF-8 with ``text=True``)."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    prefix = (tmp_prefix if tmp_prefix is not None else ".") + os.path.basename(path) + "."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=d)
    try:
        os.fchmod(fd, file_mode())
        with (os.fdopen(fd, "w", encoding="utf-8", newline="") if text else os.fdopen(fd, "wb")) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(d)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> str:
    return atomic_write(path, lambda fh: fh.write(text), text=True)
