"""Pad conversion: paddings -> pads (2), attributes <-> inputs (11), axes (18)."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_pad_attributes_become_inputs_at_11_with_the_value_in_the_data_type() -> None:
    text = f"""{header(10)} g (float[N, 3] x) => (float[N, 6] y) {{
        y = Pad <pads = [0, 1, 0, 2], value = 1.5> (x) }}"""
    model = check_conversion(text, 11)
    (op,) = model.graph.ops
    assert op._inputs[1].const.numpy().tolist() == [0, 1, 0, 2]
    assert float(op._inputs[2].const.numpy()) == 1.5


def test_pad_reflect_mode_moves_pads_only() -> None:
    text = f"""{header(10)} g (float[N, 4] x) => (float[N, 6] y) {{
        y = Pad <mode = "reflect", pads = [0, 1, 0, 1]> (x) }}"""
    model = check_conversion(text, 13)
    assert len(model.graph.ops[0]._inputs) == 2


def test_pad_constant_inputs_become_attributes_at_10() -> None:
    text = f"""{header(13)} g (float[N, 3] x) => (float[N, 6] y) {{
        pads = Constant <value = int64[4] {{0, 1, 0, 2}}> ()
        v = Constant <value = float {{2.5}}> ()
        y = Pad (x, pads, v) }}"""
    model = check_conversion(text, 10)
    assert op_types(model) == ["Pad"]
    assert model.graph.ops[0].attrs["pads"] == [0, 1, 0, 2]
    assert model.graph.ops[0].attrs["value"] == 2.5


def test_pad_computed_pads_cannot_go_below_11() -> None:
    text = f"""{header(13)} g (float[N, 3] x, int64[4] pads) => (float[?, ?] y) {{
        y = Pad (x, pads) }}"""
    with pytest.raises(AdapterError, match="Pad.*pads is computed"):
        convert(model_from_text(text), 10)


def test_pad_axes_input_is_folded_into_pads_for_every_axis_at_17() -> None:
    text = f"""{header(18)} g (float[N, 3, 4] x) => (float[N, 3, 7] y) {{
        pads = Constant <value = int64[2] {{1, 2}}> ()
        axes = Constant <value = int64[1] {{-1}}> ()
        y = Pad (x, pads, , axes) }}"""
    model = check_conversion(text, 17)
    (pad,) = model.graph.ops
    assert len(pad._inputs) == 2
    assert pad._inputs[1].const.numpy().tolist() == [0, 0, 1, 0, 0, 2]


def test_pad_wrap_mode_is_written_out_with_slices_below_19() -> None:
    text = f"""{header(19)} g (float[2, 3, 4] x) => (float[4, 3, 7] y) {{
        pads = Constant <value = int64[6] {{1, 0, 2, 1, 0, 1}}> ()
        y = Pad <mode = "wrap"> (x, pads) }}"""
    model = check_conversion(text, 18)
    assert "Pad" not in op_types(model) and op_types(model).count("Concat") == 2
    check_conversion(text, 11)


def test_pad_wrap_mode_on_listed_axes_is_written_out_below_19() -> None:
    text = f"""{header(19)} g (float[N, 3] x) => (float[N, 6] y) {{
        pads = Constant <value = int64[2] {{1, 2}}> ()
        axes = Constant <value = int64[1] {{-1}}> ()
        y = Pad <mode = "wrap"> (x, pads, , axes) }}"""
    check_conversion(text, 18)


@pytest.mark.parametrize(("shape", "pads"), [("N, 3", "1, 0, 1, 0"), ("2, 3", "0, 4, 0, 0")])
def test_pad_wrap_mode_beyond_a_static_size_cannot_go_below_19(shape: str, pads: str) -> None:
    text = f"""{header(19)} g (float[{shape}] x) => (float[?, ?] y) {{
        pads = Constant <value = int64[4] {{{pads}}}> ()
        y = Pad <mode = "wrap"> (x, pads) }}"""
    with pytest.raises(AdapterError, match="mode='wrap' pads axis"):
        convert(model_from_text(text), 18)


def test_pad_paddings_of_opset_1_become_pads_and_back() -> None:
    text = f"""{header(1, 3)} g (float[2, 3] x) => (float[2, 6] y) {{
        y = Pad <paddings = [0, 1, 0, 2]> (x) }}"""
    model = check_conversion(text, 11)
    check_conversion(model, 1)
    assert model.graph.ops[0].attrs["paddings"] == [0, 1, 0, 2]


def test_pad_computed_pads_with_constant_axes_are_spread_over_every_axis_at_17() -> None:
    text = f"""{header(18)} g (float[N, 3, 4] x, int64[2] pads) => (float[?, ?, ?] y) {{
        axes = Constant <value = int64[1] {{1}}> ()
        y = Pad (x, pads, , axes) }}"""
    feeds = {
        "x": np.ones((2, 3, 4), np.float32),
        "pads": np.array([1, 2], np.int64),
    }
    model = check_conversion(text, 17, feeds=feeds)
    assert "Concat" in op_types(model)
