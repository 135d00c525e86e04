"""Our inferred output types equal the expected outputs of every ONNX backend node test case.

Two ways: as the suite ships (inputs are graph inputs: a case whose output shape depends on an
input's values is listed in ``excluded.txt`` with its reason), and with every input's data given
as an initializer, where shapes depend only on constants and every case must match.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from suites import node_cases

from onnxforge.io import from_proto
from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer

EXCLUDED_FILE = Path(__file__).with_name("excluded.txt")


def _excluded() -> list[tuple[str, str, str]]:
    """``mode  pattern  # reason`` lines; mode is "inputs" (as shipped) or "always"."""
    table = []
    for line in EXCLUDED_FILE.read_text().splitlines():
        entry, _, reason = line.partition("#")
        if entry.strip():
            mode, pattern = entry.split()
            table.append((mode, pattern, reason.strip()))
    return table


def _exclusion(name: str, *, inputs_as_constants: bool) -> str | None:
    for mode, pattern, reason in _excluded():
        if (mode == "always" or not inputs_as_constants) and re.fullmatch(pattern, name):
            return reason
    return None


def _check(name: str, *, inputs_as_constants: bool) -> None:
    problems = _mismatches(node_cases()[name], inputs_as_constants=inputs_as_constants)
    reason = _exclusion(name, inputs_as_constants=inputs_as_constants)
    if reason is not None:
        if not problems:
            pytest.fail(f"{name} is excluded ({reason}) but matches: remove its line")
        pytest.skip(f"excluded: {reason}")
    assert not problems, "\n".join(problems)


def _stripped(case: object, *, inputs_as_constants: bool) -> onnx.ModelProto:
    """The case's model without any declared type but the graph inputs'."""
    proto = onnx.ModelProto()
    proto.CopyFrom(case.model)  # type: ignore[attr-defined]
    graph = proto.graph
    del graph.value_info[:]
    for output in graph.output:
        output.type.Clear()
    if inputs_as_constants:
        feeds = case.data_sets[0][0]  # type: ignore[attr-defined]
        keep = []
        for value_info, data in zip(list(graph.input), feeds, strict=False):
            if isinstance(data, onnx.TensorProto):  # dtypes numpy lacks come as protos
                tensor = onnx.TensorProto()
                tensor.CopyFrom(data)
                tensor.name = value_info.name
                graph.initializer.append(tensor)
            elif not isinstance(data, list | dict) and value_info.type.HasField("tensor_type"):
                array = np.asarray(data)
                graph.initializer.append(numpy_helper.from_array(array, value_info.name))
            else:
                keep.append(value_info)
        del graph.input[:]
        graph.input.extend(keep)
    return proto


def _mismatches(case: object, *, inputs_as_constants: bool) -> list[str]:
    model = from_proto(_stripped(case, inputs_as_constants=inputs_as_constants))
    report = infer(model)
    found = [f"error: {e}" for e in report.errors]
    expected = case.data_sets[0][1]  # type: ignore[attr-defined]
    for value, array in zip(model.graph.outputs, expected, strict=False):
        if not isinstance(array, np.ndarray):
            continue  # sequences, maps, optionals: not tensors
        t = value.type
        want = f"{helper.np_dtype_to_tensor_dtype(array.dtype)}{list(array.shape)}"
        got = (
            f"{t.dtype}{list(t.shape)}"
            if isinstance(t, TensorType) and t.shape is not None
            else str(t)
        )
        if got != want:
            found.append(f"{value.name}: inferred {t}, expected {array.dtype}{list(array.shape)}")
    return found


@pytest.mark.parametrize("name", sorted(node_cases()))
def test_node_case_outputs_match_inferred_types(name: str) -> None:
    _check(name, inputs_as_constants=False)


@pytest.mark.parametrize("name", sorted(node_cases()))
def test_node_case_outputs_match_with_inputs_as_constants(name: str) -> None:
    _check(name, inputs_as_constants=True)
