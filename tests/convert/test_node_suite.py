"""Every ONNX backend node-suite case (opset 7 and later) converted to every opset from 7 to
the newest onnx defines gives the case's stored outputs (its rtol/atol): on onnxruntime up to
the newest opset it loads, on onnx.reference beyond it and where onnxruntime lacks a kernel or
cannot exchange the type, or fails the case unconverted too. A refusal (AdapterError) is
allowed; a wrong output, an invalid model or a crash never is.

Targets that select the same schema versions for every op of the case and of its conversion
are one class: one representative per class is converted and run (see node_suite.py). Cases no
runner can check are in node_suite_excluded.txt (``pattern  # reason``); an excluded case that
checks fails the run. Every case runs by default: the whole matrix (about 12,500 conversions
for 41,000 case x target pairs) takes about 3 minutes on 2 cores. The table of results is
made by ``python tests/convert/node_suite_table.py``.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("onnxruntime")

from convert import node_suite as ns  # noqa: E402

_SPLIT_SUB = re.compile(r"test_(split|sub)(_|$)")


def _lines(results: dict[int, ns.Outcome], status: str) -> str:
    return "\n".join(
        f"  {t}: {o.detail}" for t, o in sorted(results.items()) if o.status == status
    )


@pytest.mark.parametrize("name", list(ns.suite_cases()))
def test_node_suite_case_converts_to_every_opset_or_is_refused(name: str) -> None:
    case = ns.suite_cases()[name]
    results = ns.check_case(case)
    assert sorted(results) == list(ns.targets())
    for target, outcome in results.items():  # every class had its representative run
        assert results[outcome.target] == outcome, (target, outcome)
    wrong = _lines(results, "wrong")
    assert not wrong, f"wrong results:\n{wrong}"
    unchecked = _lines(results, "unchecked")
    reason = ns.excluded_reason(name)
    if reason is not None:
        if not unchecked:
            pytest.fail(f"{name} is excluded ({reason}) but every target checks: remove its line")
        pytest.skip(f"excluded: {reason}")
    assert not unchecked, f"no runner could check (exclude the case with a reason):\n{unchecked}"


@pytest.mark.parametrize(
    "name", [n for n in ns.suite_cases() if _SPLIT_SUB.match(n)], ids=lambda n: n
)
def test_split_and_sub_cases_reach_every_opset_that_can_express_them(name: str) -> None:
    """With allow_cast, a Split or Sub case is refused only where the version cannot say it:
    split sizes given at run time below Split-13, SplitToSequence before 11."""
    case = ns.suite_cases()[name]
    for target in ns.targets():
        outcome, _ = ns.check_target(case, target, allow_cast=True)
        if outcome.status == "refused":
            assert re.search(r"computed at run time|does not exist at opset", outcome.detail), (
                target,
                outcome.detail,
            )
        else:
            assert outcome.status == "pass", (target, outcome.detail)


def test_excluded_patterns_each_match_a_case() -> None:
    names = list(ns.suite_cases())
    stale = [p for p, _ in ns.excluded() if not any(re.fullmatch(p, n) for n in names)]
    assert not stale, f"excluded patterns that match no case: {stale}"


def test_targets_of_one_class_select_the_same_schemas() -> None:
    """Relu-14 (a case at 14) has schemas 6, 13 and 14, and from opset 18 a function body:
    four classes, each converted once by the target nearest 14."""
    case = ns.suite_cases()["test_relu"]
    results = ns.check_case(case)
    assert {o.target for o in results.values()} == {12, 13, 14, 18}
    assert {t for t, o in results.items() if o.target == 14} == {14, 15, 16, 17}
    assert all(o.status == "pass" for o in results.values())
