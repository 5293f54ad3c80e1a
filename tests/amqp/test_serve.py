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

from xroute.topology import Topology


def test_serve_loads_definitions_and_routes(tmp_path: Path):
    topology = Topology()
    topology.declare_exchange("orders", "topic")
    topology.declare_queue("eu-orders")
    topology.bind("orders", "eu-orders", "eu.#")
    definitions = tmp_path / "defs.json"
    definitions.write_text(json.dumps(topology.to_definitions()))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    process = subprocess.Popen(
        [sys.executable, "-c", "from xroute.cli import main; main()", "serve", "--port", "0", "--definitions",
         str(definitions), "--rabbitmq", "3.10", "--user", "app:secret"],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = process.stderr.readline()
        url = re.search(r"amqp://\S+", line).group(0)
        assert url.startswith("amqp://app:secret@127.0.0.1:")
        connection = pika.BlockingConnection(pika.URLParameters(url))
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish("orders", "eu.fr.paris", b"order-1")
        method, _, body = channel.basic_get("eu-orders", auto_ack=True)
        assert body == b"order-1" and method.routing_key == "eu.fr.paris"
        connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
