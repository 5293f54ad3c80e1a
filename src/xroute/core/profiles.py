"""RabbitMQ version profiles: what routing differs between the versions xroute reproduces.

`Topology(rabbitmq="3.10")` routes as RabbitMQ 3.10 does; without a profile xroute follows 4.3,
except that it accepts any number of ``#`` words in a topic binding. docs/semantics.md has the
table of differences, each with the RabbitMQ change that made it.

"4.3" is the latest 4.3 release (4.3.5: RabbitMQ backports its routing changes to 4.3.x).
"main" is RabbitMQ's main branch as read at commit 5b09e556da (2026-08-21): its routing is
4.3.5's (no routing change after 4.3.5 was merged there), so the two profiles are the same
rules under two names, and "main" is where a later change will go.
"""

from __future__ import annotations

from dataclasses import dataclass

from xroute.core.errors import UnknownProfile

# Most recent first.
VERSIONS = ("4.3", "4.0", "3.13", "3.12", "3.10")
# Every profile name: RabbitMQ's main branch, then the releases.
NAMES = ("main", *VERSIONS)


@dataclass(frozen=True)
class Profile:
    """The routing behaviours that differ between RabbitMQ versions."""

    name: str | None  # None: xroute's default (4.3 without the '#' limit)
    # Consistent hash on a header: the value with its AMQP type tag is hashed (<= 3.12,
    # rabbit_misc:table_lookup), or the plain value (3.13+, message containers).
    chx_hashes_type_tag: bool
    # Consistent hash: the largest weight a binding may have (None: unbounded).
    chx_max_weight: int | None
    # Topic: the most '#' words a binding key may hold (None: any number).
    max_hash_words: int | None
    # Headers: a top-level integer header equals a float binding argument of the same value.
    int_equals_float_at_top: bool
    # x-modulus-hash: bindings taken in Erlang term order of their destination (4.3) rather
    # than in the order the binding store lists them.
    modulus_sorted: bool
    # The AMQP reply code for declaring an exchange of an unknown type: 3.x's command_invalid
    # (503, closing the connection), 4.x's precondition_failed (406, closing the channel).
    unknown_type_reply_code: int
    # An x-jms-topic binding whose selector cannot be parsed: the plugin crashes (541,
    # closing the connection) up to 4.2.5; from 4.2.6 its validate_binding refuses it (406,
    # "invalid JMS selector: ...", rabbitmq-server 16c2687efe).
    selector_refusal: int = 541
    # Bindings to a direct reply-to queue (amq.rabbitmq.reply-to.*) are refused (403) from
    # 4.3.0 (rabbitmq-server #15935, 9055500d10); before, such a queue is simply not found.
    refuses_reply_to_bindings: bool = False
    # Headers: a top-level timestamp header routes as its milliseconds (3.13+, message
    # containers: mc_amqpl:routing_value(timestamp, V) -> V * 1000), a binding argument's
    # timestamp as its seconds; up to 3.12 both are seconds.
    timestamp_header_millis: bool = True


# Where the 4.3 profiles differ from 4.0 and 3.x (docs/semantics.md); the others: the defaults.
_SINCE_43 = {"selector_refusal": 406, "refuses_reply_to_bindings": True}

_PROFILES = {
    None: Profile(None, False, 10_000, None, False, True, 406, **_SINCE_43),
    "main": Profile("main", False, 10_000, 2, False, True, 406, **_SINCE_43),
    "4.3": Profile("4.3", False, 10_000, 2, False, True, 406, **_SINCE_43),
    "4.0": Profile("4.0", False, None, None, False, False, 406),
    # 3.13 compares top-level header values exactly (=:=, message containers, PR #5077).
    "3.13": Profile("3.13", False, None, None, False, False, 503),
    "3.12": Profile("3.12", True, None, None, True, False, 503, timestamp_header_millis=False),
    "3.10": Profile("3.10", True, None, None, True, False, 503, timestamp_header_millis=False),
}


def profile_for_version(version: str) -> str:
    """The profile to serve for a broker reporting ``version`` (``"3.10.8"`` -> ``"3.10"``):
    the most recent known profile not newer than it. UnknownProfile if it predates them all."""
    try:
        wanted = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        raise UnknownProfile(version, list(VERSIONS)) from None
    for name in VERSIONS:  # most recent first
        if tuple(int(part) for part in name.split(".")) <= wanted:
            return name
    raise UnknownProfile(version, list(VERSIONS))


def is_3x(profile_: Profile) -> bool:
    """True for the RabbitMQ 3.x profiles (None, xroute's default, follows 4.3)."""
    return profile_.name is not None and profile_.name.startswith("3.")


def profile(name: str | Profile | None) -> Profile:
    """The `Profile` for a version name (``"3.10"``..., ``"main"``), or xroute's default for
    None."""
    if isinstance(name, Profile):
        return name
    try:
        return _PROFILES[name]
    except (KeyError, TypeError):
        raise UnknownProfile(name, list(NAMES)) from None


DEFAULT_PROFILE = _PROFILES[None]
