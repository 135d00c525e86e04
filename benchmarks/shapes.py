"""How well shapes are resolved on real models, judged by onnxruntime.

    python benchmarks/shapes.py [CORPUS_DIR ...] [--zoo] [--out benchmarks/results/shapes.md]

Every model (the corpus folders given, ``tests/data/exporters``, and with ``--zoo`` the zoo
models in onnx's wheel) runs in onnxruntime with every main-graph value exposed, at the first
two sizes of its symbolic input dims that run (``onnxforge.testing.observe``). Each tool infers
the model with its value_info and output shapes stripped: onnxforge, onnxruntime's symbolic
shape inference (auto_merge), onnx's C++ inference (data_prop). A value agrees when its rank
and every dim, evaluated with the input dims' sizes, equal onnxruntime's at both sizes; it is
wrong when one differs; unresolved when a dim is unknown or names no input's dim.
"""

from __future__ import annotations

__all__ = ["main", "measure"]

import argparse
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import onnx

from onnxforge.testing import Observed, ShapeTally, declared_dims, observe, strip_shapes, tally

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "exporters"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "shapes.md"
TOOLS = ("onnxforge", "ort-symbolic", "onnx-cpp")


def _ours(proto: onnx.ModelProto) -> dict[str, Any]:
    from onnxforge.io import from_proto
    from onnxforge.ir import TensorType
    from onnxforge.shape_infer import infer

    model = from_proto(proto)
    report = infer(model)
    found: dict[str, Any] = {}
    for value in model.graph.values():
        t = report.input_names.get(value, value.type)
        found[value.name] = (
            tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
        )
    return found


def _ort_symbolic(proto: onnx.ModelProto) -> dict[str, Any]:
    from corpus import inside
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    with tempfile.TemporaryDirectory() as tmp, inside(Path(tmp)):  # it may write a temp model
        inferred = SymbolicShapeInference.infer_shapes(proto, auto_merge=True)
    if inferred is None:
        raise RuntimeError("symbolic shape inference returned nothing")
    return declared_dims(inferred)


def _onnx_cpp(proto: onnx.ModelProto) -> dict[str, Any]:
    return declared_dims(onnx.shape_inference.infer_shapes(proto, data_prop=True))


def _evaluate_ours(dim: Any, bindings: Mapping[str, int]) -> int | None:
    from onnxforge.shape_infer.symbolic import evaluate

    if dim is None or isinstance(dim, int):
        return dim
    return evaluate(dim, bindings)


def _evaluate_sympy(dim: Any, bindings: Mapping[str, int]) -> int | None:
    """ORT writes sympy's text (``floor(H/2) + 1``, ``Max(1, s)``); read it with sympy when
    our parser cannot, its names being the input dims'."""
    value = _evaluate_ours(dim, bindings)
    if value is not None or not isinstance(dim, str):
        return value
    try:
        import sympy

        names = {n: sympy.Symbol(n, integer=True, nonnegative=True) for n in bindings}
        expr = sympy.sympify(dim, locals=names)
        result = expr.subs({names[n]: v for n, v in bindings.items()})
        return int(result) if result.is_number else None
    except Exception:  # noqa: BLE001  (anything sympy cannot read is unresolved)
        return None


INFER = {"onnxforge": _ours, "ort-symbolic": _ort_symbolic, "onnx-cpp": _onnx_cpp}
EVALUATE = {
    "onnxforge": _evaluate_ours,
    "ort-symbolic": _evaluate_sympy,
    "onnx-cpp": _evaluate_ours,
}


def measure(
    path: Path, tools: tuple[str, ...] = TOOLS, observed: Observed | None = None
) -> dict[str, ShapeTally] | str:
    """Each tool's tally on one model, or why the model cannot be measured. ``observed``:
    onnxruntime's run of the model when the caller made it (with feeds of its own)."""
    proto = onnx.load(path)
    found = observe(proto) if observed is None else observed
    if isinstance(found, str):
        return found
    observed = found
    stripped = strip_shapes(proto)
    results = {}
    for tool in tools:
        try:
            types = INFER[tool](onnx.ModelProto.FromString(stripped.SerializeToString()))
        except Exception as exc:  # noqa: BLE001  (a tool that fails is counted as failed)
            failed = ShapeTally(
                failed=f"{type(exc).__name__}: {(str(exc) or ' ').splitlines()[0][:200]}"
            )
            failed.values = _count(observed)
            results[tool] = failed
            continue
        results[tool] = tally(types, observed, EVALUATE[tool])
    return results


def _count(observed: Observed) -> int:
    return sum(1 for n in observed.shapes[0] if not any(n in f for f in observed.feeds))


def _models(folders: list[Path], zoo: bool) -> list[Path]:
    paths = []
    for folder in folders:
        paths += sorted(folder.rglob("*.onnx"))
    if zoo:
        light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
        paths += sorted(light.glob("*.onnx"))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--zoo", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    folders = [*args.folders, FIXTURES]
    rows = []
    totals = {t: [0, 0, 0, 0, 0] for t in TOOLS}  # values, agree, wrong, unresolved, failed
    details = []
    for path in _models(folders, args.zoo):
        name = (
            path.relative_to(path.parents[1]).as_posix() if path.parent != FIXTURES else path.name
        )
        result = measure(path)
        if isinstance(result, str):
            rows.append(f"| {name} | not measured: {result[:120]} |" + " |" * (len(TOOLS) - 1))
            continue
        cells = []
        for tool in TOOLS:
            t = result[tool]
            c = t.counts()
            total = totals[tool]
            for i, key in enumerate(("values", "agree", "wrong", "unresolved")):
                total[i] += c[key]
            if t.failed:
                total[4] += 1
                cells.append(f"failed ({t.failed[:60]})")
            else:
                agree = f"{c['agree']}/{c['values']} agree"
                cells.append(f"{agree}, {c['wrong']} wrong, {c['unresolved']} unresolved")
            for line in t.wrong[:5]:
                details.append(f"- {name} ({tool}) wrong: {line}")
            if tool == "onnxforge":
                for line in t.unresolved[:5]:
                    details.append(f"- {name} (onnxforge) unresolved: {line}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(rows[-1], file=sys.stderr)
    lines = [
        "# Shapes on real models, judged by onnxruntime",
        "",
        f"`python benchmarks/shapes.py {' '.join(map(str, args.folders))}"
        f"{' --zoo' if args.zoo else ''}`. Each model runs in onnxruntime at two sizes of its "
        "symbolic input dims with every value exposed; each tool infers the model stripped of "
        "value_info and output shapes.",
        "",
        "| model | " + " | ".join(TOOLS) + " |",
        "| --- | " + " | ".join("---" for _ in TOOLS) + " |",
        *rows,
        "",
        "| total | values | agree | wrong | unresolved (failed models' values included) "
        "| unresolved % | models failed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for tool in TOOLS:
        v, a, w, _, f = totals[tool]
        u = v - a - w  # a model the tool fails on leaves all its values unresolved
        share = f"{100 * u / v:.2f}%" if v else "-"
        lines.append(f"| {tool} | {v} | {a} | {w} | {u} | {share} | {f} |")
    if details:
        lines += [
            "",
            "## Wrong and (onnxforge) unresolved values, at most 5 per model",
            "",
            *details,
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[-len(TOOLS) - 2 :]))


if __name__ == "__main__":
    main()
