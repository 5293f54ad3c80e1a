"""A real Redis for kombu's Redis transport in tests and benchmarks: the one answering on
127.0.0.1:6379, else a private ``redis-server`` on a free loopback port (installed from Debian
if absent), stopped afterwards, even if this process is killed (`xroute.bench.owned`)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from xroute.bench.debian import server_program
from xroute.bench.owned import Owned

DEFAULT_PORT = 6379
START_TIMEOUT_S = 20  # redis-server answers within a second here; a cold disk may be slower


class RedisUnavailable(RuntimeError):
    """No Redis could be found or started; the message says what to do."""


def redis_answers(host: str, port: int) -> bool:
    """True if a Redis server answers PING at host:port."""
    try:
        with socket.create_connection((host, port), timeout=2) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(7).startswith(b"+PONG")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_binary() -> str:
    return server_program("redis-server", "redis-server", RedisUnavailable, "XROUTE_REDIS_URL")


@contextlib.contextmanager
def private_redis() -> Iterator[str]:
    """Start a Redis of our own on a free 127.0.0.1 port (no persistence), yield its URL, and
    stop it."""
    server = _server_binary()
    port = _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="xroute-redis-"))
    print(f"redis: starting a private redis-server on 127.0.0.1:{port}", file=sys.stderr)
    owned = Owned("redis", workdir, remove=[workdir])
    process = owned.popen(
        [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--logfile", str(workdir / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not redis_answers("127.0.0.1", port):
            if process.poll() is not None or time.monotonic() > deadline:
                log = workdir / "redis.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RedisUnavailable(f"the private redis-server did not start:\n{tail}")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        print(f"redis: stopping the private redis-server on port {port}", file=sys.stderr)
        owned.stop(grace=10)  # and its folder
        process.wait()


@contextlib.contextmanager
def redis_server(private: bool = False) -> Iterator[str]:
    """The URL of a Redis: ``XROUTE_REDIS_URL``, else the one on 127.0.0.1:6379, else a private
    one (always a private one if ``private``)."""
    if not private:
        if os.environ.get("XROUTE_REDIS_URL"):
            yield os.environ["XROUTE_REDIS_URL"]
            return
        if redis_answers("127.0.0.1", DEFAULT_PORT):
            yield f"redis://127.0.0.1:{DEFAULT_PORT}/0"
            return
    with private_redis() as url:
        yield url
