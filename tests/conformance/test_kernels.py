"""Our kernels (and the onnx.reference fallback for ops without one) give the expected outputs
of every ONNX backend node test case, within the case's rtol/atol.

Each case's graph is run node by node through ``onnxforge.kernels.run``; cases excluded in
``excluded_kernels.txt`` carry their reason, and an excluded case that passes fails the run.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from suites import node_cases

from onnxforge import kernels
from onnxforge.errors import KernelError
from onnxforge.io import from_proto
from onnxforge.ir import Graph, Tensor

EXCLUDED_FILE = Path(__file__).with_name("excluded_kernels.txt")


def _excluded() -> list[tuple[str, str]]:
    table = []
    for line in EXCLUDED_FILE.read_text().splitlines():
        pattern, _, reason = line.partition("#")
        if pattern.strip():
            table.append((pattern.strip(), reason.strip()))
    return table


def _feed(data: object) -> object:
    if isinstance(data, onnx.TensorProto):
        return onnx.numpy_helper.to_array(data)
    return data


def _run(case: object) -> list[object]:
    """The case's graph, node by node through our kernels."""
    model = from_proto(case.model)  # type: ignore[attr-defined]
    graph = model.graph
    opsets = dict(model.opset_imports)
    env: dict[object, object] = {}
    for value, data in zip(graph.inputs, case.data_sets[0][0], strict=False):  # type: ignore[attr-defined]
        env[value] = _feed(data)
    for value in graph.initializers:
        if isinstance(value.const, Tensor) and value not in env:
            env[value] = value.const.numpy()
    for op in graph.topo_order():
        if op.op_type == "Constant":
            attrs = {k: v for k, v in op.attrs.items()}
            ((name, attr),) = attrs.items()
            env[graph.outputs_of(op)[0]] = (
                attr.numpy() if isinstance(attr, Tensor) else np.array(attr)
            )
            continue
        if any(isinstance(a, Graph) for a in op.attrs.values()):
            raise KernelError("control flow")
        args = [None if v is None else env[v] for v in graph.inputs_of(op)]
        results = kernels.run(op, args, opsets)  # type: ignore[arg-type]
        for value, array in zip(graph.outputs_of(op), results, strict=False):
            if value is not None:
                env[value] = array
    return [env[v] for v in graph.outputs]


def _compare(case: object, got: list[object]) -> list[str]:
    problems = []
    expected = case.data_sets[0][1]  # type: ignore[attr-defined]
    for i, (stored, result) in enumerate(zip(expected, got, strict=False)):
        want = _feed(stored)
        if not isinstance(want, np.ndarray):
            continue  # sequences, optionals
        have = np.asarray(result)
        if have.shape != want.shape:
            problems.append(f"output {i}: shape {have.shape}, expected {want.shape}")
            continue
        if want.dtype.kind in "OUS":
            if not np.array_equal(have.astype(object), want.astype(object)):
                problems.append(f"output {i}: values differ")
            continue
        if have.dtype != want.dtype:
            problems.append(f"output {i}: dtype {have.dtype}, expected {want.dtype}")
            continue
        try:
            np.testing.assert_allclose(
                have.astype(np.float64) if want.dtype.kind == "V" else have,
                want.astype(np.float64) if want.dtype.kind == "V" else want,
                rtol=case.rtol,
                atol=case.atol,
                equal_nan=True,  # type: ignore[attr-defined]
            )
        except AssertionError as e:
            problems.append(f"output {i}: {str(e).strip().splitlines()[0]}")
    return problems


@pytest.mark.parametrize("name", sorted(node_cases()))
def test_kernels_give_the_expected_outputs(name: str) -> None:
    case = node_cases()[name]
    try:
        problems = _compare(case, _run(case))
    except KernelError as e:
        problems = [f"kernel error: {e}"]
    reason = next((r for p, r in _excluded() if re.fullmatch(p, name)), None)
    if reason is not None:
        if not problems:
            pytest.fail(f"{name} is excluded ({reason}) but passes: remove its line")
        pytest.skip(f"excluded: {reason}")
    assert not problems, "\n".join(problems)
