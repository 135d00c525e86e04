"""Temporary files and folders that must not outlive the process, however it ends.

Writers register what they create under a temporary name and unregister it once it is renamed
into place or removed. What is still registered is removed:

- on SIGTERM, SIGINT and SIGHUP, by a handler the command line installs (``install_handlers``),
  which then lets the signal end the process as it would have;
- on SIGKILL (or any death that runs no code), by a janitor: a small child process started on
  the first registration once ``enable_janitor`` was called. It reads registrations from a
  pipe; the pipe's end (the parent is gone) makes it remove what is left. Temporary names are
  unique and never reused, so a registration the parent had no time to withdraw names nothing.

io.save needs neither in the common case: on Linux its files are unnamed (O_TMPFILE) until they
are complete, so a killed save leaves nothing to remove.
"""

from __future__ import annotations

__all__ = [
    "blocked_signals",
    "discard",
    "enable_janitor",
    "install_handlers",
    "new_folder",
    "register",
    "remove",
    "temporary_folder",
    "unregister",
]

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)
_lock = threading.Lock()
_paths: dict[str, None] = {}


class _Janitor:
    process: subprocess.Popen[bytes] | None = None
    wanted = False


_JANITOR = """
import os, shutil, sys
paths = {}
for line in sys.stdin.buffer:
    op, path = line[:1], os.fsdecode(bytes.fromhex(line[1:].strip().decode()))
    if op == b"+":
        paths[path] = None
    elif op == b"-":
        paths.pop(path, None)
for path in reversed(list(paths)):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass
"""


def remove(path: str | os.PathLike[str]) -> None:
    """Remove a file or a folder (not what a symbolic link points to); missing is fine."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("could not remove %s: %s", path, exc.strerror)


def _key(path: str | os.PathLike[str]) -> str:
    """``path`` made absolute, as Path.absolute does (string work: saves are timed in µs)."""
    text = os.fspath(path)
    return text if os.path.isabs(text) else os.path.join(os.getcwd(), text)


def register(path: str | os.PathLike[str]) -> None:
    """``path`` (a file or folder just created under a temporary name) is removed if the process
    ends before ``unregister(path)``."""
    key = _key(path)
    with _lock:
        _paths[key] = None
        _tell(b"+", key)


def unregister(path: str | os.PathLike[str]) -> None:
    """``path`` was renamed into place or removed: nothing to do for it any more."""
    key = _key(path)
    with _lock:
        if _paths.pop(key, 0) is None:
            _tell(b"-", key)


def discard(path: str | os.PathLike[str]) -> None:
    """Remove a registered ``path`` and withdraw its registration."""
    remove(path)
    unregister(path)


def new_folder(prefix: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new folder in ``parent`` (the system's temporary folder by default), registered:
    removed however the process ends until ``discard``."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    register(folder)
    return folder


@contextlib.contextmanager
def temporary_folder(prefix: str, parent: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A ``new_folder`` for the block, discarded at its end, and however the process ends (a
    calibration's float32 arrays there can be gigabytes; tempfile.TemporaryDirectory left
    them behind on SIGTERM or SIGKILL)."""
    folder = new_folder(prefix, parent)
    try:
        yield folder
    finally:
        discard(folder)


def _tell(op: bytes, key: str) -> None:
    if not _Janitor.wanted:
        return
    if _Janitor.process is None or _Janitor.process.poll() is not None:
        try:
            _Janitor.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _JANITOR],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the terminal's group is not for it
            )
        except OSError as exc:
            logger.warning("no janitor for temporary files: %s", exc.strerror)
            return
        for known in _paths:
            if known != key:
                _send(b"+", known)
    _send(op, key)


def _send(op: bytes, key: str) -> None:
    janitor = _Janitor.process
    assert janitor is not None and janitor.stdin is not None
    try:
        janitor.stdin.write(op + os.fsencode(key).hex().encode() + b"\n")
        janitor.stdin.flush()
    except OSError:
        pass


def enable_janitor() -> None:
    """From now on, a janitor process removes registered paths if this process is killed."""
    _Janitor.wanted = True


def _on_signal(signum: int, frame: Any) -> None:
    with contextlib.suppress(Exception):
        for path in reversed(list(_paths)):
            remove(path)
        _paths.clear()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # end as the signal would have (exit status included)


def install_handlers() -> None:
    """SIGTERM, SIGINT and SIGHUP remove what is registered, then end the process."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _SIGNALS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _on_signal)


@contextlib.contextmanager
def blocked_signals() -> Iterator[None]:
    """Hold SIGTERM/SIGINT/SIGHUP back (delivered at the end): for the renames that publish a
    model and its data file, which must not be parted by a polite kill."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
