"""Reshape conversion: shape attribute <-> input (5), allowzero (14)."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_reshape_shape_input_becomes_the_attribute_below_5_and_back() -> None:
    text = f"""{header(13)} g (float[2, 3, 4] x) => (float[6, 4] y)
        <int64[2] s = {{-1, 4}}> {{ y = Reshape (x, s) }}"""
    model = model_from_text(text)
    convert(model, 4)
    assert op_types(model) == ["Reshape"] and model.graph.ops[0].attrs["shape"] == [-1, 4]
    assert not model.graph.initializers
    convert(model, 13)
    assert model.graph.ops[0]._inputs[1].const.numpy().tolist() == [-1, 4]


def test_reshape_computed_shape_cannot_go_below_5() -> None:
    text = f"""{header(13)} g (float[2, 3, 4] x, int64[2] s) => (float[?, ?] y) {{
        y = Reshape (x, s) }}"""
    with pytest.raises(AdapterError, match="Reshape.*computed at run time"):
        convert(model_from_text(text), 4)


def test_reshape_allowzero_without_zeros_goes_below_14() -> None:
    text = f"""{header(14)} g (float[N, 3, 4] x) => (float[N, 12] y) {{
        s = Constant <value = int64[2] {{-1, 12}}> ()
        y = Reshape <allowzero = 1> (x, s) }}"""
    model = check_conversion(text, 13)
    assert model.graph.ops[-1].attrs == {}


def test_reshape_allowzero_with_a_zero_is_refused_below_14() -> None:
    text = f"""{header(14)} g (float[0, 3] x) => (float[3, 0] y) {{
        s = Constant <value = int64[2] {{3, 0}}> ()
        y = Reshape <allowzero = 1> (x, s) }}"""
    with pytest.raises(AdapterError, match="allowzero"):
        convert(model_from_text(text), 13)


def test_reshape_allowzero_with_the_inputs_own_dims_goes_below_14() -> None:
    """As torch.export writes a view: Concat(Shape(x)[0:2], constants); a 0 in x's first two
    dims is copied as 0 without allowzero too."""
    text = f"""{header(18)} g (float[B, S, 8] x) => (float[B, S, 2, 4] y) {{
        head = Shape <start = 0, end = 2> (x)
        tail = Constant <value = int64[2] {{2, 4}}> ()
        s = Concat <axis = 0> (head, tail)
        y = Reshape <allowzero = 1> (x, s) }}"""
    model = check_conversion(text, 13, dims={"B": 2, "S": 3})
    assert model.graph.ops[-1].attrs == {}


@pytest.mark.parametrize("size", [3, 0])
def test_reshape_allowzero_with_another_tensors_dim_maps_its_zero_to_minus_one_below_14(
    size: int,
) -> None:
    """y's dim 0 is z's length, not x's: a 0 there must give an empty output, as -1 does."""
    text = f"""{header(18)} g (float[N, 8] x, float[M] z) => (float[?, 8] y) {{
        head = Shape (z)
        tail = Constant <value = int64[1] {{8}}> ()
        s = Concat <axis = 0> (head, tail)
        y = Reshape <allowzero = 1> (x, s) }}"""
    model = check_conversion(text, 13, dims={"N": size, "M": size})
    assert op_types(model)[-4:] == ["Equal", "And", "Where", "Reshape"]
    assert "allowzero" not in model.graph.ops[-1].attrs
