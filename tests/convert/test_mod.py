"""Mod at 28: floor modulus of floats (fmod=0) written with Mod-13's truncated one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge import ir
from onnxforge.io import to_proto
from onnxforge.ir import Model
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime

MOD = """g ({T}[N] a, {T}[N] b) => ({T}[N] y) {{ y = Mod <fmod = {F}> (a, b) }}"""

A = [5.0, -5.0, 5.0, -5.0, 0.0, -0.0, 6.0, 1.5, -1.5, np.inf, 3.0, np.nan, 4.0, -4.0, 2.0]
B = [3.0, 3.0, -3.0, -3.0, -2.0, 2.0, -3.0, np.inf, np.inf, 2.0, 0.0, 1.0, -np.inf, np.inf, 2.5]


def _converted(dtype: str, fmod: int, target: int) -> Model:
    """Mod-28 (onnxruntime does not load opset 28) converted to ``target`` and checked."""
    model = model_from_text(header(28, 11) + MOD.format(T=dtype, F=fmod))
    convert(model, target)
    ir.verify(model)
    onnx.checker.check_model(to_proto(model), full_check=True)
    return model


@pytest.mark.parametrize("dtype", ["float", "double", "float16"])
@pytest.mark.parametrize("target", [27, 13])
def test_mod_28_floor_modulus_of_floats_keeps_its_values_and_signs_below_28(
    dtype: str, target: int
) -> None:
    np_dtype = {"float": np.float32, "double": np.float64, "float16": np.float16}[dtype]
    feeds = {"a": np.array(A, dtype=np_dtype), "b": np.array(B, dtype=np_dtype)}
    model = _converted(dtype, 0, target)
    assert op_types(model).count("Mod") == 1
    if target > 26:
        return  # beyond onnxruntime; the 13 case runs the same graph
    with np.errstate(all="ignore"):
        want = np.mod(feeds["a"], feeds["b"])  # Python's floor modulus: Mod-28's fmod=0
    (got,) = run_onnxruntime(model, feeds)
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))  # zeros: B's sign


@pytest.mark.parametrize(("dtype", "fmod"), [("int32", 0), ("int32", 1), ("float", 1)])
def test_mod_28_integers_and_float_fmod_1_stay_one_node(dtype: str, fmod: int) -> None:
    assert op_types(_converted(dtype, fmod, 13)) == ["Mod"]


def test_mod_13_float_fmod_1_goes_up_unchanged() -> None:
    text = header(13) + MOD.format(T="float", F=1)
    assert op_types(check_conversion(text, 26, dims={"N": 4})) == ["Mod"]
