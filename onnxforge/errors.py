"""The onnxforge error family: every failure a user can see is one of these."""

from __future__ import annotations

__all__ = [
    "AdapterError",
    "InvalidModelError",
    "KernelError",
    "ModelReadError",
    "OnnxForgeError",
    "OutputError",
    "PassError",
    "PostconditionError",
    "PreconditionError",
    "ShapeError",
    "UnsafeExternalDataError",
    "UnsafeOutputError",
]


class OnnxForgeError(Exception):
    """Base of all onnxforge errors; the CLI prints the message and exits 1."""

    exit_code = 1


class ModelReadError(OnnxForgeError):
    """The input cannot be read as an ONNX model (missing, a folder, not protobuf, truncated).

    The CLI exits 2 for these: the input, not the model, is the problem.
    """

    exit_code = 2

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class UnsafeExternalDataError(ModelReadError):
    """An external-data reference that would read or write outside the model's folder."""


class OutputError(OnnxForgeError):
    """The output cannot be written where it was asked for (a folder, a block device, a
    socket, a terminal, external data beside a stream), found before any work.

    The CLI exits 2 for these: the command line, not the model, is the problem.
    """

    exit_code = 2


class UnsafeOutputError(OnnxForgeError):
    """The result fails onnx's full check where the input passed it: nothing is written."""


class InvalidModelError(OnnxForgeError):
    """The model reads, but breaks the graph's invariants; `problems` lists each one."""

    def __init__(self, problems: list[str], *, where: str = "") -> None:
        self.problems = list(problems)
        self.where = where
        prefix = f"{where}: " if where else ""
        super().__init__("\n".join(prefix + p for p in self.problems) or f"{where}: invalid model")


class ShapeError(OnnxForgeError):
    """Shapes that contradict an op's rule; the message names the op and the numbers."""


class KernelError(OnnxForgeError):
    """A kernel could not compute an op on the given constant inputs."""


class AdapterError(OnnxForgeError):
    """An op cannot be converted between two opset versions."""


class PassError(OnnxForgeError):
    """A pass failed; the message names the pass and the passes that ran before it."""


class PreconditionError(PassError):
    """A pass was given a model it cannot work on."""


class PostconditionError(PassError):
    """A pass left the model in a state it promised not to."""
