"""A server program for tests and benchmarks: found on PATH, else installed from Debian.

A user's fresh machine may have no Redis or RabbitMQ; the suites then install the Debian
package when they may (root, apt-get), and start the server privately themselves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def server_program(
    program: str,
    package: str,
    unavailable: type[Exception],
    variable: str,
    path: str | None = None,
) -> str:
    """The path of ``program`` (searched in ``path``, default PATH), installing Debian's
    ``package`` first if it is missing and this process may; else ``unavailable`` saying how
    to install it or which environment ``variable`` names a running server instead."""
    found = shutil.which(program, path=path)
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise unavailable(
            f"no {program} found: install it ('sudo apt-get install {package}') or set "
            f"{variable} to a server"
        )
    print(f"installing {package} from Debian", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, env=env)
    found = shutil.which(program, path=path)
    if not found:
        raise unavailable(f"{package} was installed but {program} cannot be found")
    return found
