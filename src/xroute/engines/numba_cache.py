"""One on-disk cache of xroute's numba kernels for every process: driver, Spark workers, tests.

numba files a cached kernel under a folder named after the directory of its source file. A
Spark executor imports xroute from the zip that ``addPyFile`` shipped, and numba then files
its kernels by the zip's location (and in its own per-user folder, ignoring
``NUMBA_CACHE_DIR``): so the kernels that ``make-venv.sh`` compiled at install time, or that
the driver compiled, were compiled again inside the workers (the first ``make run`` was 2.5
times slower than the second).

`prepare` points ``NUMBA_CACHE_DIR`` at ``~/.cache/xroute/numba`` unless it is set, and adds a
cache locator that files every xroute kernel by a hash of its source text and its path inside
the package (``source-<hash>/xroute/engines/``), wherever the package was imported from, a
folder or a zip. numba still checks each entry against the source hash and the CPU, so a
changed kernel or another machine compiles afresh. The locator uses numba's cache classes
(``numba.core.caching``); if a numba version lacks them, numba's own placement applies.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

PACKAGE = "xroute"
_INSTALLED: list[bool] = []


def cache_dir() -> Path:
    """The folder numba caches compiled kernels in (``NUMBA_CACHE_DIR``, set if absent)."""
    if "NUMBA_CACHE_DIR" not in os.environ:
        # A site-packages install or a Spark executor may not write beside the source.
        os.environ["NUMBA_CACHE_DIR"] = str(Path.home() / ".cache" / "xroute" / "numba")
    return Path(os.environ["NUMBA_CACHE_DIR"])


def prepare() -> Path:
    """Set the cache folder and install the locator (once per process); the folder."""
    folder = cache_dir()
    if not _INSTALLED:
        _INSTALLED.append(_install_locator())
    return folder


def package_path(py_file: str) -> PurePosixPath | None:
    """``xroute/engines/_kernel.py`` for any path to that file, in a folder or in a zip."""
    parts = Path(py_file).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == PACKAGE:
            return PurePosixPath(*parts[i:])
    return None


def _install_locator() -> bool:
    try:
        from numba.core import caching
    except ImportError:
        return False
    base = getattr(caching, "_CacheLocator", None)
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    locators = getattr(impl, "_locator_classes", None)
    if base is None or not isinstance(locators, list):
        return False

    class PackageLocator(base):  # type: ignore[misc, valid-type]
        """Files an xroute kernel by its path inside the package, under NUMBA_CACHE_DIR."""

        def __init__(self, py_func: Any, py_file: str, inside: PurePosixPath) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            # One folder per version of the source text, so that two checkouts of different
            # versions (or a driver and an older zip) do not overwrite each other's index.
            version = "source-" + bytes(self.get_source_stamp()).hex()[:12]
            self._cache_path = os.path.join(cache_dir(), version, *inside.parent.parts)

        def get_cache_path(self) -> str:
            return self._cache_path

        def get_source_stamp(self) -> Any:
            # A hash of the source text, the same from a folder and from a zip.
            zipped = ".zip" + os.sep in self._py_file
            if zipped:
                head, _, _ = self._py_file.partition(".zip" + os.sep)
                archive = head + ".zip"
                inside = self._py_file[len(archive) + 1 :].replace(os.sep, "/")
                st = os.stat(archive)
                return caching._hash_zipped_source_file(archive, inside, st.st_mtime, st.st_size)
            st = os.stat(self._py_file)
            return caching._hash_source_file(self._py_file, st.st_mtime, st.st_size)

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            inside = package_path(py_file)
            if inside is None:
                return None
            if not py_func.__module__.startswith(PACKAGE + "."):
                return None
            try:
                locator = cls(py_func, py_file, inside)
                locator.ensure_cache_path()
            except (OSError, KeyError):
                return None  # numba's own locators then decide
            return locator

    if not (hasattr(caching, "_hash_source_file") and hasattr(caching, "_hash_zipped_source_file")):
        return False
    locators.insert(0, PackageLocator)
    return True
