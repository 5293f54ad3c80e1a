"""Paths and URIs of any storage, as one kind of thing: a local path, ``file://``, ``s3://``,
``gs://``, ``hdfs://``, ``abfs://``, or any scheme fsspec knows.

pyarrow's own filesystems serve the schemes it has (they are fast, and read Parquet footers
with ranged reads); fsspec fills in the rest. Credentials and endpoints come from each
ecosystem's standard settings, never from xroute: for S3, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``AWS_REGION`` (or an instance role); for GCS,
``GOOGLE_APPLICATION_CREDENTIALS``; for HDFS, the Hadoop configuration.

Filesystems are cached per process: Spark tasks in the same Python worker share one.
"""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

import pyarrow.fs as pafs

from xroute.core.errors import StorageError

_FILESYSTEMS: dict[str, pafs.FileSystem] = {}


LISTING_TRIES = 5  # readings of a folder that changed while it was read (`Location.files`)


@dataclass(frozen=True)
class Location:
    """A place in some storage: its filesystem, the path that filesystem takes, and the URI
    that names it everywhere (local paths become ``file://`` URIs)."""

    filesystem: pafs.FileSystem
    path: str
    uri: str

    @property
    def local(self) -> bool:
        """Whether this is the local filesystem of the process that made it."""
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def child(self, *names: str) -> Location:
        """The location of ``names`` under this one."""
        return Location(
            self.filesystem,
            posixpath.join(self.path, *names),
            self.uri.rstrip("/") + "/" + "/".join(quote(name, safe="") for name in names),
        )

    def info(self) -> pafs.FileInfo:
        """What is there: a file, a folder, or nothing (``type == NotFound``)."""
        return _call(self, "look at", self.filesystem.get_file_info, self.path)

    def exists(self) -> bool:
        """Whether anything is there (object stores: an object, or a prefix with objects)."""
        return self.info().type != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        """Whether this is a folder (a prefix, on an object store)."""
        return self.info().type == pafs.FileType.Directory

    def files(self, recursive: bool = True) -> list[str]:
        """The paths of the files under this folder, sorted (none if there is no folder)."""
        selector = pafs.FileSelector(self.path, recursive=recursive, allow_not_found=True)

        def listing() -> list[pafs.FileInfo]:
            # A missing folder is an empty listing (``allow_not_found``), so a "not found"
            # here is a race: something under the folder went while it was read (seen once
            # in make test, a test polling a stream's markers while the stream wrote one).
            # The folder is read again, a few times, before that counts as an error.
            for _ in range(LISTING_TRIES - 1):
                try:
                    return self.filesystem.get_file_info(selector)
                except FileNotFoundError:
                    continue
            return self.filesystem.get_file_info(selector)

        infos = _call(self, "list", listing)
        return sorted(i.path for i in infos if i.type == pafs.FileType.File)

    def read_bytes(self) -> bytes:
        """The whole file."""

        def read(path: str) -> bytes:
            with self.filesystem.open_input_stream(path) as stream:
                return stream.read()

        return _call(self, "read", read, self.path)

    def write_bytes(self, data: bytes) -> None:
        """Write the whole file, seen by readers complete or not at all: an object store
        makes it visible at once; a local file is written beside it, then renamed (a reader
        polling a stream's markers read one that was still empty)."""

        def write(path: str) -> None:
            folder = posixpath.dirname(path)
            self.filesystem.create_dir(folder, recursive=True)
            if not self.local:
                with self.filesystem.open_output_stream(path) as stream:
                    stream.write(data)
                return
            # A hidden name: readers of a folder (Spark, pyarrow, xroute's markers) skip it.
            beside = posixpath.join(folder, f".{posixpath.basename(path)}.{uuid.uuid4().hex}")
            try:
                with self.filesystem.open_output_stream(beside) as stream:
                    stream.write(data)
                self.filesystem.move(beside, path)  # rename(2): atomic on one filesystem
            except BaseException:
                # Ours alone (its name is new): a failed write leaves no half file behind.
                if self.filesystem.get_file_info(beside).type != pafs.FileType.NotFound:
                    self.filesystem.delete_file(beside)
                raise

        _call(self, "write", write, self.path)

    def delete(self) -> None:
        """Remove the file, or the folder and everything under it; nothing there is fine."""
        info = self.info()
        if info.type == pafs.FileType.Directory:
            _call(self, "delete", self.filesystem.delete_dir, self.path)
        elif info.type == pafs.FileType.File:
            _call(self, "delete", self.filesystem.delete_file, self.path)

    def __str__(self) -> str:
        return self.uri


def locate(target: str | Path) -> Location:
    """The `Location` of a local path or a storage URI.

    Raises `StorageError` for a scheme no filesystem serves, or one whose filesystem cannot be
    made (a missing library, bad settings), naming the URI.
    """
    text = str(target)
    scheme = urlparse(text).scheme if "://" in text else ""
    if scheme in ("", "file"):
        path = unquote(urlparse(text).path) if scheme else text
        absolute = str(Path(path).absolute())
        return Location(_local(), absolute, Path(absolute).as_uri())
    parsed = urlparse(text)
    key = f"{scheme}://{parsed.netloc}"
    filesystem = _FILESYSTEMS.get(key)
    if filesystem is None:
        filesystem = _FILESYSTEMS[key] = _filesystem(text, scheme)
    path = _path_in(text, scheme, filesystem)
    return Location(filesystem, path, text.rstrip("/") if len(text) > len(key) + 1 else text)


def is_uri(target: str | Path) -> bool:
    """Whether ``target`` names a non-local storage (a URI whose scheme is not ``file``)."""
    text = str(target)
    return "://" in text and urlparse(text).scheme not in ("", "file")


def _local() -> pafs.FileSystem:
    filesystem = _FILESYSTEMS.get("")
    if filesystem is None:
        filesystem = _FILESYSTEMS[""] = pafs.LocalFileSystem()
    return filesystem


def _filesystem(uri: str, scheme: str) -> pafs.FileSystem:
    try:
        filesystem, _ = pafs.FileSystem.from_uri(uri)
        return filesystem
    except Exception as error:  # ArrowInvalid for an unknown scheme, OSError subclasses else
        if "Unrecognized filesystem type" not in str(error):
            # pyarrow serves the scheme but cannot reach it: the settings are the problem.
            raise StorageError(f"cannot open {uri!r}: {error}", uri) from None
    try:
        import fsspec

        return pafs.PyFileSystem(pafs.FSSpecHandler(fsspec.filesystem(scheme)))
    except Exception as error:
        raise StorageError(
            f"cannot open {uri!r}: neither pyarrow nor fsspec serves {scheme!r} ({error})", uri
        ) from None


def _path_in(uri: str, scheme: str, filesystem: pafs.FileSystem) -> str:
    """The path that ``filesystem`` takes for ``uri``: ``bucket/key`` for object stores."""
    if isinstance(filesystem, pafs.PyFileSystem):
        return unquote(uri.split("://", 1)[1]).rstrip("/")
    try:
        _, path = pafs.FileSystem.from_uri(uri)
    except Exception as error:
        raise StorageError(f"cannot open {uri!r}: {error}", uri) from None
    return path.rstrip("/")


def _call(location: Location, verb: str, function: Any, *args: Any) -> Any:
    """Run a filesystem call; its errors become a `StorageError` naming the place (a local
    file by its path, not a file:// URI)."""
    name = location.path if location.local else location.uri
    try:
        return function(*args)
    except FileNotFoundError:
        raise StorageError(f"cannot {verb} {name!r}: it does not exist", location.uri) from None
    except (OSError, ValueError) as error:
        raise StorageError(f"cannot {verb} {name!r}: {error}", location.uri) from None
