"""Which output folder a run may write, and which of its files are xroute's to replace.

OUT is written only if it is new, empty, or holds an xroute output, known by its marker:
``_SUCCESS`` (a batch run or a diff: JSON naming the job and every file it wrote),
``_PUBLISHING`` (a run that died while replacing an earlier output: the files of both), or
``_stream.json`` (a stream). Any other non-empty folder is refused, ``--overwrite`` or not: a
project folder, a Spark output (whose ``_SUCCESS`` is empty), a folder of the user's files.
With ``--overwrite`` only the files a marker names are removed; anything else in OUT is left
and named in a warning (`LeftInOutput`).

OUT may not be, contain or lie inside an input (the messages, the definitions, a stream's
source): a run would delete the data it reads, or read its own output.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlparse

from pyarrow.fs import FileSelector, FileType

from xroute.core.errors import OutputExists, OutputNotOurs, OutputOverlapsInput
from xroute.sources.storage import Location, locate

SUCCESS = "_SUCCESS"
PUBLISHING = "_PUBLISHING"
STREAM_FILE = "_stream.json"  # OUT's record of the checkpoint (the stream) that writes it
STAGING = "_temporary"
# Staging folders of xroute's own runs: a batch job's id, or a stream's micro-batch.
STAGED_JOB = re.compile(r"^([0-9a-f]{12}|batch-\d+)$")
# Files that a _SUCCESS written before the "written" list existed did not name.
LEGACY_EXTRAS = ("summary.json", "summary.png", "diff.json", "diff.png")
SHOWN = 5  # names shown in a refusal or a warning


class LeftInOutput(UserWarning):
    """Files in OUT that xroute did not write, left where they are by ``--overwrite``."""


@dataclass(frozen=True)
class Previous:
    """What OUT holds before a run: ``owned``, the files (relative to OUT) that xroute's
    markers name, markers included; ``made``, whether OUT did not exist."""

    made: bool
    owned: frozenset[str]

    @property
    def has_output(self) -> bool:
        """Whether an earlier xroute output (complete or not) is there to be replaced."""
        return bool(self.owned)


def examine(out: Location, typed: str) -> Previous:
    """What OUT holds; `OutputNotOurs` when it holds anything xroute did not write (a file
    where a folder should be, a folder without an xroute marker)."""
    info = out.info()
    if info.type == FileType.File:
        raise OutputNotOurs(f"output {typed!r} is a file, not a folder; give a folder", typed)
    if info.type == FileType.NotFound:
        return Previous(made=True, owned=frozenset())
    names = {posixpath.basename(entry.path) for entry in children(out)}
    owned = _owned(out)
    if owned is None:
        foreign = sorted(names - {STAGING}) + _foreign_staging(out)
        if foreign:
            raise OutputNotOurs(
                f"output folder {typed!r} is not empty and holds no xroute output (no "
                f"{SUCCESS} of xroute's): {_show(foreign)}; refused, with --overwrite or "
                "without, so that nothing of yours is deleted: give a new or empty folder",
                typed,
            )
        owned = frozenset()
    return Previous(made=False, owned=owned)


def check_writable(out: Location, typed: str, overwrite: bool) -> Previous:
    """`examine`, and `OutputExists` for an earlier xroute output without ``overwrite``."""
    previous = examine(out, typed)
    if previous.has_output and not overwrite:
        raise OutputExists(typed)
    return previous


def check_stream_out(out: Location, typed: str) -> None:
    """`OutputNotOurs` unless OUT is new, empty, or a stream's (it has ``_stream.json``):
    a stream adds to its OUT and never deletes, but it must not mix its files with others'."""
    if out.info().type == FileType.File:
        raise OutputNotOurs(f"output {typed!r} is a file, not a folder; give a folder", typed)
    names = {posixpath.basename(entry.path) for entry in children(out)}
    if STREAM_FILE in names:
        return
    foreign = sorted(names - {STAGING}) + _foreign_staging(out)
    if foreign:
        raise OutputNotOurs(
            f"output folder {typed!r} is not empty and holds no stream's output (no "
            f"{STREAM_FILE}): {_show(foreign)}; give a new or empty folder",
            typed,
        )


def others(out: Location, owned: Iterable[str]) -> list[str]:
    """The files under OUT, relative to it, that xroute's markers do not name (staging of
    xroute's runs aside)."""
    owned = set(owned)
    base = out.path.rstrip("/") + "/"
    found = []
    for path in out.files():
        name = path[len(base) :]
        parts = name.split("/")
        if name in owned or (parts[0] == STAGING and len(parts) > 2 and STAGED_JOB.match(parts[1])):
            continue
        found.append(name)
    return found


def warn_left(typed: str, left: list[str]) -> None:
    """Say which files of OUT were not xroute's and were left in place."""
    if left:
        warnings.warn(
            LeftInOutput(
                f"{len(left)} file{'s' if len(left) != 1 else ''} in {typed!r} that xroute did "
                f"not write left in place: {_show(left)}"
            ),
            stacklevel=2,
        )


def check_apart(out: str, inputs: Iterable[str | None], what: str = "input") -> None:
    """`OutputOverlapsInput` when OUT is, contains or lies inside one of ``inputs`` (local
    paths or URIs; None and management API URLs are skipped)."""
    mine = identity(out)
    for given in inputs:
        if not given or urlparse(given).scheme in ("http", "https"):
            continue
        theirs = identity(given)
        if mine == theirs or theirs.startswith(mine + "/"):
            raise OutputOverlapsInput(
                f"output folder {out!r} holds the {what} {given!r}: writing it would delete "
                "or overwrite that input; give an output folder outside it",
                out,
            )
        if mine.startswith(theirs + "/"):
            raise OutputOverlapsInput(
                f"output folder {out!r} lies inside the {what} {given!r}: the output would "
                "become part of the input; give an output folder outside it",
                out,
            )


def identity(target: str) -> str:
    """One spelling of a place for comparison: a local path resolved (links, ``.``,
    ``file://``), a URI as ``scheme://bucket/key``."""
    location = locate(target)
    if location.local:
        return os.path.realpath(location.path).rstrip("/") or "/"
    scheme = urlparse(target).scheme
    return f"{scheme}://{location.path.strip('/')}"


def children(folder: Location) -> list[Location]:
    """The entries right under ``folder`` (none when it does not exist)."""
    infos = folder.filesystem.get_file_info(
        FileSelector(folder.path, recursive=False, allow_not_found=True)
    )
    return [folder.child(posixpath.basename(i.path)) for i in infos]


def written_by(marker: dict) -> set[str]:
    """The files, relative to OUT, that a ``_SUCCESS`` or ``_PUBLISHING`` marker names."""
    if "written" in marker:
        return set(marker["written"])
    # An older _SUCCESS: its parts, and the extras every writer of that version wrote.
    files = {name for names in marker.get("files", {}).values() for name in names}
    return files | set(LEGACY_EXTRAS)


def _owned(out: Location) -> frozenset[str] | None:
    """The files xroute's markers in OUT name (markers included); None without a marker."""
    owned: set[str] = set()
    found = False
    for name in (SUCCESS, PUBLISHING):
        marker = _marker(out.child(name))
        if marker is not None:
            owned |= written_by(marker) | {name}
            found = True
    return frozenset(owned) if found else None


def _marker(location: Location) -> dict | None:
    """An xroute marker's JSON; None when there is none, or the file is someone else's (an
    empty Hadoop ``_SUCCESS``, say)."""
    if location.info().type != FileType.File:
        return None
    try:
        marker = json.loads(location.read_bytes())
    except ValueError:
        return None
    if isinstance(marker, dict) and "job" in marker and isinstance(marker.get("files"), dict):
        return marker
    return None


def _foreign_staging(out: Location) -> list[str]:
    """Entries of ``OUT/_temporary`` that are not an xroute run's staging."""
    return [
        f"{STAGING}/{posixpath.basename(e.path)}"
        for e in children(out.child(STAGING))
        if not STAGED_JOB.match(posixpath.basename(e.path))
    ]


def _show(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
