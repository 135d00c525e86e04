"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from suites import LIGHT_MODELS


@pytest.fixture(params=LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def light_model(request: pytest.FixtureRequest) -> Path:
    return request.param
