"""The guard on every write: never publish a model onnx's checker refuses when it took the input.

onnx's ``check_model(full_check=True)`` runs its strict shape inference, which is what
onnxruntime runs when it loads a model: a Loop body whose declared counter types no longer
match its outer values fails both. The result is checked first (the usual case passes, and
the input is never read again); only when it fails is the input checked, and a failure
there means the command did not make the model worse, so it is written as before.
"""

from __future__ import annotations

__all__ = [
    "CHECK_WEIGHT_BYTES",
    "NODES_PER_WEIGHT_MIB",
    "Guard",
    "checker_message",
    "checkable_proto",
]

import logging
import os
from collections.abc import Callable
from pathlib import Path

import onnx

from onnxforge.errors import UnsafeOutputError
from onnxforge.io._convert import EmbedSink, TensorSink, model_to_proto
from onnxforge.ir import Model, Tensor

logger = logging.getLogger(__name__)

CHECK_WEIGHT_BYTES = 4096
"""Main-graph initializers from this size on are checked as graph inputs of their type: shape
inference reads the values of small constants (a Reshape's shape), never of weights, and the
check then copies no weight bytes."""


NODES_PER_WEIGHT_MIB = 128
"""Which copy of a written model the checker reads: onnx parses a file at about 8 ms per MiB
(an 80 MiB CRAFT model: 0.85 s to check by path), and a weight-free proto is built at about
60 us per node (the 100k-node blocks: 5.9 s, against 3.4 s by path), so a model with fewer
nodes than this times its MiB of weights is checked as the weight-free proto (0.05 s there)."""


class _TypesOnlySink(TensorSink):
    """Embeds small tensors; leaves the data of large main-graph initializers out."""

    def __init__(self) -> None:
        self.embed = EmbedSink()
        self.left_out: set[int] = set()

    def place(self, tensor: Tensor, out: onnx.TensorProto, *, initializer: int | None) -> None:
        if initializer is not None and tensor.nbytes >= CHECK_WEIGHT_BYTES:
            self.left_out.add(initializer)
            return
        self.embed.place(tensor, out, initializer=initializer)

    def moves(self, tensor: Tensor, initializer: int | None) -> bool:
        return initializer is not None and tensor.nbytes >= CHECK_WEIGHT_BYTES


def checkable_proto(model: Model) -> onnx.ModelProto:
    """``model`` as a ModelProto for the checker: its weights become graph inputs of their
    type (a copy of the structure, not of the weight bytes)."""
    sink = _TypesOnlySink()
    proto = model_to_proto(model, sink)
    graph = proto.graph
    if not sink.left_out:
        return proto
    inputs = {vi.name for vi in graph.input}
    kept = []
    for i, tensor in enumerate(graph.initializer):
        if i not in sink.left_out:
            kept.append(tensor)
            continue
        if tensor.name not in inputs:
            graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            )
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return proto


def checker_message(source: onnx.ModelProto | str | os.PathLike[str]) -> str | None:
    """onnx's full check of a model (a proto, or a file: parsed in C++, external data never
    read): its complaint as one line, or None when it accepts the model."""
    if not isinstance(source, onnx.ModelProto):
        source = os.fspath(source)
    try:
        onnx.checker.check_model(source, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        text = str(exc)
    except UnicodeDecodeError as exc:  # the checker quoted a name that is not UTF-8
        text = bytes(exc.object).decode("utf-8", errors="backslashreplace")
    else:
        return None
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


class Guard:
    """Refuses a result that fails onnx's full check where the input (the file ``source``)
    passes it. ``name`` is what messages call the input; ``culprit`` is asked, only when the
    result fails, for the pass whose change broke it (None: not known)."""

    def __init__(self, source: Path, name: str | None = None) -> None:
        self.source = source
        self.name = name or str(source)
        self.culprit: Callable[[], str | None] | None = None
        self.input_message: str | None = None
        self.checked_input = False

    def input_passes(self) -> bool:
        if not self.checked_input:
            self.input_message = checker_message(self.source)
            self.checked_input = True
        return self.input_message is None

    def check(self, model: Model, output: str) -> None:
        """Raise UnsafeOutputError when ``model`` must not be published at ``output``."""
        try:
            proto = checkable_proto(model)
        except ValueError:  # over protobuf's limit even without weights: not checkable here
            logger.info("%s: the result is too large for onnx's checker; not checked", output)
            return
        self.judge(checker_message(proto), output)

    def check_written(
        self, model: Model, written: str | os.PathLike[str], output: str, *, external: bool
    ) -> None:
        """Check ``model``, just written to ``written`` for ``output``, from whichever copy is
        cheaper (NODES_PER_WEIGHT_MIB); a model with external data always from the proto, since
        its data file is not yet where the written model names it."""
        weights = sum(
            v.const.nbytes for v in model.graph.initializers if isinstance(v.const, Tensor)
        )
        nodes = sum(len(graph._ops) for graph in model.graphs())
        if external or nodes < NODES_PER_WEIGHT_MIB * weights / 2**20:
            self.check(model, output)
        else:
            self.check_file(written, output)

    def check_file(self, written: str | os.PathLike[str], output: str) -> None:
        """Like ``check``, for a model already written (with embedded weights) to the file
        ``written``: onnx parses it in C++, which costs a fraction of building a proto of a
        large graph in Python (5.9 s of 100,000 nodes against 0.3 s)."""
        self.judge(checker_message(written), output)

    def judge(self, message: str | None, output: str) -> None:
        if message is None or not self.input_passes():
            return
        by = self.culprit() if self.culprit is not None else None
        change = f" after pass {by}" if by else ""
        raise UnsafeOutputError(
            f"{self.name}: refusing to write {output}: onnx's checker accepts the input but "
            f"not the result{change}: {message}; nothing written"
        )
