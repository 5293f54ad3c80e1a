"""One way to start Spark, for the job and the tests alike: Java checked first, quiet logs,
the venv's Python on both sides, loopback only, and the package shipped to remote executors;
or a Spark Connect session (``--remote sc://HOST:PORT``, or ``SPARK_REMOTE``), which needs no
Java here at all. The few facts the job asks of a session, asked the same way of both."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from xroute.core.errors import JavaUnavailable, SparkConnectUnavailable

# Every core, and a failed task tried up to 3 times, as a cluster retries it (a local master
# retries nothing unless told).
DEFAULT_MASTER = "local[*,3]"
MIN_JAVA = 17  # Spark 4 runs on Java 17 and later
INSTALL_HINT = "install one with: apt-get install openjdk-17-jre-headless"
# Arrow batches handed to the routing function: large enough that per-batch costs vanish,
# small enough that a batch and its deliveries stay a few tens of MB.
ARROW_BATCH_ROWS = 65536
CONNECT_PORT = 15002  # Spark Connect's default port, for sc://HOST without one
CONNECT_PROBE_S = 10
CONNECT_PATIENCE_S = 60  # how long a lost Connect server is retried (XROUTE_CONNECT_PATIENCE_S)
# Spark's own messages go to this file (in the temp folder) rather than to the terminal.
LOG_NAME = "xroute-spark.log"
_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""


def java_version(java: str) -> int:
    """The major version of the ``java`` executable at this path (8 for ``1.8.0_x``)."""
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:
        raise JavaUnavailable(
            f"cannot run Java at {java!r} ({error}); {INSTALL_HINT}", java
        ) from None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not found:
        raise JavaUnavailable(
            f"cannot tell the version of Java at {java!r} from: "
            f"{(result.stderr or result.stdout).strip()[:200]!r}; {INSTALL_HINT}",
            java,
        )
    major, minor = int(found.group(1)), int(found.group(2) or 0)
    return minor if major == 1 else major


def find_java(environ: Mapping[str, str] | None = None) -> str:
    """The Java that Spark would use (``$JAVA_HOME/bin/java``, else ``java`` on PATH), checked
    to be version 17 or later; `JavaUnavailable` naming what was found otherwise."""
    environ = os.environ if environ is None else environ
    home = environ.get("JAVA_HOME")
    if home:
        java = str(Path(home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise JavaUnavailable(
                f"JAVA_HOME is {home!r} but {java!r} is not an executable Java; fix JAVA_HOME "
                f"or {INSTALL_HINT}",
                java,
            )
    else:
        found = shutil.which("java", path=environ.get("PATH", ""))
        if found is None:
            raise JavaUnavailable(
                f"Spark needs Java {MIN_JAVA} or later and none was found (no JAVA_HOME, no "
                f"'java' on PATH); {INSTALL_HINT}"
            )
        java = found
    version = java_version(java)
    if version < MIN_JAVA:
        raise JavaUnavailable(
            f"Spark needs Java {MIN_JAVA} or later; {java!r} is Java {version}; {INSTALL_HINT}",
            java,
        )
    return java


def spark_environment(master: str | None = None) -> None:
    """Set the environment the driver and its Python workers need, unless the user set it.

    Spark binds to loopback for a local master or one on this machine; for a remote master it
    keeps its own choice of address, which the executors must be able to reach.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is None or _is_local(master) or _on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # numba caches compiled kernels beside their source by default, which executors may not
    # be allowed to write; the library's own folder is shared with every other use.
    os.environ.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "xroute" / "numba"))


def log_path() -> Path:
    """Where Spark's own log goes (one file per user, rewritten by each session)."""
    return Path(tempfile.gettempdir()) / f"{os.getuid()}-{LOG_NAME}"


def start_spark(
    master: str | None = None,
    app_name: str = "xroute",
    config: Mapping[str, Any] | None = None,
    remote: str | None = None,
) -> Any:
    """A SparkSession: ``local[*,3]`` unless ``master`` is given (or spark-submit chose one);
    a Spark Connect session when ``remote`` is given, or ``SPARK_REMOTE`` is set and no
    ``master`` is (see `start_connect`).

    Spark's own output goes to `log_path` rather than the terminal. For a non-local master the
    xroute package is zipped and shipped to the executors.
    """
    remote = remote or (None if master else os.environ.get("SPARK_REMOTE"))
    if remote:
        return start_connect(remote, app_name)
    running = _active_session()
    if running is not None:
        return running
    spark_environment(master)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM
    if not under_submit:
        find_java()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    log = log_path()
    properties = log.with_suffix(".properties")
    properties.write_text(_LOG4J.format(path=log))
    conf = SparkConf().setAppName(app_name)
    if master is not None or not under_submit:
        conf.setMaster(master or DEFAULT_MASTER)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{properties}",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
        "spark.executorEnv.NUMBA_CACHE_DIR": os.environ["NUMBA_CACHE_DIR"],
        **{key: str(value) for key, value in (config or {}).items()},
    }
    for key, value in settings.items():
        conf.set(key, value)
    if under_submit:
        session = SparkSession.builder.config(conf=conf).getOrCreate()
    else:
        from pyspark.java_gateway import launch_gateway

        with log.open("wb") as sink:
            # The JVM's own stdout/stderr (before log4j is up, and the JVM's warnings) go to
            # the log as well: the terminal stays clean.
            try:
                gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
            except Exception as error:
                raise JavaUnavailable(
                    f"Spark could not start ({error}); see {log}: {_tail(log)}"
                ) from None
        context = SparkContext(conf=conf, gateway=gateway)
        session = SparkSession(context)
    if not _is_local(session.sparkContext.master):
        session.sparkContext.addPyFile(str(package_zip()))
    return session


def start_connect(url: str, app_name: str = "xroute") -> Any:
    """A Spark Connect session on the server at ``url`` (``sc://HOST:PORT``; or ``local[N]``,
    which starts a server inside this process). The server runs the tasks: its Python workers
    must import xroute (installed there, or shipped as a `package_zip` artifact).

    Raises `SparkConnectUnavailable` when pyspark's Connect client is not installed, or the
    server does not answer."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as error:
        raise SparkConnectUnavailable(
            f"Spark Connect needs pyspark's client libraries ({error}); install them with: "
            "pip install 'xroute[connect]'",
            url,
        ) from None
    from pyspark.sql import SparkSession

    if url.startswith("sc://"):
        _check_reachable(url)
    spark_environment("local" if url.startswith("local") else None)
    if _active_session() is None:
        # pyspark's own builder: it starts a local server for local[N], and switches
        # pyspark.sql.functions to Connect columns for this process.
        builder = SparkSession.builder
    else:
        # It refuses to make a remote session beside a classic one (as in the tests): the
        # Connect builder does not.
        builder = ConnectSession.builder
    if url.startswith("local"):
        # pyspark starts the local server's JVM itself, its stderr on ours: its start-up
        # warnings go to the log, as those of start_spark's JVM do.
        with _stderr_to(log_path()):
            session = builder.remote(url).appName(app_name).getOrCreate()
    else:
        session = builder.remote(url).appName(app_name).getOrCreate()
    _tolerate_a_lost_server(session)
    try:
        session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    except Exception as error:  # the first call is the first contact with the server
        raise SparkConnectUnavailable(
            f"cannot reach the Spark Connect server at {url}: {_first_line(error)}", url
        ) from None
    return session


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 goes to ``path`` (appended) for the block, so that processes started
    meanwhile keep writing there; Python's own stderr is back after it."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as sink:
        os.dup2(sink.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _check_reachable(url: str) -> None:
    """Fail at once when nothing listens at ``url``: pyspark's client would retry with
    backoff for minutes before saying so."""
    address = urlsplit(url.split(";", 1)[0])
    host, port = address.hostname or "localhost", address.port or CONNECT_PORT
    try:
        socket.create_connection((host, port), timeout=CONNECT_PROBE_S).close()
    except OSError as error:
        raise SparkConnectUnavailable(
            f"cannot reach the Spark Connect server at {url}: {error.strerror or error}", url
        ) from None


def _tolerate_a_lost_server(session: Any) -> None:
    """Retry a lost server for about ``XROUTE_CONNECT_PATIENCE_S`` seconds (60 by default), not
    pyspark's ten minutes: a server that died (the driver, on Connect) then fails the command
    instead of hanging it, and one restarted within that time is found again."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    patience_ms = 1000 * float(os.environ.get("XROUTE_CONNECT_PATIENCE_S", CONNECT_PATIENCE_S))
    # pyspark's waits: 50 ms, then four times longer each time, at most 15 s.
    retries, waited, wait = 0, 0.0, 50.0
    while waited < patience_ms:
        retries, waited, wait = retries + 1, waited + wait, min(wait * 4, 15000.0)
    session.client.set_retry_policies([DefaultPolicy(max_retries=retries, max_backoff=15000)])
    # The error that follows says it in a line (server_lost); pyspark's warning repeats it.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")


def server_lost(error: BaseException) -> SparkConnectUnavailable | None:
    """The error to raise when ``error`` says the Spark Connect server went away (on Connect the
    server is the driver: killed, or its machine lost), else None."""
    text = str(error)
    if type(error).__name__ != "SparkConnectGrpcException" or "UNAVAILABLE" not in text:
        return None
    details = re.search(r'details = "([^"]*)"', text)
    return SparkConnectUnavailable(
        "lost the Spark Connect server (the driver): "
        f"{details.group(1) if details else _first_line(error)}"
    )


def abandon_lost_server() -> None:
    """Close this thread's Connect session without releasing it on its server, which is gone:
    pyspark would otherwise retry that release for a minute as the process exits. For the
    command line only, which owns its process; a library call leaves its caller's session be."""
    if "pyspark.sql.connect.session" not in sys.modules:
        return
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.getActiveSession()
    if session is not None:
        with contextlib.suppress(Exception):
            session.client.close()


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: Any) -> int:
    """The number of tasks Spark runs at once by default (its cores, on a local master)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    from pyspark.sql.connect import functions as F

    # No SparkContext to ask: a range with no partition count is split that many ways.
    return spark.range(0, 1 << 16).select(F.spark_partition_id()).distinct().count()


def master_of(spark: Any) -> str:
    """Where ``spark`` runs its tasks, for summaries: the master URL, behind a Connect
    server's URL when it is one."""
    if not is_connect(spark):
        return spark.sparkContext.master
    return f"{_connect_url(spark)} ({spark.conf.get('spark.master', None) or 'unknown master'})"


def _connect_url(spark: Any) -> str:
    endpoint = getattr(getattr(spark.client, "_builder", None), "endpoint", None)
    return f"sc://{endpoint}" if endpoint else "Spark Connect"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:300]


@contextlib.contextmanager
def session_settings(spark: Any, settings: Mapping[str, str | None]) -> Iterator[None]:
    """Set (None: unset) session settings for the block, and put the previous values back."""
    saved = {key: spark.conf.get(key, None) for key in settings}
    try:
        _apply(spark, settings)
        yield
    finally:
        _apply(spark, saved)


def _apply(spark: Any, settings: Mapping[str, str | None]) -> None:
    for key, value in settings.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def _active_session() -> Any:
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def _on_loopback(master: str) -> bool:
    return bool(re.match(r"^spark://(127\.0\.0\.1|localhost)(:\d+)?$", master))


def package_zip() -> Path:
    """The xroute package as a zip for ``addPyFile``, one per version of the source.

    The file is named by a hash of the source and written only once, so its modification time
    stays put: numba keys its on-disk cache of compiled kernels on it, and executors that
    import the package from this zip then compile only once.
    """
    import xroute

    source = Path(xroute.__file__).parent
    files = [p for p in sorted(source.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    folder = Path.home() / ".cache" / "xroute"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"xroute-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, Path("xroute") / path.relative_to(source))
        partial.replace(target)
    return target


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
