"""One-node models and the check that inferred types are what onnxruntime computes: the inferred
shape of every output, evaluated at each binding of its symbolic dims, equals the shape of the
array onnxruntime returns, and the element types are equal. Shared by
tests/shape_infer/test_contrib.py and tests/shape_infer/test_quantized.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxforge.io import from_proto
from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate

RNG = np.random.default_rng(0)
B, S = "batch", "sequence"
SIZES: tuple[Mapping[str, int], ...] = (
    {B: 2, S: 3, "kv": 5, "past": 4},
    {B: 1, S: 5, "kv": 7, "past": 6},
)
"""Two bindings of the symbolic dims: each inferred shape is checked at both."""


def weight(*shape: int, dtype: type = np.float32) -> np.ndarray:
    """A small random initializer (8-bit types over their whole range)."""
    if dtype is np.uint8:
        return RNG.integers(0, 255, shape).astype(np.uint8)
    if dtype is np.int8:
        return RNG.integers(-128, 127, shape).astype(np.int8)
    return (RNG.standard_normal(shape) * 0.1).astype(dtype)


def node_model(
    op_type: str,
    inputs: Sequence[object],
    attrs: Mapping[str, object],
    n_out: int,
    *,
    domain: str = "com.microsoft",
    opset: int = 14,
) -> onnx.ModelProto:
    """A model of one node. ``inputs``: (name, elem type, dims) for a graph input, an array for
    an initializer, a string for an omitted optional input. Outputs are declared untyped."""
    names, graph_inputs, inits = [], [], []
    for i, spec in enumerate(inputs):
        if isinstance(spec, str):  # an omitted optional input
            names.append("")
            continue
        if isinstance(spec, tuple):
            name, dtype, dims = spec
            graph_inputs.append(helper.make_tensor_value_info(name, dtype, dims))
        else:
            name = f"w{i}"
            inits.append(numpy_helper.from_array(np.asarray(spec), name))
        names.append(name)
    outputs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, names, outputs, domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "g", graph_inputs, [onnx.ValueInfoProto(name=o) for o in outputs], inits
    )
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


def random_feeds(model: onnx.ModelProto, bindings: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Inputs of the sizes ``bindings`` give; integers are 0 or 1 (valid ids and positions)."""
    feeds = {}
    for vi in model.graph.input:
        dims = [bindings.get(d.dim_param, d.dim_value) for d in vi.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        feeds[vi.name] = (
            RNG.integers(0, min(2, *dims), dims).astype(dtype)  # position ids < sequence
            if dtype.kind in "iu"
            else RNG.standard_normal(dims).astype(dtype)
        )
    return feeds


def check_against_onnxruntime(
    model: onnx.ModelProto, sizes: Sequence[Mapping[str, int]] = SIZES
) -> None:
    """Infer ``model``'s graph outputs, run it in onnxruntime at each binding of ``sizes`` and
    assert that every output's inferred element type and shape are what onnxruntime returns."""
    import onnxruntime as ort  # noqa: PLC0415  (the callers skip without it)

    ours = from_proto(model)
    report = infer(ours)
    assert not report.errors, report.errors
    types = {v.name: v.type for v in ours.graph.outputs}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for bindings in sizes:
        names = [o.name for o in session.get_outputs()]
        arrays = session.run(names, random_feeds(model, bindings))
        for name, array in zip(names, arrays, strict=True):
            t = types[name]
            assert isinstance(t, TensorType) and t.shape is not None, (name, t)
            assert helper.np_dtype_to_tensor_dtype(array.dtype) == t.dtype, (name, t)
            assert [evaluate(d, bindings) for d in t.shape] == list(array.shape), (
                name,
                t,
                bindings,
            )
