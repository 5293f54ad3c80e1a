"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from xroute import ENGINES, TopicMatcher


_ENGINE_CACHE = [(name, cache) for name in sorted(ENGINES) for cache in (False, True)]


@pytest.fixture(
    params=_ENGINE_CACHE,
    ids=[f"{name}-{'cache' if cache else 'nocache'}" for name, cache in _ENGINE_CACHE],
    scope="module",
)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every registered topic engine, by name, each with the route cache off and on (as NATS
    runs its sublist tests with and without the cache): one suite runs against all of them.

    The engine's ``route_cache_default`` decides the cache of ``TopicMatcher(engine=name)``;
    it is set here and put back when the module's tests with this parameter are done (module
    scope, not function scope, so that hypothesis tests may use the fixture)."""
    name, cache = request.param
    engine_class = ENGINES[name]
    missing = object()
    saved = engine_class.__dict__.get("route_cache_default", missing)
    engine_class.route_cache_default = cache
    yield name
    if saved is missing:
        del engine_class.route_cache_default
    else:
        engine_class.route_cache_default = saved


@pytest.fixture
def matcher(engine: str) -> TopicMatcher:
    """An empty matcher of each engine."""
    return TopicMatcher(engine=engine)
