"""A real RabbitMQ for conformance tests and benchmarks: one that is already there, or a private
node started on loopback (Debian's rabbitmq-server, installed if absent) and stopped afterwards,
even if this process is killed (`xroute.bench.owned`).

``python -m xroute.bench.rabbitmq [--private] [--plugins] -- COMMAND...`` runs COMMAND with
``XROUTE_AMQP_URL`` set to the broker, and stops a broker it started whatever COMMAND does.
With ``--plugins``, a second private node with the exchange-type plugins (`PLUGINS`) enabled
is started too, its URL in ``XROUTE_AMQP_PLUGINS_URL``; the machine's broker is not touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from xroute.bench.debian import server_program
from xroute.bench.owned import Owned

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
START_TIMEOUT_S = 90  # a cold Erlang VM plus RabbitMQ's boot steps take 5-20 s here
SBIN = ("/usr/sbin", "/usr/lib/rabbitmq/bin")


# The plugins whose exchange types xroute models (x-modulus-hash comes with sharding in 3.x).
PLUGINS = (
    "rabbitmq_consistent_hash_exchange",
    "rabbitmq_random_exchange",
    "rabbitmq_jms_topic_exchange",
    "rabbitmq_recent_history_exchange",
    "rabbitmq_sharding",
)


class BrokerUnavailable(RuntimeError):
    """No broker could be found or started; the message says what to do."""


def amqp_answers(host: str, port: int) -> bool:
    """True if an AMQP 0-9-1 broker answers the protocol header at host:port."""
    try:
        with socket.create_connection((host, port), timeout=2) as conn:
            conn.sendall(b"AMQP\x00\x00\x09\x01")
            return conn.recv(1) == b"\x01"  # the first byte of a connection.start frame
    except OSError:
        return False


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_binary() -> str:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    return server_program(
        "rabbitmq-server", "rabbitmq-server", BrokerUnavailable, "XROUTE_AMQP_URL", path
    )


def connect(url: str) -> Any:
    """A py-amqp connection to ``url`` with publisher confirms (each publish waits for its
    confirm). py-amqp rather than pika: pika cannot send floats in a header table."""
    import amqp

    parsed = urlparse(url)
    connection = amqp.Connection(
        host=f"{parsed.hostname or '127.0.0.1'}:{parsed.port or 5672}",
        userid=unquote(parsed.username or "guest"),
        password=unquote(parsed.password or "guest"),
        virtual_host=unquote(parsed.path[1:]) if len(parsed.path) > 1 else "/",
        confirm_publish=True,
    )
    connection.connect()
    return connection


@dataclass(frozen=True)
class PrivateNode:
    """A private node's addresses: AMQP, and the management API when it was enabled
    (``http://guest@127.0.0.1:PORT``, password ``guest``)."""

    amqp_url: str
    management_url: str | None
    name: str = ""
    environment: Mapping[str, str] = field(default_factory=dict, repr=False)

    def rabbitmqctl(self, *args: str) -> str:
        """Run ``rabbitmqctl -n NODE ARGS`` against this node; its output, or
        `BrokerUnavailable` with it when it fails."""
        ctl = shutil.which("rabbitmqctl", path=self.environment.get("PATH"))
        if ctl is None:
            raise BrokerUnavailable("rabbitmqctl not found")
        done = subprocess.run(
            [ctl, "-n", self.name, *args], env=dict(self.environment), capture_output=True,
            text=True, timeout=120,
        )
        if done.returncode != 0:
            raise BrokerUnavailable(f"rabbitmqctl {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout


@contextlib.contextmanager
def private_broker() -> Iterator[str]:
    """Start a RabbitMQ node of our own on 127.0.0.1, yield its URL, and stop it."""
    with private_node() as node:
        yield node.amqp_url


@contextlib.contextmanager
def private_node(
    management: bool = False,
    plugins: tuple[str, ...] = (),
    advanced_config: str | None = None,
    config: str = "",
) -> Iterator[PrivateNode]:
    """Start a RabbitMQ node of our own on 127.0.0.1 and stop it afterwards; with
    ``management``, the rabbitmq_management plugin is enabled in the node's own config folder
    (``rabbitmq-plugins --offline``) and its HTTP API listens on a free loopback port; the
    ``plugins`` named are enabled the same way (the machine's own plugins file is untouched).
    ``advanced_config`` is Erlang terms for the node's advanced.config (settings a plugin takes
    there whatever the broker's version, e.g. ``[{rabbitmq_tracing, [{directory, "..."}]}].``).
    ``config`` is more rabbitmq.conf lines (e.g. the stream plugin's listener)."""
    server = _server_binary()
    port = _free_port() if _port_taken(5672) or plugins else 5672
    http_port = _free_port() if management else None
    workdir = Path(tempfile.mkdtemp(prefix="xroute-rabbitmq-"))
    node = f"xroute-{os.getpid()}-{workdir.name[-8:]}@localhost"
    extra = config
    config = (
        f"listeners.tcp.1 = 127.0.0.1:{port}\nloopback_users = none\n"
        "log.console = false\nlog.file.level = warning\n"
    )
    if management:
        config += f"management.tcp.port = {http_port}\nmanagement.tcp.ip = 127.0.0.1\n"
    (workdir / "rabbitmq.conf").write_text(config + extra)
    (workdir / "enabled_plugins").write_text("[].\n")
    if advanced_config is not None:
        (workdir / "advanced.config").write_text(advanced_config)
    for sub in ("mnesia", "log"):
        (workdir / sub).mkdir()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([os.environ.get("PATH", ""), *SBIN]),
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(_free_port()),
        "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(workdir / "log"),
        "RABBITMQ_FEATURE_FLAGS_FILE": str(workdir / "feature_flags"),
        "RABBITMQ_PID_FILE": str(workdir / "pid"),
        "RABBITMQ_SERVER_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_CRASH_DUMP": str(workdir / "erl_crash.dump"),
    }
    enabled = (("rabbitmq_management",) if management else ()) + tuple(plugins)
    if enabled:
        try:
            _enable_plugins(env, enabled)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
    if os.geteuid() == 0:
        # Debian's wrapper runs the broker as the 'rabbitmq' user when started by root.
        with contextlib.suppress(KeyError, LookupError, OSError):
            shutil.chown(workdir, "rabbitmq", "rabbitmq")
            for path in workdir.rglob("*"):
                shutil.chown(path, "rabbitmq", "rabbitmq")
    output = open(workdir / "server.out", "wb")  # noqa: SIM115 (closed in finally)
    print(f"rabbitmq: starting a private node {node} on 127.0.0.1:{port}", file=sys.stderr)
    owned = Owned("rabbitmq", workdir, remove=[workdir])
    # Its own session; as root, Debian's wrapper runs it through su, in a session of su's own.
    process = owned.popen([server], env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not amqp_answers("127.0.0.1", port):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (workdir / "server.out").read_text(errors="replace")[-3000:]
                raise BrokerUnavailable(f"the private RabbitMQ did not start:\n{tail}")
            time.sleep(0.5)
        management_url = None
        if http_port is not None:
            # The HTTP listener comes up with the plugin, a moment after AMQP.
            while not _http_answers("127.0.0.1", http_port):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = (workdir / "server.out").read_text(errors="replace")[-3000:]
                    raise BrokerUnavailable(f"the management API did not start:\n{tail}")
                time.sleep(0.5)
            management_url = f"http://guest@127.0.0.1:{http_port}"
        yield PrivateNode(
            f"amqp://guest:guest@127.0.0.1:{port}/%2F", management_url, node, env
        )
    finally:
        print(f"rabbitmq: stopping {node}", file=sys.stderr)
        ctl = shutil.which("rabbitmqctl", path=env["PATH"])
        if ctl and process.poll() is None:
            subprocess.run([ctl, "-n", node, "stop"], env=env, capture_output=True, timeout=60)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        # What the stop left (the VM if it hung, an epmd it started if unused), and the folder.
        owned.stop()
        process.wait()
        output.close()


def _enable_plugins(env: dict[str, str], names: tuple[str, ...]) -> None:
    """Enable plugins in the node's own enabled_plugins file, offline (the node is not running
    yet; the machine's own plugins file is not touched)."""
    plugins = shutil.which("rabbitmq-plugins", path=env["PATH"])
    if plugins is None:
        raise BrokerUnavailable(f"rabbitmq-plugins not found: cannot enable {', '.join(names)}")
    done = subprocess.run(
        [plugins, "--offline", "enable", *names],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise BrokerUnavailable(
            f"rabbitmq-plugins could not enable {', '.join(names)}:\n{done.stdout}{done.stderr}"
        )


def _http_answers(host: str, port: int) -> bool:
    """True if an HTTP server answers at host:port (any status)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}/api/overview", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # 401 without credentials: it is there
    except OSError:
        return False


@contextlib.contextmanager
def rabbitmq_broker(private: bool = False) -> Iterator[str]:
    """The URL of a broker: ``XROUTE_AMQP_URL``, else one on 127.0.0.1:5672, else a private one
    (always a private one if ``private``: benchmarks want a broker nobody else is using)."""
    if not private:
        if os.environ.get("XROUTE_AMQP_URL"):
            yield os.environ["XROUTE_AMQP_URL"]
            return
        if amqp_answers("127.0.0.1", 5672):
            yield DEFAULT_URL
            return
    with private_broker() as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    """Run a command with ``XROUTE_AMQP_URL`` pointing at a broker."""
    parser = argparse.ArgumentParser(prog="python -m xroute.bench.rabbitmq", description=__doc__)
    parser.add_argument("--private", action="store_true", help="always start a private node")
    parser.add_argument(
        "--plugins",
        action="store_true",
        help="also start a private node with the exchange-type plugins (XROUTE_AMQP_PLUGINS_URL)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    try:
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(rabbitmq_broker(private=args.private))
            print(f"rabbitmq: using {url.split('@')[-1]}", file=sys.stderr)
            env = {**os.environ, "XROUTE_AMQP_URL": url}
            if args.plugins:
                node = stack.enter_context(private_node(plugins=PLUGINS))
                print(f"rabbitmq: plugins at {node.amqp_url.split('@')[-1]}", file=sys.stderr)
                env["XROUTE_AMQP_PLUGINS_URL"] = node.amqp_url
            return subprocess.run(command, env=env).returncode
    except BrokerUnavailable as error:
        print(f"rabbitmq: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
