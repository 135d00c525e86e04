"""AveragePool/MaxPool at 22: ceil_mode's last window in the padding."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text

POOL = """g (float[1, 1, {H}, {H}] x) => (float[1, 1, ?, ?] y) {{
    y = {OP} <kernel_shape = [2, 2], strides = [2, 2], pads = [{P}, {P}, {P}, {P}],
              ceil_mode = 1> (x) }}"""


@pytest.mark.parametrize("op_type", ["AveragePool", "MaxPool"])
def test_pool_ceil_mode_without_a_window_in_the_padding_crosses_22(op_type: str) -> None:
    text = header(22) + POOL.format(H=5, P=0, OP=op_type)
    check_conversion(text, 21)
    check_conversion(header(19) + POOL.format(H=5, P=0, OP=op_type), 22)


@pytest.mark.parametrize("op_type", ["AveragePool", "MaxPool"])
def test_pool_ceil_mode_with_a_last_window_in_the_padding_cannot_cross_22(op_type: str) -> None:
    text = header(22) + POOL.format(H=5, P=1, OP=op_type)
    with pytest.raises(AdapterError, match="start in the padding"):
        convert(model_from_text(text), 21)
