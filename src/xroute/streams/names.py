"""Streams named by a pattern: a regular expression that must match a stream's whole name
(``orders-.*``), as Kafka's ``subscribePattern`` matches topics.

RabbitMQ 3.10's stream protocol cannot list streams, so the list comes from the management
HTTP API: ``GET /api/queues/<vhost>?columns=name,type``, the queues of type ``stream``. The API
is at the source's ``managementUri`` (the URI's ``management=``), by default
``http://<the stream node's host>:15672``, as the stream connection's user with its password.
`matching` and `stream_names` are pure; `list_streams` does the one HTTP call.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from xroute.core.errors import ManagementError, ManagementUnavailable, StreamURIError
from xroute.streams.uri import StreamEndpoint

DEFAULT_MANAGEMENT_PORT = 15672
TIMEOUT_S = 10.0


def compile_pattern(text: str) -> re.Pattern[str]:
    """``text`` as a regular expression; `StreamURIError` when it is not one."""
    try:
        return re.compile(text)
    except re.error as error:
        raise StreamURIError(
            f"streamPattern {text!r} is not a regular expression: {error}"
        ) from None


def matching(pattern: re.Pattern[str], names: list[str]) -> tuple[str, ...]:
    """The ``names`` the pattern matches whole, sorted (a stable order for offsets and
    partitions)."""
    return tuple(sorted({n for n in names if pattern.fullmatch(n)}))


def stream_names(queues: Any) -> list[str]:
    """The names of the streams among the management API's queues (``type`` ``stream``);
    `ManagementUnavailable` when the answer is not a list of queues."""
    if not isinstance(queues, list) or not all(isinstance(q, dict) for q in queues):
        raise ManagementUnavailable(
            f"GET /api/queues gave {type(queues).__name__}, not a list of queues"
        )
    return [str(q["name"]) for q in queues if q.get("type") == "stream" and "name" in q]


def management_base(endpoint: StreamEndpoint, management_uri: str | None) -> str:
    """Where the management API is: ``management_uri`` (its user, if it names one, must be
    the stream connection's), else ``http://<host>:15672``."""
    from xroute.sources.management import parse_management_url

    if not management_uri:
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        return f"http://{host}:{DEFAULT_MANAGEMENT_PORT}"
    parsed = parse_management_url(management_uri)
    if "@" in management_uri.split("//", 1)[-1].split("/", 1)[0] and parsed.user != endpoint.user:
        raise StreamURIError(
            f"managementUri {management_uri!r} names user {parsed.user!r}; the streams are "
            f"read as {endpoint.user!r}, who lists them too (leave the user out)"
        )
    return parsed.base


def list_streams(
    endpoint: StreamEndpoint, management_uri: str | None, pattern_text: str = "",
    timeout: float = TIMEOUT_S,
) -> list[str]:
    """The streams of the endpoint's virtual host, from the management API. A failure is a
    typed `ManagementError` saying what a pattern needs (`ManagementUnavailable` and
    `ManagementTimeout` are transient: a reader retries them while the node restarts)."""
    from xroute.sources.management import get, parse_management_url

    base = management_base(endpoint, management_uri)
    api = parse_management_url(base.replace("://", f"://{quote(endpoint.user, safe='')}@", 1))
    url = f"{api.base}/api/queues/{quote(endpoint.vhost, safe='')}?columns=name,type"
    why = (f"streamPattern {pattern_text!r} lists the streams through RabbitMQ's management "
           f"API (the stream protocol of 3.10 cannot)")
    try:
        status, body = get(api, url, endpoint.password, timeout)
    except ManagementError as error:
        error.args = (f"{why}: {error} Set managementUri (management= in the URI) to where "
                      f"the API listens; user {endpoint.user!r} needs the 'monitoring' or "
                      "'management' tag.",)
        raise
    if status == 404:  # not worth retrying: a wrong vhost or no plugin stays so
        raise ManagementError(
            f"{why}: GET {url} answered 404: no virtual host {endpoint.vhost!r} there, or no "
            "management API (rabbitmq-plugins enable rabbitmq_management)", api.base
        )
    if status >= 500:  # seen on 3.10 while a restarted node recovers its streams: retried
        raise ManagementUnavailable(f"{why}: GET {url} answered HTTP {status}", api.base)
    if status != 200:
        raise ManagementError(f"{why}: GET {url} answered HTTP {status}", api.base)
    try:
        queues = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ManagementUnavailable(f"{why}: GET {url} gave no JSON", api.base) from None
    return stream_names(queues)


def resolve(
    endpoint: StreamEndpoint, pattern: str, management_uri: str | None, reconnect_s: float
) -> tuple[tuple[str, ...], frozenset[str]]:
    """The streams ``pattern`` matches now, and every stream of the virtual host (to tell a
    stream that is gone from one no longer matched); retried while the node is away."""
    from xroute.streams.reconnect import retrying

    compiled = compile_pattern(pattern)
    names = retrying(
        lambda: list_streams(endpoint, management_uri, pattern),
        timeout_s=reconnect_s,
        what=f"listing the streams streamPattern {pattern!r} matches",
        endpoint=endpoint.uri,
    )
    return matching(compiled, names), frozenset(names)
