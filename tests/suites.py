"""The model suites that ship in the onnx wheel, for tests to parametrize over."""

from __future__ import annotations

import functools
from pathlib import Path

import onnx
from onnx.backend.test.loader import load_model_tests

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(LIGHT_DIR.glob("*.onnx"))
DISK_KINDS = ("simple", "pytorch-converted", "pytorch-operator")


@functools.cache
def node_cases() -> dict[str, object]:
    """The ONNX backend node suite (1,884 cases), generated in memory by onnx."""
    return {case.name: case for case in load_model_tests(kind="node")}


@functools.cache
def disk_models() -> dict[str, Path]:
    """Models of the on-disk backend suites, keyed ``kind/name``."""
    found = {}
    for kind in DISK_KINDS:
        for case in load_model_tests(kind=kind):
            if case.model_dir:
                found[f"{kind}/{case.name}"] = Path(case.model_dir) / "model.onnx"
    return found
