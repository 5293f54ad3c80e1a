"""Key -> a set of members, read as one shared frozenset: the store behind the exact-key
index (`xroute.engines.literal`), the shape index (`xroute.engines.shapes`) and the topology's
literal routes (`xroute.core.literal_routes`).

Readers get the same frozenset for a key until it changes, so that their callers can key
their own work by it. A key's frozenset is made anew on each change while it has at most
``freeze_now`` members; beyond, the members are kept beside it, and the frozenset is made on
the next read: binding 10k queues to one key then costs one frozenset, not 10k growing
copies. They are kept as a dict's keys (values None), not a set: a set of 10k members holds a
table of 64k slots (1 MB, half of RabbitMQ 4.3's unicast shape's index of '#' bindings, 52
bytes a binding), a dict about 0.3 MB; both test and add a member in one hash lookup.

With ``share_singletons`` a key of one member gets the frozenset of that member shared by
every such key (`xroute.core.literal_routes`: an MQTT site's six literal topics lead to one
client queue, one frozenset of 216 bytes, not six). Only for members that many keys share:
for members of one key each, the shared table would cost a dict entry more.

With ``bare_singletons`` a key of one member keeps the member itself in `FrozenSets.frozen`,
in place of a frozenset, and `get` makes its frozenset on each read (the hot paths see a value
that is not a frozenset and ask `get`): for members that no two keys share (a topology's
`Binding` objects, each its own destination), whose frozensets no reader can share either, a
frozenset of 216 bytes a binding becomes the dict entry the key needs anyway. (A member that
is itself a frozenset, or None, is never kept bare: it would read as an answer.)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator
from typing import Any

# In `FrozenSets.frozen` in place of a large key's frozenset while its set changed.
STALE: Any = object()


class FrozenSets:
    """Key -> frozenset of members; see the module's doc.

    ``frozen`` is public for hot paths, which read it inline: a key's frozenset, or anything
    else (`STALE`, or a member kept bare: then `get` makes it); a key without members is
    absent.
    """

    __slots__ = ("frozen", "_large", "_freeze_now", "_ones", "_bare", "_singleton")

    def __init__(
        self, freeze_now: int, share_singletons: bool = False, bare_singletons: bool = False
    ) -> None:
        self.frozen: dict[Any, Any] = {}
        # keys with more than freeze_now members -> the members, as a dict's keys (values None)
        self._large: dict[Any, dict[Hashable, None]] = {}
        self._freeze_now = freeze_now
        # member -> frozenset of it alone, shared by the keys it is the only member of
        self._ones: dict[Hashable, frozenset] | None = {} if share_singletons else None
        # A key of one member keeps it in `frozen` itself (see the module's doc).
        self._bare = bare_singletons
        # `share_singletons_with`'s maker of a member's shared frozenset, or None
        self._singleton: Callable[[Any], frozenset] | None = None

    def share_singletons_with(self, singleton: Callable[[Any], frozenset]) -> None:
        """With ``share_singletons``: take each member's frozenset of it alone from
        ``singleton`` (which keeps it where it keeps the member: a topology's queue table),
        not from a table of this one's."""
        self._singleton = singleton
        self._ones = None

    @property
    def singletons(self) -> dict[Hashable, frozenset] | None:
        """With ``share_singletons``: member -> the frozenset of it alone that its keys of
        one member share (the table itself, for a caller that reads it inline; cleared in
        place, never replaced); else None."""
        return self._ones

    def alone(self, member: Hashable) -> frozenset:
        """The frozenset of ``member`` alone: shared if `share_singletons`."""
        ones = self._ones
        if ones is None:
            if self._singleton is not None:
                return self._singleton(member)
            return frozenset((member,))
        found = ones.get(member)
        if found is None:
            if len(ones) > 2 * len(self.frozen) + 1_024:
                ones.clear()  # members no key holds any more (queues deleted): forgotten
            found = ones[member] = frozenset((member,))
        return found

    def add(self, key: Any, member: Hashable) -> None:
        """Add ``member``, not one of ``key``'s members yet."""
        frozen = self.frozen
        if key not in frozen:
            # hot: a new key (most of a bulk bind; a large key is in `frozen` as STALE)
            if self._bare and member is not None and member.__class__ is not frozenset:
                frozen[key] = member
            else:
                frozen[key] = self.alone(member)
            return
        large = self._large.get(key)
        if large is not None:
            large[member] = None
            self.frozen[key] = STALE
            return
        small = self.frozen.get(key)
        if self._bare:
            if small is None and member is not None and member.__class__ is not frozenset:
                self.frozen[key] = member
                return
            if small is not None and small.__class__ is not frozenset:
                small = frozenset((small,))  # one member, kept bare: two now
        if small is None:
            self.frozen[key] = self.alone(member)
        elif len(small) < self._freeze_now:
            self.frozen[key] = small | {member}
        else:
            self._large[key] = dict.fromkeys((*small, member))
            self.frozen[key] = STALE

    def remove(self, key: Any, member: Hashable) -> None:
        """Remove ``member``, one of ``key``'s members; a key left without any goes."""
        large = self._large.get(key)
        if large is None:
            current = self.frozen[key]
            if current.__class__ is not frozenset:  # one member, kept bare
                del self.frozen[key]
                return
            left = current - {member}
        else:
            large.pop(member, None)
            if len(large) > self._freeze_now:
                self.frozen[key] = STALE
                return
            left = frozenset(large)
            del self._large[key]
        if len(left) == 1 and self._bare:
            (alone,) = left
            self.frozen[key] = alone if alone is not None and alone.__class__ is not frozenset \
                else left
        elif len(left) == 1 and (self._ones is not None or self._singleton is not None):
            (alone,) = left
            self.frozen[key] = self.alone(alone)
        elif left:
            self.frozen[key] = left
        else:
            del self.frozen[key]

    def get(self, key: Any) -> frozenset | None:
        """``key``'s members as its shared frozenset, or None if it has none."""
        found = self.frozen.get(key)
        if found is None or found.__class__ is frozenset:
            return found
        if found is not STALE:  # one member, kept bare: a frozenset for this read
            return frozenset((found,))
        found = self.frozen[key] = frozenset(self._large[key])
        return found

    def members(self, key: Any) -> Collection[Hashable]:
        """``key``'s members as they are kept (a frozenset, or a dict whose keys they are;
        empty if none), to test or read without making a frozenset."""
        large = self._large.get(key)
        if large is not None:
            return large
        found = self.frozen.get(key)
        if found is None:
            return ()
        return found if found.__class__ is frozenset else (found,)

    def items(self) -> Iterator[tuple[Any, Collection[Hashable]]]:
        """Every (key, members) pair, the members as they are kept."""
        large = self._large
        for key, frozen in self.frozen.items():
            if frozen.__class__ is frozenset:
                yield key, frozen
            else:
                yield key, large[key] if frozen is STALE else (frozen,)

    def columns(self) -> tuple[list[Any], list[Collection[Hashable]]]:
        """Every key, and its members as they are kept: two lists in the same order, without
        a tuple per key (100k literal keys are flattened into a kernel table at once)."""
        keys = list(self.frozen)
        found = list(self.frozen.values())
        if self._large or self._bare:
            large = self._large
            found = [members if members.__class__ is frozenset
                     else large[key] if members is STALE else (members,)
                     for key, members in zip(keys, found)]
        return keys, found

    def __len__(self) -> int:
        return len(self.frozen)
