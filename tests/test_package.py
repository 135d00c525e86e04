"""The wheel: one import package, every subpackage listed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib


ROOT = Path(__file__).resolve().parents[1]
CARD_FOLDERS = ("onnxforge", "passes", "shape_infer", "kernels", "cli")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _import_name(folder: Path) -> str:
    rel = folder.relative_to(ROOT).parts
    if rel[0] == "onnxforge":
        return ".".join(rel)
    return ".".join(("onnxforge", *rel))


def test_every_package_folder_is_in_the_package_list() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {
        _import_name(init.parent)
        for top in CARD_FOLDERS
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found == listed


def test_package_dir_maps_the_card_folders_under_onnxforge() -> None:
    mapping = _pyproject()["tool"]["setuptools"]["package-dir"]
    assert mapping == {f"onnxforge.{name}": name for name in CARD_FOLDERS[1:]}


def test_the_wheel_installs_nothing_but_onnxforge(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    shutil.copytree(
        ROOT,
        tree,
        ignore=shutil.ignore_patterns(
            ".git", "build", "*.egg-info", "__pycache__", ".venv*", "tests", "benchmarks"
        ),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(tree),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"onnxforge"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "onnxforge/passes/convert/__init__.py" in names and "onnxforge/py.typed" in names
