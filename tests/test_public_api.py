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

    from xroute import errors

    defined = {n for n, obj in inspect.getmembers(errors, inspect.isclass) if obj.__module__ == errors.__name__}
    assert defined <= set(xroute.__all__)
