"""A pytest plugin (``-p broker_plugin``) that points the client suites at one broker.

The broker is ``XROUTE_SUITE_HOST``:``XROUTE_SUITE_PORT`` (RabbitMQ, or ``xroute serve``).

- aiormq's conftest leaves ``amqp_direct_url`` and ``rabbitmq_container`` to the caller: they
  are defined here.
- aio-pika's conftest starts Docker: its ``tests.docker_client`` is replaced, before the
  conftest imports it, by a client whose "container" is our broker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

HOST = os.environ.get("XROUTE_SUITE_HOST", "127.0.0.1")
PORT = int(os.environ.get("XROUTE_SUITE_PORT", "5672"))


@dataclass
class Container:
    """What the suites read of a RabbitMQ container: its host and its ports."""

    host: str = HOST
    ports: dict = field(default_factory=lambda: {"5672/tcp": PORT, "5671/tcp": PORT})
    id: str = "xroute-client-suites"


class NoDocker:
    """Stands in for aio-pika's Docker client: every container asked for is our broker."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def run(self, image, ports, environment=None):
        from tests.docker_client import ContainerInfo

        return ContainerInfo(id="xroute-client-suites", ports={p: PORT for p in ports}, host=HOST)

    def kill(self, container_id) -> None:
        pass

    def remove(self, container_id) -> None:
        pass


try:  # aio-pika's suite: replace its Docker client before its conftest is imported
    import tests.docker_client as docker_client

    if hasattr(docker_client, "DockerClient"):
        docker_client.DockerClient = NoDocker
        docker_client.check_docker_available = lambda *args, **kwargs: None
except ImportError:
    pass


@pytest.fixture(scope="session")
def rabbitmq_container() -> Container:
    return Container()


@pytest.fixture(scope="session")
def amqp_direct_url():
    from yarl import URL

    return URL.build(scheme="amqp", user="guest", password="guest", host=HOST, port=PORT,
                     path="//")


# Every phase's outcome, one JSON line each, to XROUTE_SUITE_OUTCOMES (report.py reads them).
# Written as the run goes, so a run that crashes or times out still leaves what it ran. The
# absolute node id lets report.py rerun one test in isolation from any folder.
OUTCOMES = os.environ.get("XROUTE_SUITE_OUTCOMES")
_ROOT: list = []  # the session's rootdir: node ids are relative to it


def pytest_configure(config) -> None:
    _ROOT[:] = [config.rootpath]


def pytest_runtest_logreport(report) -> None:
    if not OUTCOMES:
        return
    import json

    path, _, rest = report.nodeid.partition("::")
    absolute = str((_ROOT[0] / path).resolve()) + ("::" + rest if rest else "")
    outcome = "skipped" if hasattr(report, "wasxfail") else report.outcome
    with open(OUTCOMES, "a") as out:
        out.write(json.dumps({"test": report.nodeid, "node": absolute, "when": report.when,
                              "outcome": outcome}) + "\n")
