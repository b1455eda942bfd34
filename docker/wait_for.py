"""Wait until HOST:PORT accepts TCP connections: ``python docker/wait_for.py ray-head:6379 [SECONDS]``.

The compose services run it before ``ray start`` so that the start order of the containers does not matter
(podman-compose runs no healthchecks). Exits 0 once connected; after SECONDS (default 300) prints one line
naming what did not answer and exits 1.
"""

from __future__ import annotations

import socket
import sys
import time


def main(argv: list[str]) -> int:
    if not argv or ":" not in argv[0]:
        print("usage: wait_for.py HOST:PORT [SECONDS]", file=sys.stderr)
        return 2
    host, port = argv[0].rsplit(":", 1)
    limit = float(argv[1]) if len(argv) > 1 else 300.0
    deadline = time.monotonic() + limit
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return 0
        except OSError:
            if time.monotonic() > deadline:
                print(f"{host}:{port} did not answer within {limit:.0f} s: is the Ray head running and on the "
                      f"same network?", file=sys.stderr)
                return 1
            time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
