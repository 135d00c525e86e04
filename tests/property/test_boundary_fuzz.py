"""Boundary fuzz of shape inference against onnxruntime (tests/boundary_cases.py).

One- to three-op models with symbolic input dims and boundary-valued constants (INT64 min/max,
INT32 max, 1e9, -1, 0, negative indices, empty tensors), some computed from the input dims
(Shape -> Gather/Slice -> arithmetic -> Concat): every dim inference writes must evaluate, at
each of three bindings of the symbols (sizes 0..7), to what onnxruntime computes; every known
element of a small integer tensor too. A ShapeError on a model onnxruntime runs at every
binding is a failure, and so is a rule that crashes.

Bounded for CI (derandomized; 17 s on an idle two-core machine, 35 s on a busy one): each op
family alone (chains of one to three of its ops), then all families mixed.
``benchmarks/boundary_fuzz.py --minutes 30`` runs the same strategies for longer and shrinks
every distinct failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from boundary_cases import GENERATORS, OrtWorker, check, examples, repro_text
from hypothesis import HealthCheck, given, note, settings

pytest.importorskip("onnxruntime")

FAMILY_EXAMPLES = 70
MIXED_EXAMPLES = 600
SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.fixture(scope="module")
def worker() -> Iterator[OrtWorker]:
    runner = OrtWorker()
    yield runner
    runner.close()


def _fuzz(worker: OrtWorker, families: list[str] | None, max_examples: int) -> Counter[str]:
    seen: Counter[str] = Counter()

    @settings(max_examples=max_examples, **SETTINGS)  # type: ignore[arg-type]
    @given(example=examples(families))
    def fuzz(example: tuple) -> None:
        case, bindings = example
        outcome = check(case, bindings, worker)
        note(repro_text(case, bindings, outcome))
        seen["examples"] += 1
        seen["ran everywhere"] += outcome.ran == len(bindings)
        seen["compared"] += outcome.compared
        assert not outcome.failures, "\n".join(str(f) for f in outcome.failures)

    fuzz()
    return seen


@pytest.mark.parametrize("family", sorted(GENERATORS))
def test_written_dims_of_one_op_family_match_onnxruntime(worker: OrtWorker, family: str) -> None:
    seen = _fuzz(worker, [family], FAMILY_EXAMPLES)
    # the generator makes models onnxruntime runs, and inference writes dims for them
    assert seen["ran everywhere"] >= FAMILY_EXAMPLES // 10, seen
    assert seen["compared"] > 0, seen


def test_written_dims_of_mixed_op_chains_match_onnxruntime(worker: OrtWorker) -> None:
    seen = _fuzz(worker, None, MIXED_EXAMPLES)
    assert seen["ran everywhere"] >= MIXED_EXAMPLES // 4, seen
