"""``xroute demo``: route the bundled smart-home example (seed 000) and show who got what."""

from __future__ import annotations

from importlib.resources import files

from rich.table import Table

from xroute._show import console as user_console
from xroute.cli.app import cli
from xroute.core.topology import Topology

EXCHANGE = "home"


@cli.command()
def demo() -> None:
    """Route the smart-home keys of the seed article through a small topic topology."""
    data = files("xroute") / "data"
    topology = Topology.from_definitions(str(data / "smarthome.json"))
    keys = (data / "smarthome-keys.txt").read_text().split()
    console = user_console()
    bindings = Table(title=f"Bindings on topic exchange {EXCHANGE!r}")
    bindings.add_column("binding key")
    bindings.add_column("queue")
    for binding in topology.bindings(EXCHANGE):
        bindings.add_row(binding.routing_key, binding.destination.name)
    console.print(bindings)
    routes = Table(title="Routed")
    routes.add_column("routing key")
    routes.add_column("queues")
    by_queue: dict[str, list[str]] = {}
    for key in keys:
        queues = sorted(topology.route(EXCHANGE, key))
        routes.add_row(key, ", ".join(queues))
        for queue in queues:
            by_queue.setdefault(queue, []).append(key)
    console.print(routes)
    received = Table(title="Which queue got what")
    received.add_column("queue")
    received.add_column("messages", justify="right")
    received.add_column("routing keys")
    for queue in sorted(topology.queues):
        got = by_queue.get(queue, [])
        received.add_row(queue, str(len(got)), ", ".join(got))
    console.print(received)
