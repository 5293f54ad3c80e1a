"""What `xroute lint` reports: findings with a severity, a place, a reason and a remedy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from xroute.core.model import Binding

Severity = Literal["error", "warning", "info"]
# error: RabbitMQ would refuse it, or messages are lost without a trace;
# warning: routing is wasteful or likely not what was meant (``--strict`` fails on these too);
# info: worth knowing, often deliberate.
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


def binding_ref(binding: Binding | dict[str, Any]) -> dict[str, Any]:
    """A binding as the plain dict of a definitions export: source, destination, its type, key
    and arguments."""
    if isinstance(binding, dict):
        return {
            "source": binding.get("source"),
            "destination": binding.get("destination"),
            "destination_type": binding.get("destination_type", "queue"),
            "routing_key": binding.get("routing_key", ""),
            "arguments": binding.get("arguments") or {},
        }
    return {
        "source": binding.source,
        "destination": binding.destination.name,
        "destination_type": binding.destination.kind,
        "routing_key": binding.routing_key,
        "arguments": dict(binding.arguments),
    }


def describe_binding(ref: dict[str, Any]) -> str:
    """``'a.#' -> queue 'q'`` (with arguments when there are any), for messages."""
    args = f" {ref['arguments']}" if ref.get("arguments") else ""
    return f"{ref['routing_key']!r} -> {ref['destination_type']} {ref['destination']!r}{args}"


@dataclass(frozen=True)
class Finding:
    """One thing lint found: ``code`` names the kind (see docs/tools.md for the catalogue)."""

    code: str
    severity: Severity
    message: str
    why: str
    fix: str
    exchange: str | None = None
    binding: dict[str, Any] | None = None
    queue: str | None = None
    related: tuple[dict[str, Any], ...] = field(default=())

    def where(self) -> str:
        """The place, as text: exchange, binding or queue."""
        parts = []
        if self.exchange is not None:
            parts.append(f"exchange {self.exchange!r}")
        if self.binding is not None:
            parts.append(f"binding {describe_binding(self.binding)}")
        if self.queue is not None:
            parts.append(f"queue {self.queue!r}")
        return ", ".join(parts) or "topology"

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready data."""
        return {
            "code": self.code,
            "severity": self.severity,
            "exchange": self.exchange,
            "binding": self.binding,
            "queue": self.queue,
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
            "related": list(self.related),
        }


@dataclass
class LintReport:
    """Findings (errors first), the topic exchanges ranked by cost, and what was measured."""

    findings: list[Finding]
    costs: list[Any] = field(default_factory=list)  # xroute.tools.cost.ExchangeCost

    def count(self, severity: Severity) -> int:
        """How many findings have this severity."""
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def failing(self) -> bool:
        """True if some finding is an error or a warning (what ``--strict`` fails on)."""
        return any(f.severity in ("error", "warning") for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "counts": {s: self.count(s) for s in SEVERITIES},
            "findings": [f.to_dict() for f in self.findings],
            "costs": [c.to_dict() for c in self.costs],
        }


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))
