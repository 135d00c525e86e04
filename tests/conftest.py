"""Shared fixtures."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import settings
from suites import LIGHT_MODELS

# Profiles for the property tests that do not set max_examples themselves (the fuzz test of
# tests/hostile/test_fuzz.py): 500 examples in CI, 10,000 with --hypothesis-profile long.
settings.register_profile("default", max_examples=500, deadline=None, database=None)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.register_profile("long", max_examples=10_000, deadline=None, database=None)
settings.load_profile("default")


@pytest.fixture(params=LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def light_model(request: pytest.FixtureRequest) -> Path:
    return request.param


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every skip is explained: one line per reason with its count (reasons cut at the first
    colon, so per-case details group together)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: Counter[str] = Counter()
    for report in skipped:
        longrepr = report.longrepr
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[text.removeprefix("Skipped: ").split(":")[0].strip()[:120]] += 1
    terminalreporter.section("skip reasons")
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count:5d}  {reason}")
