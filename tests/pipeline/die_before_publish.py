"""``xroute pipeline`` whose driver kills itself (SIGKILL) at the worst moment for an object
store: every part staged and counted, nothing published. Run as a script by
test_object_store.py:

    python die_before_publish.py pipeline -d ... -m ... -o ...
"""

from __future__ import annotations

import os
import signal
import sys

from xroute.cli import main
from xroute.pipeline.commit import Commit


def die(self: Commit, *args: object, **kwargs: object) -> None:
    print(f"staged under {self.staging.uri}; killing the driver", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    Commit.publish = die  # type: ignore[method-assign]
    sys.argv = ["xroute", *sys.argv[1:]]
    main()
