"""Open files that back tensors, and the checks an external-data location must pass first."""

from __future__ import annotations

__all__ = ["DataFile", "Span", "open_external", "open_model_file"]

import errno
import mmap
import os
import stat
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from onnxforge.errors import ModelReadError, UnsafeExternalDataError
from onnxforge.io._wire import copy_span


class DataFile:
    """A read-only file kept open while tensors point into it.

    Holding the descriptor (not the path) means the bytes stay valid when the path is replaced,
    e.g. by saving a model over its own input.
    """

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self.fd = fd
        self.size = size
        self._mmap: mmap.mmap | None = None
        weakref.finalize(self, os.close, fd)

    def read_all(self) -> bytes:
        """The whole file, read (for small files: a map costs more than it saves)."""
        parts, done = [], 0
        while done < self.size:
            chunk = os.pread(self.fd, self.size - done, done)
            if not chunk:
                break  # shrunk since it was opened: the parser reports it truncated
            parts.append(chunk)
            done += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def mmap(self) -> mmap.mmap:
        if self._mmap is None:
            self._mmap = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)
        return self._mmap


@dataclass(frozen=True, slots=True)
class Span:
    """``length`` bytes at ``offset`` of an open DataFile (ir.FileSpan)."""

    file: DataFile
    offset: int
    length: int

    def buffer(self) -> mmap.mmap:
        return self.file.mmap()

    def read(self) -> bytes:
        return bytes(self.file.mmap()[self.offset : self.offset + self.length])

    def view(self) -> memoryview:
        """The bytes in place (the file's mapping), not copied."""
        return memoryview(self.file.mmap())[self.offset : self.offset + self.length]

    def write_to(self, out: BinaryIO) -> None:
        copy_span(self.file.fd, self.offset, self.length, out)


_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO put in a file's place must not hang open()


def open_model_file(path: Path) -> DataFile:
    """Open the model file, turning every OS failure into one clear ModelReadError.

    Opened non-blocking and checked on the descriptor (fstat), so a FIFO or device at the
    path is refused without waiting on it and nothing can swap the file after the check.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelReadError(path, "no such file") from None
    except OSError as exc:
        raise ModelReadError(path, f"cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelReadError(path, "is a directory, not an ONNX model file")
    if not stat.S_ISREG(st.st_mode):  # checked before open: opening a device may act on it
        raise ModelReadError(path, "is not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | _O_NONBLOCK)
    except OSError as exc:
        raise ModelReadError(path, f"cannot read: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ModelReadError(path, "is not a regular file")
    return DataFile(path, fd, st.st_size)


def open_external(
    model_path: Path, location: str, tensor: str, cache: dict[str, DataFile]
) -> DataFile:
    """Open an external-data file for ``tensor``, refusing any location that could leave the
    model's folder: absolute paths, ``..`` after normalization, a symlink in any component, a
    file with more than one hard link, or anything that is not a regular file (a FIFO or a
    device is refused on its descriptor, opened non-blocking: nothing waits on it). Each
    component is opened relative to the one before with O_NOFOLLOW, so nothing can swap a
    link in between the check and the open."""

    def refuse(reason: str) -> UnsafeExternalDataError:
        return UnsafeExternalDataError(
            model_path, f"tensor {tensor!r}: external data location {location!r} {reason}"
        )

    if not location or "\x00" in location:
        raise refuse("is empty or contains a NUL byte")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location[:2]:
        raise refuse("is absolute; it must be relative to the model's folder")
    normalized = os.path.normpath(location)
    parts = normalized.split(os.sep)
    if normalized in (".", "") or parts[0] == "..":
        raise refuse("points outside the model's folder")
    if normalized in cache:
        return cache[normalized]
    base = model_path.parent
    try:
        dir_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ModelReadError(base, f"cannot open the model's folder: {exc.strerror}") from None
    try:
        for part in parts[:-1]:
            next_fd = _open_component(part, dir_fd, os.O_DIRECTORY, refuse)
            os.close(dir_fd)
            dir_fd = next_fd
        fd = _open_component(parts[-1], dir_fd, 0, refuse)
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise refuse("is not a regular file with a single hard link")
    data = DataFile(base / normalized, fd, st.st_size)
    cache[normalized] = data
    return data


def _open_component(name: str, dir_fd: int, flags: int, refuse: object) -> int:
    try:
        return os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | _O_NONBLOCK | flags, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, dir_fd):
            raise refuse("passes through a symbolic link") from None  # type: ignore[operator]
        if exc.errno == errno.ENOENT:
            raise refuse("does not exist") from None  # type: ignore[operator]
        raise refuse(f"cannot be opened: {exc.strerror}") from None  # type: ignore[operator]


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False
