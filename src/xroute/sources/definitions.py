"""RabbitMQ definitions exports (``rabbitmqctl export_definitions``, ``/api/definitions``) in
and out. One virtual host at a time; the alternate exchanges set by policy are honoured."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from xroute.core.errors import DefinitionsError, short_repr
from xroute.core.model import ALTERNATE_EXCHANGE, DEFAULT_EXCHANGE
from xroute.sources.management import fetch_definitions, is_management_url
from xroute.sources.storage import is_uri, locate

_SECTIONS = ("queues", "exchanges", "bindings", "policies")
# What RabbitMQ's exports hold (rabbit_definitions, the management API's /api/definitions): the
# lists of objects, and the version strings.
EXPORT_LISTS = ("exchanges", "queues", "bindings", "policies", "vhosts", "users", "permissions",
                "topic_permissions", "parameters", "global_parameters")
EXPORT_STRINGS = ("rabbit_version", "rabbitmq_version", "product_name", "product_version")
# The version profile an export is to be read with, when a command adds one (`with_profile`):
# it travels with the definitions to Spark's workers. RabbitMQ ignores keys it does not know.
PROFILE_KEY = "xroute_rabbitmq"


def with_profile(
    source: str | Path | Mapping[str, Any], rabbitmq: str | None
) -> str | Path | Mapping[str, Any]:
    """``source`` as it is without a profile; else the parsed export carrying ``rabbitmq``
    (`PROFILE_KEY`), which `Topology.from_definitions` honours when it is given none itself."""
    if rabbitmq is None:
        return source
    from xroute.core.profiles import profile

    profile(rabbitmq)  # an unknown version fails here
    return {**read_definitions(source), PROFILE_KEY: rabbitmq}


def read_definitions(
    source: str | Path | Mapping[str, Any],
    vhost: str | None = None,
    *,
    password: str | None = None,
) -> dict[str, Any]:
    """The parsed export from a path, JSON text, a dict that is already parsed, or a live
    broker's management API URL (``http(s)://user@host:15672``, `xroute.sources.management`: only
    ``vhost`` is fetched when given; ``password`` defaults to ``RABBITMQ_PASSWORD``), or a file
    at another URI (s3://, gs://, hdfs://...: `xroute.sources.storage`). An http(s) URL is always read
    as a management API, never as a file served over HTTP."""
    if isinstance(source, Mapping):
        check_export(source)
        return dict(source)
    if not isinstance(source, (str, Path)):
        raise DefinitionsError(
            f"definitions must be a path, JSON text or a dict, got {type(source).__name__} "
            f"({short_repr(source)})",
            type(source).__name__,
        )
    if is_management_url(source):
        return fetch_definitions(str(source), vhost, password=password)
    text = str(source)
    if isinstance(source, str) and text.lstrip().startswith("{"):
        where = "definitions text"
    else:
        where = text
        if not is_uri(text) and Path(source).is_dir():
            raise DefinitionsError(
                f"{where!r} is a folder; give a definitions export file (rabbitmqctl "
                "export_definitions, or xroute definitions fetch)",
                where,
            )
        try:
            if is_uri(text):  # s3://, gs://, hdfs://...: any storage xroute.sources.storage reads
                text = locate(text).read_bytes().decode("utf-8")
            else:
                text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as error:  # ValueError: a NUL in the path
            raise DefinitionsError(f"cannot read definitions file {where!r}: {error}", where) from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise DefinitionsError(f"{where!r} is not valid JSON: {error}", where) from None
    if not isinstance(parsed, dict):
        raise DefinitionsError(
            f"{where!r} is not a definitions export: expected a JSON object, got "
            f"{type(parsed).__name__}",
            where,
        )
    check_export(parsed, where)
    return parsed


def check_export(defs: Mapping[str, Any], where: str = "definitions") -> None:
    """Refuse, in one line naming ``where``, what is not a RabbitMQ definitions export: it
    must hold at least one of RabbitMQ's sections (`EXPORT_LISTS`, `EXPORT_STRINGS`), each of
    the right shape. Any JSON object used to load as an empty topology: a CI gate pointed at
    package.json passed."""
    found = [key for key in (*EXPORT_LISTS, *EXPORT_STRINGS) if key in defs]
    if not found:
        keys = ", ".join(sorted(map(str, defs))[:8]) or "none"
        raise DefinitionsError(
            f"{where!r} is not a RabbitMQ definitions export: it has none of its sections "
            f"(exchanges, queues, bindings, policies, vhosts, users, permissions, parameters, "
            f"rabbit_version...); its keys: {keys}",
            where,
        )
    for key in found:
        value = defs[key]
        if key in EXPORT_LISTS:
            if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
                raise DefinitionsError(
                    f"{where!r} is not a RabbitMQ definitions export: {key!r} must be a list "
                    f"of objects, got {short_repr(value)}",
                    where,
                )
        elif not isinstance(value, str):
            raise DefinitionsError(
                f"{where!r} is not a RabbitMQ definitions export: {key!r} must be text, got "
                f"{short_repr(value)}",
                where,
            )


def section_entries(defs: Mapping[str, Any], section: str) -> list[dict[str, Any]]:
    """The entries of one section (``queues``, ``bindings``...), checked to be a list of objects."""
    entries = defs.get(section, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise DefinitionsError(f"definitions: {section!r} must be a list of objects", section)
    return entries


def _field(entry: Mapping[str, Any], name: str, kind: type | tuple, section: str, default=None):
    if name not in entry:
        if default is not None:
            return default
        raise DefinitionsError(f"definitions: an entry in {section!r} has no {name!r}: {short_repr(entry)}", entry)
    value = entry[name]
    if not isinstance(value, kind):
        raise DefinitionsError(
            f"definitions: {section} entry {short_repr(entry.get('name', entry))}: {name!r} must be "
            f"{getattr(kind, '__name__', kind)}, got {short_repr(value)}",
            entry,
        )
    return value


def pick_vhost(defs: Mapping[str, Any], vhost: str | None) -> str | None:
    """The virtual host to read: ``vhost`` if the export holds it, else the only one there is
    (``None`` for a single-vhost export without ``vhost`` fields)."""
    if vhost is not None and not isinstance(vhost, str):
        raise DefinitionsError(f"a virtual host is a name (text), got {short_repr(vhost)}", vhost)
    named = [
        entry["vhost"]
        for section in _SECTIONS
        for entry in section_entries(defs, section)
        if "vhost" in entry
    ]
    # A full export also lists its virtual hosts, some perhaps empty.
    named += [entry.get("name") for entry in section_entries(defs, "vhosts")]
    for name in named:
        if not isinstance(name, str):
            raise DefinitionsError(
                f"definitions: a virtual host name is not text: {short_repr(name)}", name
            )
    present = set(named)
    if vhost is not None:
        if present and vhost not in present:
            raise DefinitionsError(
                f"definitions hold no virtual host {vhost!r}; they hold {sorted(present)}", vhost
            )
        return vhost
    if len(present) > 1:
        raise DefinitionsError(
            f"definitions hold several virtual hosts {sorted(present)}; choose one with vhost= (--vhost on the command line)",
            sorted(present),
        )
    return next(iter(present), None)


def _policy_alternates(policies: list[dict[str, Any]], exchange_names: list[str]) -> dict[str, str]:
    # The policy of highest priority that matches an exchange decides; arguments set by the
    # client take precedence over it (applied by the caller).
    chosen: dict[str, tuple[int, str]] = {}
    for policy in policies:
        definition = _field(policy, "definition", dict, "policies")
        alternate = definition.get(ALTERNATE_EXCHANGE)
        if policy.get("apply-to", "all") not in ("all", "exchanges"):
            continue
        try:
            pattern = re.compile(_field(policy, "pattern", str, "policies"))
        except re.error as error:
            raise DefinitionsError(
                f"policy {short_repr(policy.get('name'))}: bad pattern: {error}", policy
            ) from None
        priority = policy.get("priority", 0)
        if type(priority) is not int:
            raise DefinitionsError(
                f"policy {short_repr(policy.get('name'))}: priority must be an integer, got "
                f"{short_repr(priority)}",
                policy,
            )
        for name in exchange_names:
            if pattern.search(name) and (name not in chosen or priority > chosen[name][0]):
                chosen[name] = (priority, alternate)
    return {name: alt for name, (_, alt) in chosen.items() if isinstance(alt, str)}


class QueueRecord(NamedTuple):
    """A queue of an export, its fields checked."""

    name: str
    durable: bool
    auto_delete: bool
    arguments: dict[str, Any]


class ExchangeRecord(NamedTuple):
    """An exchange of an export, its fields checked; ``policy_alternate`` is the alternate a
    policy gives it (arguments set by the client take precedence, as in RabbitMQ)."""

    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: dict[str, Any]
    policy_alternate: str | None


class BindingRecord(NamedTuple):
    """A binding of an export, its fields checked."""

    source: str
    destination: str
    destination_type: str
    routing_key: str
    arguments: dict[str, Any]


class ExportRecords(NamedTuple):
    """One virtual host of a definitions export as plain records, in the export's order, which
    stands for their creation order where a type depends on it (``x-consistent-hash``).
    `Topology.from_definitions` builds a topology from them; this module knows no Topology."""

    queues: list[QueueRecord]
    exchanges: list[ExchangeRecord]
    bindings: list[BindingRecord]
    policies: list[dict[str, Any]]
    rabbitmq: str | None  # the version profile the export carries (`with_profile`), if any


def parse_definitions(
    source: str | Path | Mapping[str, Any],
    vhost: str | None = None,
    *,
    password: str | None = None,
) -> ExportRecords:
    """The records of one virtual host of a definitions export (anything `read_definitions`
    reads); errors name the entry that is wrong. The default exchange's own entry is left out."""
    defs = read_definitions(source, vhost, password=password)
    chosen = pick_vhost(defs, vhost)

    def of_vhost(section: str) -> list[dict[str, Any]]:
        return [e for e in section_entries(defs, section) if e.get("vhost", chosen) == chosen]

    exchanges = of_vhost("exchanges")
    policies = of_vhost("policies")
    alternates = _policy_alternates(
        policies, [_field(e, "name", str, "exchanges") for e in exchanges]
    )
    queues = [
        QueueRecord(
            _field(queue, "name", str, "queues"),
            _field(queue, "durable", bool, "queues", True),
            _field(queue, "auto_delete", bool, "queues", False),
            _field(queue, "arguments", dict, "queues", {}),
        )
        for queue in of_vhost("queues")
    ]
    exchange_records = [
        ExchangeRecord(
            exchange["name"],
            _field(exchange, "type", str, "exchanges"),
            _field(exchange, "durable", bool, "exchanges", True),
            _field(exchange, "auto_delete", bool, "exchanges", False),
            _field(exchange, "internal", bool, "exchanges", False),
            _field(exchange, "arguments", dict, "exchanges", {}),
            # An alternate "" (the default exchange) is never used, as in RabbitMQ.
            alternates.get(exchange["name"]) or None,
        )
        for exchange in exchanges
        if exchange["name"] != DEFAULT_EXCHANGE
    ]
    bindings = [
        BindingRecord(
            _field(binding, "source", str, "bindings"),
            _field(binding, "destination", str, "bindings"),
            _field(binding, "destination_type", str, "bindings", "queue"),
            _field(binding, "routing_key", str, "bindings", ""),
            _field(binding, "arguments", dict, "bindings", {}),
        )
        for binding in of_vhost("bindings")
    ]
    profile_name = defs.get(PROFILE_KEY)
    return ExportRecords(queues, exchange_records, bindings, policies, profile_name)
