"""The ``xroute`` command's entry point, outside the package so that it runs first: Ctrl-C
while Python imports xroute, numpy and the rest prints the command's one line and exits 130,
not an import traceback (issue 38). Then `xroute.cli.main` takes over, with Ctrl-C raising
KeyboardInterrupt as usual (the command cleans up and says so)."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_loading(signum: int, frame: object) -> None:
    # Nothing is started yet: no process to stop, no output to clean.
    sys.stderr.write("xroute: stopped (Ctrl-C)\n")
    sys.stderr.flush()
    os._exit(130)


def main() -> None:
    """Run the ``xroute`` command."""
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    from xroute.cli import main as run

    signal.signal(signal.SIGINT, signal.default_int_handler)
    run()


if __name__ == "__main__":
    main()
