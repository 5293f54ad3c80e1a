"""Fixtures shared by the whole suite."""

from __future__ import annotations

import functools
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from xroute import ENGINES, TopicMatcher

if TYPE_CHECKING:
    from tests.services.cluster import StandaloneCluster
    from tests.services.connect import ConnectServer
    from tests.services.seaweedfs import SeaweedFS

# Start-up time of each service fixture, reported at the end of the run (never asserted).
_STARTUP_SECONDS: dict[str, float] = {}


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


@pytest.fixture(scope="session")
def s3_store() -> Iterator[SeaweedFS]:
    """A private SeaweedFS S3 store for the whole run (started on first use, about 5 s).

    While it is alive the standard variables of `SeaweedFS.env` (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``,
    ``AWS_EC2_METADATA_DISABLED``) are set in ``os.environ`` and restored afterwards, so that
    ``pyarrow.fs.FileSystem.from_uri("s3://...")`` and any ``s3://`` reader find the store, in
    this process, in subprocesses and in the Python workers of a local Spark (one started
    before the store too: see `share_with_spark`). A bare
    ``pyarrow.fs.S3FileSystem()`` ignores ``AWS_ENDPOINT_URL``: use ``s3_store.filesystem()``.
    ``s3_store.new_bucket(prefix)`` gives a fresh ``s3://bucket`` per test."""
    from tests.services.seaweedfs import SeaweedFS, StoreUnavailable, share_with_spark

    store = SeaweedFS()
    try:
        store.start()
    except StoreUnavailable as error:
        pytest.fail(f"s3_store: {error}", pytrace=False)
    assert store.startup_seconds is not None
    _STARTUP_SECONDS["s3_store (SeaweedFS)"] = store.startup_seconds
    try:
        with pytest.MonkeyPatch.context() as patch, share_with_spark(store.env):
            for name, value in store.env.items():
                patch.setenv(name, value)
            yield store
    finally:
        store.stop()


@pytest.fixture(scope="session")
def split_cluster(
    s3_store: SeaweedFS, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and one worker on 127.0.0.1 whose worker lives in its own
    mount namespace: a private /tmp (so no pytest ``tmp_path``), the checkout's source hidden
    (executors import the package the driver ships), only the venv and `s3_store` shared.

    Yields the `StandaloneCluster`: ``master_url`` for the driver, ``worker_log`` and
    ``executor_logs()`` for failure messages. Only one SparkContext may live in a process, and
    the ``spark`` fixture holds this one's: run the driver in a subprocess. Fails, saying why,
    where ``unshare --mount`` is missing or not permitted (it needs root or CAP_SYS_ADMIN)."""
    from tests.services.cluster import ClusterFailed, StandaloneCluster

    cluster = StandaloneCluster(
        tmp_path_factory.mktemp("split-cluster"), split=True, env=s3_store.env
    )
    try:
        cluster.start()
    except ClusterFailed as error:
        pytest.fail(f"split_cluster: {error}", pytrace=False)
    assert cluster.startup_seconds is not None
    _STARTUP_SECONDS["split_cluster (Spark master + namespaced worker)"] = cluster.startup_seconds
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A private Spark Connect server (pyspark's own ``start-connect-server.sh``, local[2,3])
    on a free loopback port for the whole run: 10-25 s to start, more on a loaded machine.
    Its Python workers import this checkout's xroute. Fails, quoting the server's log, when it
    does not listen in time."""
    from tests.services.connect import ConnectServer, ConnectUnavailable

    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        server.start()
    except ConnectUnavailable as error:
        pytest.fail(f"connect_server: {error}", pytrace=False)
    assert server.startup_seconds is not None
    _STARTUP_SECONDS["connect_server (Spark Connect)"] = server.startup_seconds
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connect_session(connect_server: ConnectServer):
    """One Spark Connect session on `connect_server` for the run, made by the job's own
    `start_connect`; closed before the server stops. Tests use `spark_connect`."""
    from xroute.spark.session import start_connect

    session = start_connect(connect_server.url, app_name="xroute-tests")
    yield session
    session.stop()


@pytest.fixture
def spark_connect(connect_session, monkeypatch: pytest.MonkeyPatch):
    """`connect_session`, for one test. pyspark picks classic or Connect columns
    (``pyspark.sql.functions``) by the variable ``SPARK_CONNECT_MODE_ENABLED``, process-wide;
    a test run also holds a classic session, so the variable is set for this test only."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    return connect_session


# Under pytest-xdist (`make test` and `make conformance`: ``-n 2 --dist loadgroup``) the tests
# that hold a JVM or a service (markers spark, s3, cluster) run in groups, each group in one
# worker and in order, so that a group starts one Spark session, one Connect server, one
# SeaweedFS and one split cluster at most, as without xdist; every other test is its own unit,
# spread over the workers. A module names its group with a line ``XDIST_GROUP = "name"``
# (default `JVM_GROUP`): the tests that spend their time in drivers and clusters they start
# themselves ("jvm-drivers") run beside those on the shared session, in the other worker, which
# halves the run's longest unit. A module that starts a service for its own tests only (a
# private RabbitMQ node, module-scoped) names a group too, marked or not, so that one worker
# starts it once. xdist's controller sees node ids only, not markers: a module whose text marks
# a test so, or names a group, goes whole to its group.
JVM_MARKERS = ("spark", "s3", "cluster")
JVM_GROUP = "jvm"
_ROOT = Path(__file__).resolve().parents[1]
_JVM_MARK = re.compile(r"pytest\.mark\.(?:%s)\b" % "|".join(JVM_MARKERS))
_GROUP_LINE = re.compile(r'^XDIST_GROUP = "([\w-]+)"', re.MULTILINE)


@functools.cache
def jvm_group(path: str) -> str | None:
    """The group of the test module at ``path`` (relative to the checkout): the one its
    ``XDIST_GROUP`` line names, else `JVM_GROUP` for a module that marks a test spark, s3 or
    cluster; None for any other module (each of its tests a unit of its own)."""
    try:
        text = (_ROOT / path).read_text()
    except OSError:
        return None
    named = _GROUP_LINE.search(text)
    if named:
        return named.group(1)
    return JVM_GROUP if _JVM_MARK.search(text) else None


def jvm_scope(nodeid: str) -> str:
    """The xdist work unit of a test: its module's `jvm_group`, else the test itself."""
    return jvm_group(nodeid.split("::", 1)[0]) or nodeid


def pytest_itemcollected(item: pytest.Item) -> None:
    """A test marked spark, s3 or cluster whose module's text does not say so (a marker set by
    a hook, say) would get a JVM of its own under xdist: refuse the run, saying why."""
    marked = any(item.get_closest_marker(name) for name in JVM_MARKERS)
    if marked and jvm_group(item.nodeid.split("::", 1)[0]) is None:
        raise pytest.UsageError(
            f"{item.nodeid} is marked {'/'.join(JVM_MARKERS)} but its module's text has no "
            "'pytest.mark.spark' (or s3, cluster): tests/conftest.py's xdist scheduler reads "
            "the text to keep the JVM tests in their groups"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With ``--dist loadgroup``, xdist's load-by-scope scheduler with `jvm_scope` as the scope.

    xdist's own loadgroup reads ``xdist_group`` marks through a suffix it writes to
    ``item._nodeid``, which pytest 9 no longer reads (the node id comes from ``item._id``):
    every test then went its own way and each worker started its own Spark. The controller
    sees node ids only, so the group is told by the module's text (`jvm_group`)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class JvmGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return jvm_scope(nodeid)

    return JvmGroupScheduling(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop what killed runs left (services whose starter is gone: `xroute.bench.owned`), in
    the controller and in each worker alike (the registry is safe to race), and let SIGTERM (a
    timeout) end the run as Ctrl-C does: fixtures' finalizers stop what they started."""
    from xroute.bench.owned import reap_orphans

    reap_orphans()
    if threading.current_thread() is threading.main_thread():
        _SIGTERM_BEFORE.append(signal.signal(signal.SIGTERM, _terminated))


_SIGTERM_BEFORE: list[Any] = []


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put back the SIGTERM handler of before the run (for runs inside a process)."""
    while _SIGTERM_BEFORE:
        signal.signal(signal.SIGTERM, _SIGTERM_BEFORE.pop())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker, hand the start-up times to the controller, which reports them."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["xroute_startup_seconds"] = dict(_STARTUP_SECONDS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """In the xdist controller: gather each worker's service start-up times."""
    output = getattr(node, "workeroutput", None) or {}
    for name, seconds in output.get("xroute_startup_seconds", {}).items():
        worker = getattr(getattr(node, "gateway", None), "id", "worker")
        _STARTUP_SECONDS[f"{name} [{worker}]"] = seconds


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report how long each service fixture took to start, with the machine's cores and load
    average as measured now."""
    if _STARTUP_SECONDS:
        import os

        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        terminalreporter.section(f"service start-up ({os.cpu_count()} cores, load average {load})")
        for name, seconds in _STARTUP_SECONDS.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
