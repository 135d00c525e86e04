"""The exporter corpus, judged by onnxruntime: every model it runs is accepted by infer, fold,
convert --opset 13/18/21 and optimize; every shape onnxforge infers is what onnxruntime
computes at two sizes of the input dims, and it leaves no more values unresolved than
onnxruntime's symbolic shape inference; the outputs after fold, convert and optimize are the
original's.

Models: ``tests/data/exporters`` (tf2onnx, paddle2onnx, PyTorch legacy and dynamo, onnxruntime's
transformers optimizer; see its README), and, built here by ``benchmarks/corpus.py``, the
scikit-learn family (skl2onnx, onnxmltools) when skl2onnx is installed, onnxruntime's
quantizer output (dynamic, static QDQ and QOperator) and onnxscript's functions.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.testing import observe, strip_shapes, tally

ort = pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "exporters"
sys.path.insert(0, str(ROOT / "benchmarks"))
import corpus  # noqa: E402
import shapes  # noqa: E402

runner = CliRunner()
COMMANDS = {
    "infer": ["infer"],
    "fold": ["fold"],
    "convert13": ["convert", "--opset", "13"],
    "convert18": ["convert", "--opset", "18"],
    "convert21": ["convert", "--opset", "21"],
    "optimize": ["optimize"],
}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    corpus.build(folder, ["sklearn", "quantized", "onnxscript"])
    return folder


def _names() -> list[str]:
    fixed = [p.relative_to(FIXTURES).as_posix() for p in sorted(FIXTURES.rglob("*.onnx"))]
    made = ["quantized/" + n for n in ("float_cnn", "dynamic_int8", "static_qdq", "static_qop")]
    if importlib.util.find_spec("onnx_ir") is not None:
        made.append("quantized/matmul_4bits")
    if importlib.util.find_spec("skl2onnx") is not None:
        made += ["sklearn/" + n for n in ("logreg_pipeline_zipmap", "random_forest", "svc")]
        made += ["sklearn/" + n for n in ("gbm_regressor", "onehot", "normalize_binarize")]
        made += ["sklearn/" + n for n in ("svr", "column_transformer", "ordinal_strings")]
    if importlib.util.find_spec("onnxscript") is not None:
        made += [
            "onnxscript/onnxscript_" + n for n in ("loop_accumulate", "if_gated", "attention")
        ]
    return fixed + [f"{n}.onnx" for n in made]


def _path(name: str, built: Path) -> Path:
    fixed = FIXTURES / name
    return fixed if fixed.exists() else built / name


@pytest.mark.parametrize("name", _names())
def test_shapes_agree_with_onnxruntime_and_resolve_as_much_as_its_symbolic_inference(
    name: str, built: Path
) -> None:
    path = _path(name, built)
    proto = onnx.load(path)
    observed = observe(proto)
    assert not isinstance(observed, str), observed
    stripped = strip_shapes(proto)
    ours = tally(shapes.INFER["onnxforge"](stripped), observed, shapes.EVALUATE["onnxforge"])
    assert ours.wrong == [], ours.wrong
    if importlib.util.find_spec("sympy") is not None:
        try:
            types = shapes.INFER["ort-symbolic"](
                onnx.ModelProto.FromString(stripped.SerializeToString())
            )
        except Exception:  # noqa: BLE001  (it fails on many models: then it resolves nothing)
            types = {}
        theirs = tally(types, observed, shapes.EVALUATE["ort-symbolic"])
        assert len(ours.unresolved) <= len(theirs.unresolved), ours.unresolved


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", _names())
def test_every_command_accepts_the_model_and_keeps_its_outputs(
    name: str, command: str, built: Path, tmp_path: Path
) -> None:
    path = _path(name, built)
    before = path.read_bytes()
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, [*COMMANDS[command], str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == before
    proto = onnx.load(path)
    observed = observe(proto)
    assert not isinstance(observed, str), observed
    feeds = observed.feeds[0]
    names = [o.name for o in proto.graph.output]
    options = ort.SessionOptions()
    options.log_severity_level = 3
    want = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(
        names, feeds
    )
    got = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"]).run(
        names, feeds
    )
    for key, a, b in zip(names, want, got, strict=True):
        if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=key)
        else:
            assert (
                np.array_equal(np.asarray(a), np.asarray(b))
                if isinstance(a, np.ndarray)
                else a == b
            ), key


@pytest.mark.parametrize("name", _names())
def test_the_gate_passes_every_model_onnxruntime_runs(name: str, built: Path) -> None:
    # check as a model repository's CI runs it: no false alarm on a model that runs
    path = _path(name, built)
    args = ["check", str(path), "--runtime", "onnxruntime", "--verify", "onnxruntime"]
    result = runner.invoke(app, [*args, "--jobs", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["errors"] == 0 and report["files"][0]["ran_with"], report
