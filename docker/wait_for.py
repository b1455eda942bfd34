"""Wait until the Ray head answers, and say where it is.

    python docker/wait_for.py [--resolve HOST] TARGET ... [SECONDS]

The compose services run it before ``ray start`` so that the start order of the containers does not matter
(podman-compose runs no healthchecks)::

    HEAD=$(python docker/wait_for.py --resolve ray-head ray-head:6379 http://ray-head:8265/api/gcs_healthz)
    ray start --address=$HEAD:6379 ...

Each TARGET is waited for in turn, within one deadline:

- ``HOST:PORT``: until it accepts TCP connections;
- ``http://...``: until a GET answers 200. The head's ``/api/gcs_healthz`` answers only once its GCS serves
  requests; its port accepts connections a few seconds before that.

``--resolve HOST`` first looks HOST up (again each second until it resolves), prints its IPv4 address on stdout,
and waits for the targets at that address. A node that then starts Ray with the address needs no name lookup of
its own: on a podman network (aardvark-dns 1.4, Debian 12) lookups made while other containers of the project
start were lost for up to a minute, and a ``ray start`` whose own lookup failed hung, or aborted in
``GetSystemConfig``, and its node never joined.

Exits 0 once every target answered; after SECONDS (default 300) prints one line naming what did not answer
and exits 1.
"""

from __future__ import annotations

import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def _answers(target: str) -> bool:
    if target.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(target, timeout=5) as reply:
                return reply.status == 200
        except (OSError, urllib.error.URLError, ValueError):
            return False
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return True
    except OSError:
        return False


def _at(target: str, host: str, address: str) -> str:
    """``target`` with ``host`` replaced by ``address``."""
    if target.startswith(("http://", "https://")):
        url = urllib.parse.urlsplit(target)
        if url.hostname != host:
            return target
        netloc = address + (f":{url.port}" if url.port else "")
        return urllib.parse.urlunsplit(url._replace(netloc=netloc))
    name, port = target.rsplit(":", 1)
    return f"{address}:{port}" if name == host else target


def _resolve(host: str) -> str | None:
    try:
        return socket.gethostbyname(host)
    except OSError:
        return None


def _fail(what: str, limit: float) -> int:
    print(f"{what} did not answer within {limit:.0f} s: is the Ray head running and on the same network?",
          file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    argv = list(argv)
    host = None
    if "--resolve" in argv:
        i = argv.index("--resolve")
        host = argv[i + 1] if i + 1 < len(argv) else ""
        del argv[i:i + 2]
    targets = [a for a in argv if not a.replace(".", "", 1).isdigit()]
    numbers = [a for a in argv if a.replace(".", "", 1).isdigit()]
    bad = [t for t in targets if not t.startswith(("http://", "https://"))
           and (":" not in t or not t.rsplit(":", 1)[1].isdigit())]
    if not targets or bad or len(numbers) > 1 or host == "":
        print("usage: wait_for.py [--resolve HOST] HOST:PORT|http://URL ... [SECONDS]", file=sys.stderr)
        return 2
    limit = float(numbers[0]) if numbers else 300.0
    deadline = time.monotonic() + limit
    address = None
    if host is not None:
        while (address := _resolve(host)) is None:
            if time.monotonic() > deadline:
                return _fail(f"{host} (its name lookup)", limit)
            time.sleep(1)
        targets = [_at(t, host, address) for t in targets]
    for target in targets:
        while not _answers(target):
            if time.monotonic() > deadline:
                return _fail(target, limit)
            time.sleep(1)
    if address is not None:
        print(address)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
