"""The optional parts of xroute and the extra that installs each: the routing library and the
commands route, explain, lint and diff need none of them (README, "Set up")."""

from __future__ import annotations

import importlib.util

from xroute.core.errors import MissingDependency

# The top-level module -> the extra of ``pip install 'xroute[EXTRA]'`` that brings it.
EXTRAS = {
    "pyspark": "spark",
    "py4j": "spark",
    "pandas": "spark",
    "matplotlib": "plots",
    "kombu": "kombu",
    "redis": "kombu",
    "amqp": "traces",
    "pamqp": "amqp",
    "rstream": "stream",
}


def install_hint(module: str) -> str | None:
    """``pip install 'xroute[EXTRA]'`` for a module an extra brings; None for any other."""
    extra = EXTRAS.get(module.split(".")[0])
    return None if extra is None else f"pip install 'xroute[{extra}]'"


def missing(error: ModuleNotFoundError) -> MissingDependency | None:
    """The `MissingDependency` an import failure means, when an extra brings that module."""
    name = (error.name or "").split(".")[0]
    hint = install_hint(name)
    if hint is None:
        return None
    return MissingDependency(f"{name} is not installed; install it with: {hint}", name)


def require(*modules: str, what: str) -> None:
    """`MissingDependency` naming the ``pip install`` to run when a module ``what`` needs is
    not installed (checked before any work starts)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            hint = install_hint(module) or f"pip install {module}"
            raise MissingDependency(
                f"{what} needs {module}, which is not installed; install it with: {hint}", module
            )
