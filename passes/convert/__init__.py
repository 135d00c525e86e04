"""Version conversion (onnxforge.passes.convert): the convert-opset pass and its adapters,
one module per op; generic kinds of adapter in _kinds.py."""

from __future__ import annotations

__all__ = [
    "DOWNGRADES",
    "UPGRADES",
    "ConvertContext",
    "ConvertOpsetPass",
    "PlannedStep",
    "adapter",
    "convert",
    "find_adapter",
]

from onnxforge.passes.convert import attributes as _attributes  # noqa: E402, F401
from onnxforge.passes.convert import axis as _axis  # noqa: E402, F401
from onnxforge.passes.convert import batch_norm as _batch_norm  # noqa: E402, F401
from onnxforge.passes.convert import cast as _cast  # noqa: E402, F401
from onnxforge.passes.convert import clip as _clip  # noqa: E402, F401
from onnxforge.passes.convert import concat as _concat  # noqa: E402, F401
from onnxforge.passes.convert import constant as _constant  # noqa: E402, F401
from onnxforge.passes.convert import decompose as _decompose  # noqa: E402, F401
from onnxforge.passes.convert import dft as _dft  # noqa: E402, F401
from onnxforge.passes.convert import dropout as _dropout  # noqa: E402, F401
from onnxforge.passes.convert import gemm as _gemm  # noqa: E402, F401
from onnxforge.passes.convert import grid_sample as _grid_sample  # noqa: E402, F401
from onnxforge.passes.convert import group_norm as _group_norm  # noqa: E402, F401
from onnxforge.passes.convert import layer_norm as _layer_norm  # noqa: E402, F401
from onnxforge.passes.convert import legacy_broadcast as _legacy_broadcast  # noqa: E402, F401
from onnxforge.passes.convert import lp_pool as _lp_pool  # noqa: E402, F401
from onnxforge.passes.convert import mod as _mod  # noqa: E402, F401
from onnxforge.passes.convert import one_hot as _one_hot  # noqa: E402, F401
from onnxforge.passes.convert import pad as _pad  # noqa: E402, F401
from onnxforge.passes.convert import pool as _pool  # noqa: E402, F401
from onnxforge.passes.convert import quantize as _quantize  # noqa: E402, F401
from onnxforge.passes.convert import reduce as _reduce  # noqa: E402, F401
from onnxforge.passes.convert import reshape as _reshape  # noqa: E402, F401
from onnxforge.passes.convert import resize as _resize  # noqa: E402, F401
from onnxforge.passes.convert import rnn as _rnn  # noqa: E402, F401
from onnxforge.passes.convert import roi_align as _roi_align  # noqa: E402, F401
from onnxforge.passes.convert import scan as _scan  # noqa: E402, F401
from onnxforge.passes.convert import scatter as _scatter  # noqa: E402, F401
from onnxforge.passes.convert import shape as _shape  # noqa: E402, F401
from onnxforge.passes.convert import slice as _slice  # noqa: E402, F401
from onnxforge.passes.convert import softmax as _softmax  # noqa: E402, F401

# Adapter modules, imported for their registrations.
from onnxforge.passes.convert import split as _split  # noqa: E402, F401
from onnxforge.passes.convert import squeeze as _squeeze  # noqa: E402, F401
from onnxforge.passes.convert import sub as _sub  # noqa: E402, F401
from onnxforge.passes.convert import tile as _tile  # noqa: E402, F401
from onnxforge.passes.convert import topk as _topk  # noqa: E402, F401
from onnxforge.passes.convert import variadic as _variadic  # noqa: E402, F401
from onnxforge.passes.convert._converter import ConvertOpsetPass, PlannedStep, convert
from onnxforge.passes.convert._registry import (
    DOWNGRADES,
    UPGRADES,
    ConvertContext,
    adapter,
    find_adapter,
)
