"""Fixtures shared by the whole suite."""

from __future__ import annotations

import pytest

from xroute import ENGINES, TopicMatcher


@pytest.fixture(params=sorted(ENGINES), scope="session")
def engine(request: pytest.FixtureRequest) -> str:
    """Every registered topic engine, by name: one suite runs against all of them."""
    return request.param


@pytest.fixture
def matcher(engine: str) -> TopicMatcher:
    """An empty matcher of each engine."""
    return TopicMatcher(engine=engine)
