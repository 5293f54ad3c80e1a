"""``xroute serve``: a broker process loading a definitions export, stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pika

from xroute.bench.owned import Owned
from xroute.core.topology import Topology


def test_serve_loads_definitions_and_routes(tmp_path: Path):
    topology = Topology()
    topology.declare_exchange("orders", "topic")
    topology.declare_queue("eu-orders")
    topology.bind("orders", "eu-orders", "eu.#")
    definitions = tmp_path / "defs.json"
    definitions.write_text(json.dumps(topology.to_definitions()))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    process = Owned("xroute-serve").popen(
        [sys.executable, "-c", "from xroute.cli import main; main()", "serve", "--port", "0", "--definitions",
         str(definitions), "--rabbitmq", "3.10", "--user", "app:secret"],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = process.stderr.readline()
        address = re.search(r"amqp://(\S+)/", line).group(1)
        # The address is printed, never the credentials (issue 35).
        assert address.startswith("127.0.0.1:") and "secret" not in line, line
        connection = pika.BlockingConnection(pika.URLParameters(f"amqp://app:secret@{address}/"))
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish("orders", "eu.fr.paris", b"order-1")
        method, _, body = channel.basic_get("eu-orders", auto_ack=True)
        assert body == b"order-1" and method.routing_key == "eu.fr.paris"
        connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0


def test_serve_warns_beyond_loopback_and_refuses_blank_passwords():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    serve = [sys.executable, "-c", "from xroute.cli import main; main()", "serve", "--port", "0"]
    blank = subprocess.run(serve + ["--user", "app:"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert blank.returncode == 2 and "blank password" in blank.stderr, blank.stderr
    process = Owned("xroute-serve").popen(serve + ["--host", "0.0.0.0"], stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        start, warning = process.stderr.readline(), process.stderr.readline()
        assert "amqp://0.0.0.0:" in start and "guest" not in start
        assert "warning: listening on 0.0.0.0" in warning and "loopback-only: guest" in warning
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
