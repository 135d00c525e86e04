"""Where a command writes, and where it reads a model piped in: files are written beside their
target and renamed into place; stdout, character devices and FIFOs are written through."""

from __future__ import annotations

__all__ = ["STDIN_NAME", "STDIO", "STDOUT_NAME", "Output", "silence_stdout", "spooled_stdin"]

import contextlib
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from onnxforge import _cleanup
from onnxforge.errors import ModelReadError, OnnxForgeError, OutputError
from onnxforge.io._atomic import TempFile, sync_folder

STDIO = "-"
"""The name that means stdin as MODEL and stdout as OUT."""
STDIN_NAME = "<stdin>"
STDOUT_NAME = "<stdout>"
_CHUNK = 1 << 20
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


class Output:
    """Where a result goes, decided once from what is at OUT before any work (``Output.at``).

    - ``file``: nothing there, a regular file, or a symbolic link (to a regular file or to
      nothing). Written into a temporary file beside it and renamed into place: a failure or
      a kill leaves what was there; a link or a hard-linked file is replaced, never written
      through.
    - ``stream``: a character device (``/dev/null``) or a FIFO, also through a symbolic link
      (``/dev/stdout``). Opened without creating or truncating, written through in order, and
      left what it is. Atomicity does not apply: a failure mid-write leaves what was written.
    - ``stdout``: ``-``. A stream too.

    A folder, a block device or a socket is refused (OutputError, exit 2), and so is a
    terminal (binary protobuf would garble it) when the stream is opened.
    """

    def __init__(self, path: Path | None, kind: str) -> None:
        self.path = path
        self.kind = kind
        self.handle: BinaryIO | None = None
        self._owned = False

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> Output:
        """Classify OUT (``-`` is stdout); refuse a folder, a block device or a socket."""
        text = os.fspath(path)
        if text == STDIO:
            return cls(None, "stdout")
        target = Path(text)
        try:
            mode = os.stat(target).st_mode  # through links: /dev/stdout is one
        except OSError:
            return cls(target, "file")  # nothing there (or a dangling link): a new file
        if stat.S_ISREG(mode):
            return cls(target, "file")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            return cls(target, "stream")
        hint = "; give a file name in it" if stat.S_ISDIR(mode) else ""
        raise OutputError(
            f"{target}: is {_kind_of(mode)}; a result is written to a file, '-' (stdout), "
            f"a character device or a FIFO{hint}"
        )

    @property
    def name(self) -> str:
        """How messages name it: the path, or ``<stdout>``."""
        return STDOUT_NAME if self.path is None else str(self.path)

    @property
    def streamed(self) -> bool:
        """Written through (stdout, a device, a FIFO), not staged and renamed."""
        return self.kind != "file"

    def open(self) -> None:
        """Open a stream now, before the work (a FIFO waits here for its reader): when the work
        fails the stream is closed empty, and a reader sees its end instead of waiting for
        ever. Files are written only at the end, so nothing is opened for them."""
        if not self.streamed or self.handle is not None:
            return
        if self.path is None:
            sys.stdout.flush()
            handle = sys.stdout.buffer
            if handle.isatty():
                raise OutputError(
                    f"{STDOUT_NAME}: is a terminal; redirect it (> model.onnx) or give -o FILE"
                )
            self.handle = handle
            return
        try:
            fd = os.open(self.path, os.O_WRONLY | _O_CLOEXEC | _O_NOCTTY)  # no O_CREAT/O_TRUNC
        except OSError as exc:
            raise OnnxForgeError(f"{self.path}: cannot write: {exc.strerror}") from None
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)) or os.isatty(fd):
            os.close(fd)
            what = "a terminal" if stat.S_ISCHR(mode) else "no longer a device or FIFO"
            raise OutputError(f"{self.path}: is {what}; give another -o")
        self.handle = os.fdopen(fd, "wb", buffering=_CHUNK)
        self._owned = True

    def close(self) -> None:
        """Flush a stream (and close it when this opened it). A reader that went away is an
        error of the write (BrokenPipeError), reported by the caller."""
        handle, self.handle = self.handle, None
        if handle is None:
            return
        try:
            handle.flush()
        except BrokenPipeError:
            if self.path is None:
                silence_stdout()
            raise
        finally:
            if self._owned:
                with contextlib.suppress(OSError):
                    handle.close()
            self._owned = False

    def stream(self) -> BinaryIO:
        """The open stream to write to (opened now if it was not)."""
        self.open()
        assert self.handle is not None
        return self.handle

    def write_bytes(self, data: bytes, *, durable: bool = False) -> None:
        """Write a small result (a report) whole: a file atomically, a stream through."""
        if self.streamed:
            self.stream().write(data)
            self.close()
            return
        assert self.path is not None
        file = TempFile(self.path)
        try:
            file.handle.write(data)
            file.finish(durable=durable)
            file.publish()
            if durable:
                sync_folder(self.path.parent)
        finally:
            file.discard()

    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """A folder to write the result into and examine before ``publish``: beside a file
        (same filesystem, so publishing is a rename), in the temporary folder for a stream.
        Registered with _cleanup: a signal, or the janitor after a SIGKILL, removes it."""
        if self.streamed:
            prefix, parent, name = "onnxforge-staging-", None, "model.onnx"
        else:
            assert self.path is not None
            parent = self.path.parent
            if not parent.is_dir():
                raise OnnxForgeError(f"{self.path}: the folder {str(parent)!r} does not exist")
            prefix, name = f".{self.path.name}.{os.getpid()}.", self.path.name
        with _cleanup.temporary_folder(prefix, parent) as folder:
            yield folder / name

    def publish(self, staged: Path, location: str) -> None:
        """Put a staged result in place: renamed, its data file first (the model never points
        at a missing data file; a polite kill waits until both are in place), or streamed."""
        if self.streamed:
            out = self.stream()
            with open(staged, "rb") as source:
                shutil.copyfileobj(source, out, _CHUNK)
            return
        assert self.path is not None
        data = staged.parent / location
        with _cleanup.blocked_signals():
            if data.exists():
                os.replace(data, self.path.parent / location)
            os.replace(staged, self.path)


def silence_stdout() -> None:
    """Point fd 1 at /dev/null once its reader is gone, so the interpreter's last flush at exit
    does not fail again (the error was reported once)."""
    with contextlib.suppress(OSError, ValueError):
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


@contextlib.contextmanager
def spooled_stdin(stream: BinaryIO | None = None) -> Iterator[Path]:
    """Copy a model piped into stdin to a temporary file, for the duration of the block: a
    model is read from a file (weights mapped, not held in memory), and --check hands that
    file to onnxruntime. Registered with _cleanup, so it goes however the process ends.
    A terminal on stdin is refused (ModelReadError, exit 2) rather than waited on."""
    source = stream if stream is not None else sys.stdin.buffer
    if source.isatty():
        raise ModelReadError(
            STDIN_NAME, "is a terminal; pipe a model into it (cat model.onnx | onnxforge ...)"
        )
    with _cleanup.temporary_folder("onnxforge-stdin-") as folder:
        path = folder / "stdin.onnx"
        with open(path, "wb") as copy:
            shutil.copyfileobj(source, copy, _CHUNK)
        yield path
