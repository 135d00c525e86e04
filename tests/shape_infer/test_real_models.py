"""Inference on real models: every value of the main graph gets a shape, and the shapes that
onnxruntime computes on concrete inputs never contradict ours.

Models: the zoo models shipped in onnx's wheel; small transformers exported here when torch and
transformers are importable; and every model under ``ONNXFORGE_EXPORT_DIR`` (the output of
``shared/tools/export_models.py``) smaller than 200 MB. Each model's value_info and graph-output
shapes are stripped first, so the shapes are inferred, not copied.

onnxruntime (CPU, graph optimizations off) runs the original model with every intermediate value
of the main graph added as a graph output, on random inputs whose dynamic dims are concrete
(batch 2, sequence 5) and bound to the inputs' dim symbols. For every tensor it returns, our
rank and static dims must equal its; a symbolic dim must evaluate to its size, and dims that
cannot be evaluated (fresh ``unk__`` names, expressions over them) are bound on first sight, so
the same unknown must have the same size everywhere in the model. Each assumption inference
reported must hold for the sizes of the run wherever both sides evaluate.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from suites import LIGHT_MODELS

from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError
from onnxforge.io import load
from onnxforge.ir import Dim, Model, OpaqueType, TensorType, Value
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate, parse
from onnxforge.testing import every_value_exposed

ort = pytest.importorskip("onnxruntime")

EXPORT_DIR = os.environ.get("ONNXFORGE_EXPORT_DIR")
MAX_EXPORTED_BYTES = 200 * 10**6
DYNAMIC_SIZES = {0: 2, 1: 5}
"""Size of a dynamic input dim by axis (batch 2, sequence 5); other axes get 3."""
OTHER_SIZE = 3
HAVE_TORCH = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
RELATIONS = {"==": int.__eq__, "<=": int.__le__, ">=": int.__ge__}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")


# -- the models ---------------------------------------------------------------------------------
def _model_bytes(path: Path) -> int:
    """The file's size plus that of the external-data files it names."""
    proto = onnx.load(path, load_external_data=False)
    files = {path}
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                files.add(path.parent / entry.value)
    return sum(f.stat().st_size for f in files if f.exists())


def _exported() -> list[Path]:
    if not EXPORT_DIR or not Path(EXPORT_DIR).is_dir():
        return []
    return sorted(Path(EXPORT_DIR).glob("*.onnx")) + sorted(Path(EXPORT_DIR).glob("*/*.onnx"))


# Tiny transformers exported by the test itself: (exporter, opset). Vocabularies are small and
# input ids are 0 or 1, so every id is valid.
GENERATED = {
    "bert_legacy_op13_dyn": ("legacy", 13),
    "gpt2_legacy_op14_dyn": ("legacy", 14),
    "t5_encoder_legacy_op13_dyn": ("legacy", 13),
    "llama_dynamo18_dyn": ("dynamo", 18),
}


def _tiny_transformer(name: str) -> tuple[object, list[str]]:
    """The module (random weights) and its input names; forward takes ids and masks."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    attn = "eager" if GENERATED[name][0] == "legacy" else "sdpa"
    common = {"vocab_size": 100, "attn_implementation": attn, "bos_token_id": 0}
    common |= {"eos_token_id": 0, "pad_token_id": 0}
    names = ["input_ids", "attention_mask"]
    if name.startswith("bert"):
        config = tf.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            **common,
        )  # fmt: skip
        model: torch.nn.Module = tf.BertModel(config)
        names.append("token_type_ids")
    elif name.startswith("gpt2"):
        config = tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, use_cache=False, **common)
        model = tf.GPT2LMHeadModel(config)
    elif name.startswith("t5"):
        config = tf.T5Config(
            d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, use_cache=False, **common
        )
        model = tf.T5EncoderModel(config)
    else:
        config = tf.LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, use_cache=False, **common,
        )  # fmt: skip
        model = tf.LlamaForCausalLM(config)

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model.eval()

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, args, strict=True)), return_dict=True)[0]

    return Wrapped().eval(), names


def _export_tiny(name: str, path: Path) -> None:
    import torch

    exporter, opset = GENERATED[name]
    module, names = _tiny_transformer(name)
    args = tuple(torch.ones(2, 7, dtype=torch.long) for _ in names)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        if exporter == "legacy":
            torch.onnx.export(
                module, args, str(path), dynamo=False, opset_version=opset, input_names=names,
                output_names=["out"], dynamic_axes={n: {0: "batch", 1: "seq"} for n in names},
            )  # fmt: skip
        else:
            from torch.export import Dim as TorchDim

            shapes = ({0: TorchDim.AUTO, 1: TorchDim.AUTO},) * len(names)
            program = torch.onnx.export(
                module, args, dynamo=True, opset_version=opset, input_names=names,
                output_names=["out"], dynamic_shapes=(shapes,), verbose=False,
            )  # fmt: skip
            program.save(str(path))


@pytest.fixture(scope="session")
def generated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exported")


# -- one model's analysis -----------------------------------------------------------------------
@dataclass
class Analysis:
    """What inference and onnxruntime said about one model (all messages, for the failures)."""

    missing: dict[str, list[str]] = field(default_factory=dict)
    """Op (``Dropout-7``) -> names of the main-graph values it produced without a shape."""
    errors: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    violated: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    compared: int = 0
    """Values whose shape was compared with onnxruntime's."""
    unbound: int = 0
    """Assumptions with a side that no concrete size could be given to."""


def _strip(model: Model) -> None:
    """Forget every declared type but the graph inputs' and initializers' (graph outputs keep
    their element type): value_info is gone, inference has to find the shapes."""
    for graph in model.graphs():
        outputs = set(graph.outputs)
        for value in graph.values():
            home = value.graph
            if home is not graph or value.const is not None or value in home.inputs:
                continue
            if value in outputs and isinstance(value.type, TensorType):
                value.type = TensorType(value.type.dtype, None)
            elif not isinstance(value.type, OpaqueType):
                value.type = None


def _op_label(model: Model, value: Value) -> str:
    op = value.graph.producer(value) if value.graph is not None else None
    if op is None:
        return "(graph input)" if value in model.graph.inputs else "(no producer)"
    label = f"{op.domain}::{op.op_type}" if op.domain not in ("", "ai.onnx") else op.op_type
    try:
        return f"{label}-{schemas.since_version(op.op_type, model.opset(op.domain), op.domain)}"
    except OnnxForgeError:
        return label


def _feeds(proto: onnx.ModelProto) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Random inputs (declared static dims kept, dynamic ones by axis) and the sizes given to
    the inputs' dim symbols."""
    rng = np.random.default_rng(0)
    initializers = {t.name for t in proto.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    bindings: dict[str, int] = {}
    for value_info in proto.graph.input:
        if value_info.name in initializers:
            continue  # IR < 4 lists initializers as inputs too
        tensor_type = value_info.type.tensor_type
        shape = []
        for axis, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                shape.append(dim.dim_value)
                continue
            size = bindings.get(dim.dim_param, DYNAMIC_SIZES.get(axis, OTHER_SIZE))
            if dim.dim_param:
                bindings[dim.dim_param] = size
            shape.append(size)
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if dtype.kind in "iu":  # ids, masks, token types, counts: 0 and 1 are valid for all
            feeds[value_info.name] = rng.integers(0, 2, shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[value_info.name] = np.ones(shape, dtype=dtype)
        else:
            feeds[value_info.name] = rng.standard_normal(shape).astype(dtype)
    return feeds, bindings


def _observed(
    proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
) -> dict[str, tuple[int, ...]]:
    """Shape of every tensor of the main graph in onnxruntime's run (sequences left out)."""
    proto = every_value_exposed(proto)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, dict(feeds))
    return {n: r.shape for n, r in zip(names, results, strict=True) if isinstance(r, np.ndarray)}


def _single_symbol(dim: str) -> bool:
    """A lone name (``unk__3``, ``seq``), not an expression nor a ``floor(N/2)`` atom."""
    terms = parse(dim).terms
    return list(terms.items()) == [((dim,), 1)] and _NAME.fullmatch(dim) is not None


def _compare(
    typed: Mapping[str, TensorType],
    observed: Mapping[str, tuple[int, ...]],
    bindings: dict[str, int],
) -> tuple[list[str], dict[str, int]]:
    """Disagreements between our shapes and onnxruntime's; ``bindings`` gains a size for each
    symbol that nothing else gave one (fresh unknowns), first seen first bound. Returns the
    sizes given to dims that still cannot be evaluated (expressions over unbound names)."""
    found: list[str] = []
    pairs: list[tuple[str, tuple[Dim, ...], tuple[int, ...]]] = []
    for name, theirs in observed.items():
        ours = typed[name].shape if name in typed else None
        if ours is None:
            continue  # no claim (the other test lists values without a shape)
        if len(ours) != len(theirs):
            found.append(f"{name}: ours {_fmt(ours)}, onnxruntime {list(theirs)} (ranks differ)")
        else:
            pairs.append((name, ours, theirs))
    source = {name: "the inputs" for name in bindings}
    for name, ours, theirs in pairs:  # first, every lone symbol without a size gets one
        for dim, size in zip(ours, theirs, strict=True):
            if isinstance(dim, str) and dim not in bindings and _single_symbol(dim):
                bindings[dim], source[dim] = size, name
    opaque: dict[str, int] = {}
    for name, ours, theirs in pairs:
        for axis, (dim, size) in enumerate(zip(ours, theirs, strict=True)):
            if dim is None:
                continue  # no claim
            value = evaluate(dim, bindings)
            if value is None:
                value = opaque.setdefault(str(dim), size)
                source.setdefault(str(dim), name)
            if value != size:
                where = f"{name}: ours {_fmt(ours)}, onnxruntime {list(theirs)} (dim {axis}: "
                given = _given(dim, bindings, opaque, source)
                found.append(where + f"{dim} = {value} given {given}, not {size})")
    return found, opaque


def _given(
    dim: Dim, bindings: Mapping[str, int], opaque: Mapping[str, int], source: Mapping[str, str]
) -> str:
    """Where the sizes a dim was evaluated with came from."""
    if not isinstance(dim, str):
        return "nothing"
    if dim in opaque:
        return f"{dim}={opaque[dim]} from {source[dim]}"
    atoms = sorted({a for m in parse(dim).terms for a in m} & bindings.keys())
    return ", ".join(f"{a}={bindings[a]} from {source.get(a, '?')}" for a in atoms) or "nothing"


def _size(dim: Dim, bindings: Mapping[str, int], opaque: Mapping[str, int]) -> int | None:
    size = evaluate(dim, bindings)
    return opaque.get(str(dim)) if size is None else size


def _fmt(shape: tuple[Dim, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


@functools.cache
def analyse(source: Path) -> Analysis:
    """Infer the stripped model, run onnxruntime on the original, compare (cached: two tests
    read each model's analysis)."""
    result = Analysis()
    model = load(source)
    _strip(model)
    report = infer(model)
    result.errors = [str(e) for e in report.errors]
    result.assumptions = [str(a) for a in report.assumptions]
    missing: defaultdict[str, list[str]] = defaultdict(list)
    typed: dict[str, TensorType] = {}
    not_tensors: dict[str, str] = {}
    for value in model.graph.values():
        if value.graph is not model.graph or value.const is not None:
            continue
        if isinstance(value.type, OpaqueType):
            not_tensors[value.name] = str(value.type)  # sequences, maps, optionals: not tensors
            continue
        if isinstance(value.type, TensorType) and value.type.shape is not None:
            typed[value.name] = value.type
        else:
            missing[_op_label(model, value)].append(value.name)
            typed[value.name] = TensorType(0, None)
    result.missing = dict(missing)

    proto = onnx.load(source)
    feeds, bindings = _feeds(proto)
    observed = _observed(proto, feeds)
    for name in sorted(observed.keys() - typed.keys() - feeds.keys()):
        kind = not_tensors.get(name)
        ours = f"ours is a {kind}" if kind else "our model has no such value"
        result.disagreements.append(f"{name}: onnxruntime returns a tensor, {ours}")
    result.compared = len(observed.keys() & typed.keys())
    found, opaque = _compare(typed, observed, bindings)
    result.disagreements += found
    for assumption in report.assumptions:
        a, b = (_size(d, bindings, opaque) for d in (assumption.a, assumption.b))
        if a is None or b is None:
            result.unbound += 1
        elif not RELATIONS[assumption.relation](a, b):
            result.violated.append(f"{assumption}: {a} {assumption.relation} {b}")
    return result


def _check_shapes(source: Path) -> None:
    result = analyse(source)
    print(f"{source.stem}: {sum(map(len, result.missing.values()))} values without a shape")
    if result.missing:
        missing = sorted(result.missing.items())
        lines = [f"{op} ({len(names)}): {', '.join(names[:8])}" for op, names in missing]
        errors = [f"inference error: {e}" for e in result.errors]
        pytest.fail(
            "main-graph values without a shape, by the op producing them:\n  "
            + "\n  ".join(lines + errors)
        )


def _check_onnxruntime(source: Path) -> None:
    result = analyse(source)
    print(
        f"{source.stem}: {result.compared} values compared with onnxruntime, "
        f"{len(result.assumptions)} assumptions ({result.unbound} with an unbound side)"
    )
    for assumption in result.assumptions:
        print(f"  assumption: {assumption}")
    problems = [f"inference error on a model onnxruntime runs: {e}" for e in result.errors]
    problems += result.disagreements
    problems += [f"assumption violated by the run: {v}" for v in result.violated]
    assert not problems, "\n".join(problems)


# -- the comparison itself (the real models may leave some of its paths unused) ------------------
def test_comparison_binds_each_unknown_once_and_evaluates_expressions_with_it() -> None:
    f32 = 1
    typed = {
        "a": TensorType(f32, ("N", "unk__0", 4)),
        "b": TensorType(f32, ("N+1", "2*unk__0", "ceil(N/3)")),
        "c": TensorType(f32, ("unk__0*unk__1", "unk__1")),
    }
    observed = {"a": (7, 5, 4), "b": (8, 10, 3), "c": (15, 3)}
    bindings = {"N": 7}
    assert _compare(typed, observed, bindings) == ([], {})
    assert bindings == {"N": 7, "unk__0": 5, "unk__1": 3}


def test_comparison_reports_an_unknown_with_two_sizes_a_wrong_expression_and_a_rank() -> None:
    f32 = 1
    typed = {
        "a": TensorType(f32, ("unk__0", 4)),
        "b": TensorType(f32, ("unk__0", "N+1")),
        "c": TensorType(f32, ("N",)),
    }
    observed = {"a": (2, 4), "b": (3, 6), "c": (7, 1)}
    found, _ = _compare(typed, observed, {"N": 7})
    assert found == [
        "c: ours [N], onnxruntime [7, 1] (ranks differ)",
        "b: ours [unk__0, N+1], onnxruntime [3, 6] (dim 0: unk__0 = 2 given unk__0=2 from a, "
        "not 3)",
        "b: ours [unk__0, N+1], onnxruntime [3, 6] (dim 1: N+1 = 8 given N=7 from the inputs, "
        "not 6)",
    ]


# -- zoo models ---------------------------------------------------------------------------------
@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_zoo_model_every_main_graph_value_gets_a_shape(source: Path) -> None:
    _check_shapes(source)


@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_zoo_model_shapes_agree_with_onnxruntime(source: Path) -> None:
    _check_onnxruntime(source)


# -- transformers exported here (torch + transformers) ------------------------------------------
def _generated(name: str, folder: Path) -> Path:
    if not HAVE_TORCH:
        pytest.skip("torch and transformers are not importable: no models exported here")
    if GENERATED[name][0] == "dynamo" and importlib.util.find_spec("onnxscript") is None:
        pytest.skip("the dynamo exporter needs onnxscript")
    path = folder / f"{name}.onnx"
    if not path.exists():
        _export_tiny(name, path)
    return path


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_transformer_every_main_graph_value_gets_a_shape(
    name: str, generated_dir: Path
) -> None:
    _check_shapes(_generated(name, generated_dir))


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_transformer_shapes_agree_with_onnxruntime(
    name: str, generated_dir: Path
) -> None:
    _check_onnxruntime(_generated(name, generated_dir))


# -- models under ONNXFORGE_EXPORT_DIR ----------------------------------------------------------
def _exported_source(source: Path | None) -> Path:
    if source is None:
        pytest.skip(
            "ONNXFORGE_EXPORT_DIR is unset or holds no model: set it to the output of "
            "shared/tools/export_models.py"
        )
    size = _model_bytes(source)
    if size >= MAX_EXPORTED_BYTES:
        pytest.skip(f"over 200 MB: {source.stem} ({size / 1e6:.0f} MB with its data)")
    return source


EXPORTED: list[Path | None] = [*_exported()] or [None]
EXPORTED_IDS = [p.stem if p else "none" for p in EXPORTED]


@pytest.mark.parametrize("source", EXPORTED, ids=EXPORTED_IDS)
def test_exported_model_every_main_graph_value_gets_a_shape(source: Path | None) -> None:
    _check_shapes(_exported_source(source))


@pytest.mark.parametrize("source", EXPORTED, ids=EXPORTED_IDS)
def test_exported_model_shapes_agree_with_onnxruntime(source: Path | None) -> None:
    _check_onnxruntime(_exported_source(source))
