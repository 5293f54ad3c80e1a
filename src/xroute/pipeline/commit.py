"""How a run's outputs reach OUT on any storage, object stores included (no atomic rename).

1. **Stage.** Tasks write their parts under ``OUT/_temporary/<job>/<output>/``, a job-unique
   prefix that readers skip (Spark, pyarrow and pandas ignore paths starting with ``_``).
   Each part's name carries the task, its attempt and a random suffix: two attempts of one task
   never write the same object.
2. **Count.** The driver keeps only the parts named by the manifests of successful task
   attempts (Spark returns no others), deletes the rest, and counts the rows of every kept part
   from its Parquet footer; the job checks its invariant on those counts.
3. **Publish**, only once the counts are proven. OUT must be new, empty, or an earlier xroute
   output replaced with ``--overwrite`` (`xroute.pipeline.output`). Of an earlier output, a
   ``_PUBLISHING`` marker naming the files of both runs is written, ``_SUCCESS`` deleted, and
   then only the files the old ``_SUCCESS`` named; anything else in OUT stays, and is named in
   a warning. The staged parts are moved to ``OUT/<output>/`` (a rename on local disks and
   HDFS, a server-side copy on object stores); then ``summary.json`` and ``summary.png``; then
   ``_SUCCESS``, last, naming the job, its counts and every file it wrote; ``_PUBLISHING`` and
   the staging prefix are deleted.

A run that fails, or is stopped, before publishing deletes its staging prefix (and OUT, if it
made it): nothing else was touched, and an earlier output stays whole. A run killed outright
leaves only ``_temporary/``, which readers skip and the next run into OUT removes. Output is
complete if and only if ``_SUCCESS`` is there: a run killed while publishing (a few renames or
copies) leaves files without it, and ``_PUBLISHING``, by which the next run with
``--overwrite`` knows them as xroute's and replaces them.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from xroute.core.errors import OutputNotOurs, PipelineFailed
from xroute.pipeline.output import (
    PUBLISHING,
    STAGED_JOB,
    STAGING,
    SUCCESS,
    check_apart,
    check_writable,
    children,
    others,
    warn_left,
)
from xroute.sources.storage import Location, locate


class Staging:
    """Steps 1 and 2 of the module docstring, for any writer into OUT: tasks stage parts under
    ``OUT/_temporary/<job>/<output>/``; the parts named by manifests are kept and counted, and
    moved (step 3) to where the writer publishes them. The batch job (`Commit`) and each
    micro-batch of a stream (`xroute.pipeline.stream_commit`) are the two writers."""

    def __init__(
        self, out: str | Location, outputs: Iterable[str], job: str | None = None
    ) -> None:
        self.out = out if isinstance(out, Location) else locate(out)
        self.outputs = tuple(outputs)
        self.job = job or uuid.uuid4().hex[:12]
        self.staging = self.out.child(STAGING, self.job)

    def begin(self) -> None:
        """Make the staging folder (object stores need none: a prefix exists by its objects)."""
        if self.staging.local:
            self.staging.filesystem.create_dir(self.staging.path, recursive=True)

    def folder(self, output: str) -> Location:
        """Where tasks stage the parts of ``output``."""
        return self.staging.child(output)

    def keep_listed(self, files: Mapping[str, Iterable[str]]) -> dict[str, int]:
        """Delete staged parts that no manifest names (failed or retried attempts); the rows
        of the rest, from their footers, by output. A named part that is missing fails."""
        rows = {}
        for output in self.outputs:
            folder = self.folder(output)
            listed = set(files.get(output, ()))
            staged = {posixpath.basename(path): path for path in folder.files(recursive=False)}
            missing = listed - set(staged)
            if missing:
                raise PipelineFailed(
                    f"{output}: parts named by the manifests are missing: {sorted(missing)[:3]}"
                )
            total = 0
            for name, path in staged.items():
                if name in listed:
                    with folder.filesystem.open_input_file(path) as source:
                        total += pq.ParquetFile(source).metadata.num_rows
                else:
                    folder.filesystem.delete_file(path)
            rows[output] = total
        return rows

    def stage_empty(self, output: str, schema: pa.Schema) -> None:
        """Stage one empty part of ``output``, for an output no task wrote to: it still reads
        back, with its schema."""
        sink = pa.BufferOutputStream()
        pq.write_table(schema.empty_table(), sink, store_schema=False)
        self.folder(output).child("part-empty.parquet").write_bytes(sink.getvalue().to_pybytes())

    def staged(self, output: str) -> list[Location]:
        """The parts of ``output`` staged so far, as locations."""
        folder = self.folder(output)
        return [folder.child(posixpath.basename(p)) for p in folder.files(recursive=False)]

    def move_staged(self, target: Callable[[str], Location]) -> dict[str, list[str]]:
        """Move every staged part of each output into ``target(output)`` (a rename on local
        disks, a server-side copy on object stores); the moved files, by output, as paths
        relative to OUT. The staging prefix is deleted."""
        filesystem = self.out.filesystem
        moved: dict[str, list[str]] = {}
        prefix = self.out.path.rstrip("/") + "/"
        for output in self.outputs:
            folder = target(output)
            filesystem.create_dir(folder.path, recursive=True)
            moved[output] = []
            for part in self.staged(output):
                destination = folder.child(posixpath.basename(part.path))
                filesystem.move(part.path, destination.path)
                moved[output].append(destination.path[len(prefix) :])
        self.staging.delete()
        self._remove_empty_staging_root()
        return moved

    def _remove_empty_staging_root(self) -> None:
        root = self.out.child(STAGING)
        if root.is_dir() and not children(root):
            root.delete()


class Commit(Staging):
    """One batch run's way into OUT: see the module docstring and `xroute.pipeline.output`
    (which OUT may be written, and which of its files are xroute's to replace)."""

    def __init__(
        self,
        out: str,
        outputs: Iterable[str],
        overwrite: bool = False,
        inputs: Iterable[str | None] = (),
    ) -> None:
        super().__init__(out, outputs)
        self.typed = out  # named in errors as the user typed it
        self.overwrite = overwrite
        check_apart(out, inputs)
        self.previous = check_writable(self.out, out, overwrite)
        self._made_out = self.previous.made

    def publish(self, extra: Mapping[str, bytes], success: Mapping[str, Any]) -> None:
        """Replace OUT's earlier output (only the files its marker names) by the staged one,
        ``extra`` files beside it, and ``_SUCCESS`` (``success`` as JSON, with the file list)
        last. Files xroute did not write stay, named in a warning; one that a new file would
        replace is refused before anything is touched."""
        previous = check_writable(self.out, self.typed, self.overwrite)
        new = {
            f"{output}/{posixpath.basename(part.path)}"
            for output in self.outputs
            for part in self.staged(output)
        } | set(extra)
        left = others(self.out, previous.owned)
        clash = sorted(set(left) & new)
        if clash:
            raise OutputNotOurs(
                f"output folder {self.typed!r} holds {clash[0]!r}, which xroute did not write "
                "and this run would replace; refused: give a new or empty folder",
                self.typed,
            )
        marker_of = self.out.child
        if previous.has_output:
            # Until _SUCCESS is back, this marker names every file of both runs: a run that
            # dies from here on leaves an OUT that the next --overwrite still knows as ours.
            publishing = {"job": self.job, "files": {}, "written": sorted(previous.owned | new)}
            marker_of(PUBLISHING).write_bytes(json.dumps(publishing).encode())
            marker_of(SUCCESS).delete()  # from here on, readers know OUT is not complete
            self._remove(previous.owned - {PUBLISHING, SUCCESS})
        self._remove_stale_staging()
        published = self.move_staged(self.out.child)
        for name, data in extra.items():
            self.out.child(name).write_bytes(data)
        written = sorted({f for files in published.values() for f in files} | set(extra))
        marker = {"job": self.job, **success, "files": published, "written": written}
        marker_of(SUCCESS).write_bytes((json.dumps(marker, indent=1) + "\n").encode())
        marker_of(PUBLISHING).delete()
        warn_left(self.typed, left)

    def abort(self) -> None:
        """Delete what this run staged; OUT too, if this run made it and nothing else is in
        it. Never raises: it runs while another error is on its way."""
        try:
            self.staging.delete()
            self._remove_empty_staging_root()
            if self._made_out and not children(self.out):
                self.out.delete()
        except Exception:  # noqa: BLE001 - the original error matters more
            pass

    # ------------------------------------------------------------------ helpers

    def _remove(self, names: Iterable[str]) -> None:
        """Delete these files of OUT, then every folder they leave empty (OUT itself kept)."""
        filesystem = self.out.filesystem
        folders = set()
        for name in sorted(names):
            target = self.out.child(*name.split("/"))
            try:
                filesystem.delete_file(target.path)
            except OSError:
                if target.exists():  # gone already (a legacy marker's guess) is fine
                    raise
            parts = name.split("/")[:-1]
            folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        for folder in sorted(folders, key=lambda f: -f.count("/")):
            location = self.out.child(*folder.split("/"))
            if location.is_dir() and not children(location):
                location.delete()

    def _remove_stale_staging(self) -> None:
        """Staging left by xroute runs that were killed (one writer per OUT, so none is
        running); anything else under ``_temporary`` is not ours and stays."""
        for entry in children(self.out.child(STAGING)):
            name = posixpath.basename(entry.path)
            if name != self.job and STAGED_JOB.match(name):
                entry.delete()
