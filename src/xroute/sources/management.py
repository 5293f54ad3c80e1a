"""A live RabbitMQ as a definitions source: ``GET /api/definitions`` of its management API.

A URL names the broker and the user, never the password: ``http://user@host:15672`` (https
too; a path after the port is the API's prefix, ``management.path_prefix``). The password is
given by the caller, else read from ``RABBITMQ_PASSWORD``; the command line prompts for it.
Every failure is a typed `xroute.core.errors.ManagementError`: refused credentials, nothing
answering as a management API, a timeout, a virtual host the broker does not have.

The stdlib's urllib does the HTTP: one GET, basic auth, JSON back; no dependency is worth it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from xroute.core.errors import (
    ManagementAuthFailed,
    ManagementTimeout,
    ManagementUnavailable,
    ManagementURLError,
    VhostNotFound,
)

PASSWORD_VARIABLE = "RABBITMQ_PASSWORD"
DEFAULT_USER = "guest"  # RabbitMQ's own default, as rabbitmqadmin assumes
DEFAULT_PORT = 15672  # the management plugin's listener when the URL names no port
# A definitions export of a large broker (tens of thousands of bindings) takes a few seconds
# to render; a dead host should still fail fast enough for a person at a prompt.
DEFAULT_TIMEOUT_S = 30.0
_SCHEMES = ("http", "https")


def is_management_url(source: Any) -> bool:
    """True if ``source`` is text naming a management API (``http://`` or ``https://``)."""
    return isinstance(source, str) and source.strip().lower().startswith(
        tuple(f"{scheme}://" for scheme in _SCHEMES)
    )


@dataclass(frozen=True)
class ManagementEndpoint:
    """A parsed management API URL: where to connect and as whom (no password)."""

    scheme: str
    host: str
    port: int
    user: str
    prefix: str  # the API's path prefix, "" or "/something" (no trailing slash)

    @property
    def base(self) -> str:
        """``scheme://host:port/prefix``, safe to print: it holds no credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"

    def definitions_url(self, vhost: str | None = None) -> str:
        """The export of the whole broker, or of one virtual host (``/`` is sent as ``%2F``)."""
        if vhost is None:
            return f"{self.base}/api/definitions"
        return f"{self.base}/api/definitions/{quote(vhost, safe='')}"


def parse_management_url(url: str) -> ManagementEndpoint:
    """Check and split ``http(s)://user@host:port[/prefix]``; `ManagementURLError` otherwise.

    A password in the URL is refused: on a command line it would be seen by every user of the
    machine (``ps``) and kept in shell histories.
    """
    if not isinstance(url, str):
        raise ManagementURLError(f"a management API URL must be text, got {url!r}", url)
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as error:
        raise ManagementURLError(f"bad management API URL {url!r}: {error}", url) from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ManagementURLError(
            f"management API URL {url!r} must begin http:// or https://", url
        )
    if not parts.hostname:
        raise ManagementURLError(f"management API URL {url!r} names no host", url)
    if parts.password is not None:
        shown = url.replace(f":{parts.password}@", ":***@")
        raise ManagementURLError(
            f"management API URL {shown!r} holds a password: give only the user "
            f"(http://user@host:15672) and the password in {PASSWORD_VARIABLE} or at the prompt",
            shown,
        )
    if parts.query or parts.fragment:
        raise ManagementURLError(
            f"management API URL {url!r}: no query or fragment expected (use --vhost)", url
        )
    return ManagementEndpoint(
        scheme=scheme,
        host=parts.hostname,
        port=port or DEFAULT_PORT,
        user=unquote(parts.username) if parts.username else DEFAULT_USER,
        prefix=parts.path.rstrip("/"),
    )


def password_from_env() -> str | None:
    """``RABBITMQ_PASSWORD`` if it is set (an empty value counts: it is a password too)."""
    return os.environ.get(PASSWORD_VARIABLE)


def fetch_definitions(
    url: str,
    vhost: str | None = None,
    *,
    password: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """The definitions export of a live broker: ``GET /api/definitions`` (every virtual host,
    with ``vhost`` fields) or ``/api/definitions/<vhost>`` (one, without them).

    ``password`` defaults to ``RABBITMQ_PASSWORD``; with neither, `ManagementURLError`.
    Raises `ManagementAuthFailed`, `ManagementUnavailable`, `ManagementTimeout` or
    `VhostNotFound` (each names the URL and what to check).
    """
    endpoint = parse_management_url(url)
    if password is None:
        password = password_from_env()
    if password is None:
        raise ManagementURLError(
            f"no password for user {endpoint.user!r} at {endpoint.base}: set {PASSWORD_VARIABLE}",
            endpoint.base,
        )
    status, body = get(endpoint, endpoint.definitions_url(vhost), password, timeout)
    if vhost is not None and status == 400 and b"vhost_not_found" in body:
        # RabbitMQ 3.10.8 (seen here): 400 {"error":"bad_request","reason":"vhost_not_found"}.
        raise VhostNotFound(
            f"the broker at {endpoint.base} has no virtual host {vhost!r}", endpoint.base, vhost
        )
    if status == 404:
        # Other versions answer 404 for an absent vhost, as does anything but the plugin for
        # any /api path: /api/overview tells the two apart.
        if vhost is not None and get(endpoint, f"{endpoint.base}/api/overview", password, timeout)[0] == 200:
            raise VhostNotFound(
                f"the broker at {endpoint.base} has no virtual host {vhost!r}",
                endpoint.base,
                vhost,
            )
        raise _no_api(endpoint, "HTTP 404 on /api")
    if status != 200:
        raise ManagementUnavailable(
            f"the management API at {endpoint.base} answered HTTP {status} to "
            f"GET /api/definitions: {_snippet(body)}",
            endpoint.base,
        )
    try:
        parsed = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _no_api(endpoint, f"GET /api/definitions gave no JSON: {_snippet(body)}") from None
    if not isinstance(parsed, dict):
        raise _no_api(endpoint, f"GET /api/definitions gave {type(parsed).__name__}, not an object")
    return parsed


def get(
    endpoint: ManagementEndpoint, url: str, password: str, timeout: float
) -> tuple[int, bytes]:
    """One GET with basic auth: (status, body) for any HTTP answer but 401/403; the transport
    failures mapped to typed errors."""
    token = base64.b64encode(f"{endpoint.user}:{password}".encode()).decode("ascii")
    request = urllib.request.Request(
        url, headers={"Authorization": f"Basic {token}", "Accept": "application/json"}
    )
    context = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            raise ManagementAuthFailed(
                f"the management API at {endpoint.base} refused user {endpoint.user!r} "
                f"(HTTP {error.code}): check the password ({PASSWORD_VARIABLE}) and that the "
                "user has the 'administrator' tag, which /api/definitions needs",
                endpoint.base,
                endpoint.user,
            ) from None
        return error.code, error.read()
    except (TimeoutError, socket.timeout):
        raise _timeout(endpoint, timeout) from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, (TimeoutError, socket.timeout)):
            raise _timeout(endpoint, timeout) from None
        raise _no_api(endpoint, str(error.reason)) from None
    except (ConnectionError, OSError) as error:
        # A connection reset while reading, or a server that closes without answering.
        raise _no_api(endpoint, str(error) or type(error).__name__) from None


def _timeout(endpoint: ManagementEndpoint, timeout: float) -> ManagementTimeout:
    return ManagementTimeout(
        f"the management API at {endpoint.base} did not answer within {timeout:g} s",
        endpoint.base,
        timeout,
    )


def _no_api(endpoint: ManagementEndpoint, reason: str) -> ManagementUnavailable:
    return ManagementUnavailable(
        f"no RabbitMQ management API at {endpoint.base} ({reason}): is the broker running, "
        "with the rabbitmq_management plugin enabled (rabbitmq-plugins enable "
        "rabbitmq_management), and is the port its HTTP listener's?",
        endpoint.base,
    )


def _snippet(body: bytes) -> str:
    text = body[:200].decode("utf-8", errors="replace")
    return repr(text) + ("..." if len(body) > 200 else "")
