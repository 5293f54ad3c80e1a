"""A live broker as a definitions source: URL parsing and the mapping of every failure to a typed
error, against a tiny management API served by http.server in a thread (the real broker is in
tests/conformance/test_management_api.py)."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from tests.test_definitions import EXPORT
from xroute import (
    ManagementAuthFailed,
    ManagementTimeout,
    ManagementUnavailable,
    ManagementURLError,
    Topology,
    VhostNotFound,
    XRouteError,
)
from xroute.cli import EXIT_BAD_INPUT, EXIT_OK, cli
from xroute.sources.management import PASSWORD_VARIABLE, fetch_definitions, parse_management_url

PASSWORD = "s3cret"


class FakeManagement(BaseHTTPRequestHandler):
    """Answers as RabbitMQ's management API does (or, per ``mode``, as a broken one)."""

    mode = "ok"  # ok | 404-vhost | no-api | slow | garbage
    seen: list[str]

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append(self.path)
        if self.mode == "slow":
            time.sleep(2)
        if self.mode == "no-api":
            return self._send(404, b"<html>Not Found</html>", "text/html")
        expected = "Basic " + base64.b64encode(f"guest:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            return self._json(401, {"error": "not_authorized", "reason": "Login failed"})
        if self.mode == "garbage":
            return self._send(200, b"hello", "text/plain")
        path = self.path.split("?")[0]
        if path == "/api/overview":
            return self._json(200, {"rabbitmq_version": "3.10.8"})
        if path == "/api/definitions":
            return self._json(200, EXPORT)
        if path.startswith("/api/definitions/"):
            vhost = unquote(path.removeprefix("/api/definitions/"))
            if vhost != "/" and self.mode == "404-vhost":  # as other versions answer
                return self._json(404, {"error": "Object Not Found", "reason": "Not Found"})
            if vhost != "/":  # as RabbitMQ 3.10.8 answers (tests/conformance/test_management_api.py)
                return self._json(400, {"error": "bad_request", "reason": "vhost_not_found"})
            strip = {
                section: [{k: v for k, v in e.items() if k != "vhost"} for e in EXPORT[section]]
                for section in ("queues", "exchanges", "bindings")
            }
            return self._json(200, {"rabbit_version": "3.10.8", **strip})
        return self._json(404, {"error": "Object Not Found", "reason": "Not Found"})

    def _json(self, status: int, body: object) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


def serve(mode: str) -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (FakeManagement,), {"mode": mode, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://guest@127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def api():
    yield from serve("ok")


@pytest.fixture(autouse=True)
def no_password_in_env(monkeypatch):
    monkeypatch.delenv(PASSWORD_VARIABLE, raising=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ------------------------------------------------------------------ URLs


def test_url_parts_and_defaults():
    e = parse_management_url("http://ops@rabbit.example:15673/admin/")
    assert (e.scheme, e.host, e.port, e.user, e.prefix) == ("http", "rabbit.example", 15673, "ops", "/admin")
    assert e.definitions_url() == "http://rabbit.example:15673/admin/api/definitions"
    assert e.definitions_url("/") == "http://rabbit.example:15673/admin/api/definitions/%2F"
    plain = parse_management_url("HTTPS://broker")
    assert (plain.scheme, plain.port, plain.user, plain.prefix) == ("https", 15672, "guest", "")


@pytest.mark.parametrize(
    "url, says",
    [
        ("http://ops:hunter2@host:15672", "holds a password"),
        ("ftp://ops@host", "must begin http"),
        ("http://", "names no host"),
        ("http://ops@host:notaport", "bad management API URL"),
        ("http://ops@host:15672?vhost=x", "no query"),
    ],
)
def test_bad_urls_are_refused_by_name(url, says):
    with pytest.raises(ManagementURLError, match=says) as caught:
        parse_management_url(url)
    assert "hunter2" not in str(caught.value)  # a password is never echoed back


def test_no_password_anywhere_is_a_clear_error(api):
    url, seen = api
    with pytest.raises(ManagementURLError, match=PASSWORD_VARIABLE):
        fetch_definitions(url)
    assert seen == []  # nothing sent without a password


# ------------------------------------------------------------------ answers


def test_whole_broker_and_one_vhost(api, monkeypatch):
    url, seen = api
    assert fetch_definitions(url, password=PASSWORD) == EXPORT
    monkeypatch.setenv(PASSWORD_VARIABLE, PASSWORD)
    one = fetch_definitions(url, "/")
    assert seen == ["/api/definitions", "/api/definitions/%2F"]
    assert all("vhost" not in e for e in one["bindings"]) and len(one["bindings"]) == 5


def test_topology_from_a_url_routes_as_from_the_file(api):
    url, _ = api
    live = Topology.from_definitions(url, vhost="/", password=PASSWORD)
    from_file = Topology.from_definitions(EXPORT)
    for exchange, key, headers in [("logs", "a.b.c", None), ("logs", "x.hdr", {"k": 1}), ("logs", "zz", None), ("multi", ":c1", None)]:
        assert live.route(exchange, key, headers) == from_file.route(exchange, key, headers)


def test_refused_credentials(api):
    url, _ = api
    with pytest.raises(ManagementAuthFailed, match="refused user 'guest'.*HTTP 401") as caught:
        fetch_definitions(url, password="wrong")
    assert isinstance(caught.value, PermissionError) and caught.value.user == "guest"
    assert "wrong" not in str(caught.value)


@pytest.mark.parametrize("mode, asked", [("ok", ["/api/definitions/nope"]), ("404-vhost", ["/api/definitions/nope", "/api/overview"])])
def test_absent_vhost(mode, asked):
    for url, seen in serve(mode):
        with pytest.raises(VhostNotFound, match="no virtual host 'nope'") as caught:
            fetch_definitions(url, "nope", password=PASSWORD)
        assert caught.value.vhost == "nope" and isinstance(caught.value, LookupError)
        assert seen == asked


def test_connection_refused_means_no_management_api():
    url = f"http://guest@127.0.0.1:{free_port()}"
    with pytest.raises(ManagementUnavailable, match="rabbitmq_management") as caught:
        fetch_definitions(url, password=PASSWORD)
    assert isinstance(caught.value, ConnectionError)


@pytest.mark.parametrize("vhost", [None, "/"])
def test_404_on_api_means_no_management_plugin(vhost):
    for url, _ in serve("no-api"):
        with pytest.raises(ManagementUnavailable, match="HTTP 404 on /api"):
            fetch_definitions(url, vhost, password=PASSWORD)


def test_an_answer_that_is_not_json():
    for url, _ in serve("garbage"):
        with pytest.raises(ManagementUnavailable, match="gave no JSON: 'hello'"):
            fetch_definitions(url, password=PASSWORD)


def test_timeout():
    for url, _ in serve("slow"):
        with pytest.raises(ManagementTimeout, match="did not answer within 0.3 s") as caught:
            fetch_definitions(url, password=PASSWORD, timeout=0.3)
        assert caught.value.timeout == 0.3 and isinstance(caught.value, TimeoutError)


def test_every_management_error_is_an_xroute_error():
    for error in (ManagementAuthFailed, ManagementTimeout, ManagementUnavailable, ManagementURLError, VhostNotFound):
        assert issubclass(error, XRouteError)


# ------------------------------------------------------------------ the command line


def run(*args: str, env: dict | None = None, input: str | None = None):
    return CliRunner().invoke(cli, list(args), env=env, input=input)


def test_route_reads_a_live_broker_with_the_password_from_the_environment(api):
    url, _ = api
    result = run("route", "-d", url, "--vhost", "/", "-e", "logs", "-k", "a.b.c", env={PASSWORD_VARIABLE: PASSWORD})
    assert result.exit_code == EXIT_OK, result.output
    assert result.stdout.splitlines() == ["q1"]


def test_the_password_is_prompted_hidden_when_not_in_the_environment(api, monkeypatch):
    url, _ = api
    monkeypatch.setattr("xroute.cli.options.can_ask", lambda: True)  # as on a terminal
    result = run("explain", "-d", url, "-e", "logs", "-k", "a.b.c", "--json", input=PASSWORD + "\n")
    assert result.exit_code == EXIT_OK, result.output
    assert "RabbitMQ password for 'guest'" in result.stderr
    assert PASSWORD not in result.stderr  # hidden: not echoed
    assert json.loads(result.stdout)["queues"] == ["q1"]


def test_without_a_password_or_a_terminal_the_error_says_how_to_give_one(api, tmp_path):
    url, seen = api
    result = run("definitions", "fetch", url, "-o", str(tmp_path / "d.json"))
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.strip().splitlines() == [
        f"xroute: error: no password for 'guest' at {parse_management_url(url).base}, and no "
        f"terminal to ask for one on: set {PASSWORD_VARIABLE} in the environment"
    ]
    assert seen == [] and not (tmp_path / "d.json").exists()


def test_lint_reads_a_live_broker(api):
    url, _ = api
    result = run("lint", "-d", url, "--json", env={PASSWORD_VARIABLE: PASSWORD})
    assert result.exit_code == EXIT_OK, result.output
    assert "findings" in json.loads(result.stdout)


def test_definitions_fetch_writes_a_snapshot_every_command_reads(api, tmp_path):
    url, _ = api
    out = tmp_path / "defs.json"
    result = run("definitions", "fetch", url, "-o", str(out), env={PASSWORD_VARIABLE: PASSWORD})
    assert result.exit_code == EXIT_OK, result.output
    assert json.loads(out.read_text()) == EXPORT
    assert "5 bindings" in result.stderr
    routed = run("route", "-d", str(out), "-e", "logs", "-k", "a.b.c")
    assert routed.stdout.splitlines() == ["q1"]


def test_cli_errors_are_one_line_and_exit_2(api):
    url, _ = api
    result = run("definitions", "fetch", url, "--vhost", "nope", "-o", "-", env={PASSWORD_VARIABLE: PASSWORD})
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.strip() == f"xroute: error: the broker at {url.replace('guest@', '')} has no virtual host 'nope'"
    wrong = run("route", "-d", url, "-e", "logs", "-k", "a", env={PASSWORD_VARIABLE: "bad"})
    assert wrong.exit_code == EXIT_BAD_INPUT and "refused user 'guest'" in wrong.stderr
    inline = run("definitions", "fetch", "http://guest:pw@127.0.0.1:1", "-o", "-")
    assert inline.exit_code == EXIT_BAD_INPUT and "holds a password" in inline.stderr
    not_url = run("definitions", "fetch", "defs.json", "-o", "-")
    assert not_url.exit_code == EXIT_BAD_INPUT and "not a management API URL" in not_url.stderr
