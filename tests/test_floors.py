"""Every import points down (STYLE.md 6b): the ground (ir, io, opset, errors, registry), the
knowledge per op (shape_infer, kernels, validation), passes, the API floor (onnxforge.api),
the command line. Function-local imports count too: one that dodges a cycle is a module on the
wrong floor."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "onnxforge": "onnxforge",
    "passes": "onnxforge.passes",
    "shape_infer": "onnxforge.shape_infer",
    "kernels": "onnxforge.kernels",
    "cli": "onnxforge.cli",
}
FLOORS = (  # (module prefix, floor), the first that matches
    ("onnxforge.cli", 5),
    ("onnxforge.__main__", 5),
    ("onnxforge.api", 4),
    ("onnxforge.testing", 4),
    ("onnxforge.passes", 3),
    ("onnxforge.shape_infer", 2),
    ("onnxforge.kernels", 2),
    ("onnxforge._validate", 2),
    ("onnxforge.summary", 2),
    ("onnxforge.toolchains", 2),
    ("onnxforge.io", 1),
    ("onnxforge.ir", 0),
    ("onnxforge.errors", 0),
    ("onnxforge.registry", 0),
    ("onnxforge.opset", 0),
    ("onnxforge._cleanup", 0),
    ("onnxforge._runtime_child", 0),
)


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = FOLDERS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _floor(module: str) -> int | None:
    for prefix, floor in FLOORS:
        if module == prefix or module.startswith(prefix + "."):
            return floor
    return None


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("onnxforge"):
            assert node.module is not None
            if node.module == "onnxforge":  # `from onnxforge import io`: the submodule
                found.update(f"onnxforge.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("onnxforge"))
    return found


def _library() -> list[Path]:
    return [p for top in FOLDERS for p in sorted((ROOT / top).rglob("*.py"))]


def test_every_library_module_has_a_floor() -> None:
    unplaced = [_module(p) for p in _library() if _module(p) != "onnxforge"]
    assert [m for m in unplaced if _floor(m) is None] == []


def test_no_module_imports_a_floor_above_its_own() -> None:
    upward = []
    for path in _library():
        module = _module(path)
        if module == "onnxforge":  # the package's __init__ re-exports the public API
            continue
        floor = _floor(module)
        assert floor is not None
        for target in sorted(_imports(path)):
            target_floor = _floor(target)
            if target_floor is not None and target_floor > floor:
                upward.append(f"{module} (floor {floor}) imports {target} (floor {target_floor})")
    assert upward == []


def test_the_ir_does_not_import_io() -> None:
    """Conversion to and from protobuf belongs to io alone; io gives Tensor its codec."""
    assert not any(t.startswith("onnxforge.io") for t in _imports(ROOT / "onnxforge" / "ir.py"))
