"""The public names other parts and users depend on."""

import xroute


def test_public_names_are_pinned():
    assert xroute.__all__ == sorted(xroute.__all__, key=lambda n: (not n.isupper(), n))
    for name in ("TopicMatcher", "Topology", "XRouteError"):
        assert name in xroute.__all__


def test_every_error_is_an_xroute_error_with_a_docstring():
    errors = [getattr(xroute, n) for n in xroute.__all__ if n.endswith(("Error", "Found", "Refused", "Failed")) or n.startswith(("Invalid", "Unknown"))]
    assert len(errors) >= 10
    for error in errors:
        assert issubclass(error, xroute.XRouteError)
        assert error.__doc__


def test_every_error_class_is_exported():
    import inspect

    from xroute.core import errors

    defined = {n for n, obj in inspect.getmembers(errors, inspect.isclass) if obj.__module__ == errors.__name__}
    assert defined <= set(xroute.__all__)


# Every module the docs and README name, at the path they name it by (issue 39 moved the
# loose root modules into xroute.core, xroute.sources and xroute.tools).
DOCUMENTED_PATHS = (
    "xroute.amqp", "xroute.kombu", "xroute.spark", "xroute.spark.session", "xroute.spark.job",
    "xroute.spark.submit", "xroute.tools.explain", "xroute.tools.patterns", "xroute.bench.workload",
    "xroute.bench.report", "xroute.core.topology", "xroute.core.errors", "xroute.core.values",
    "xroute.sources.definitions", "xroute.sources.management", "xroute.sources.storage",
)


def test_every_documented_module_imports():
    import importlib

    for path in DOCUMENTED_PATHS:
        assert importlib.import_module(path).__name__ == path


def test_the_old_paths_of_moved_modules_import_the_same_module():
    import importlib

    assert len(xroute.MOVED_MODULES) == 19
    for old, new in xroute.MOVED_MODULES.items():
        assert importlib.import_module(f"xroute.{old}") is importlib.import_module(new)
    # `from` imports through the old paths, as a user's code has them
    from xroute.patterns import MAX_STATES  # noqa: F401
    from xroute.topology import Topology

    assert Topology is xroute.Topology


def test_the_package_root_holds_the_facade_and_a_handful_of_modules():
    from pathlib import Path

    root = Path(xroute.__file__).parent
    modules = sorted(p.stem for p in root.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 6, modules
