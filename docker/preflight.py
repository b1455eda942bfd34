"""Check this host before `docker compose up` / `podman-compose up` of docker/docker-compose.yml.

    python3 docker/preflight.py [--env-file docker/.env]

Prints one line per problem, each naming the fix, and exits 1; prints one `ready` line and exits 0 when
there is none. Checked: a compose engine (Docker Compose v2, or podman-compose), RAY_AUTH_TOKEN, the
host port that the head's dashboard / job API is published on (R2AC_DASHBOARD_PORT, 127.0.0.1:8265 by
default: free, or compose fails with "address already in use"), and a host folder given as R2AC_RUNS.

Settings come from the environment and the env file (docker/.env by default; the engines disagree on which
wins: Docker Compose takes the environment, podman-compose 1.0 the file, so both values are checked).
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def candidates(name: str, env: dict[str, str], file: dict[str, str], default: str = "") -> list[str]:
    """The values compose may use for ``name``: the environment's and the file's (distinct, non-empty), else
    ``default``."""
    found = [v for v in (env.get(name, ""), file.get(name, "")) if v]
    return list(dict.fromkeys(found)) or ([default] if default else [])


def compose_engine(env: dict[str, str]) -> str | None:
    """The first compose engine that answers: `docker compose` (v2), `docker-compose` (v2), `podman-compose`."""
    tries = []
    if shutil.which("docker", path=env.get("PATH")):
        tries.append(["docker", "compose", "version"])
    if shutil.which("docker-compose", path=env.get("PATH")):
        tries.append(["docker-compose", "version"])
    if shutil.which("podman-compose", path=env.get("PATH")):
        tries.append(["podman-compose", "--version"])
    for cmd in tries:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = out.stdout + out.stderr
        if out.returncode == 0 and (cmd[0] == "podman-compose" or "v2." in text or " 2." in text):
            return " ".join(cmd[:-1])
    return None


def port_in_use(port: int) -> bool:
    """True if something on this host holds 127.0.0.1:``port`` (compose could not publish it)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_port_near(port: int) -> int:
    for p in range(port + 1, min(port + 200, 65536)):
        if not port_in_use(p):
            return p
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def problems(env: dict[str, str], env_file: Path) -> list[str]:
    file = read_env_file(env_file)
    shown = os.path.relpath(env_file) if env_file.is_absolute() else str(env_file)
    if shown.startswith(".."):
        shown = str(env_file)
    out = []
    engine = compose_engine(env)
    if engine is None:
        out.append("no compose engine here: install Docker with Compose v2 (`docker compose version`), or podman "
                   "and podman-compose (on Debian as root: docker/podman/setup-host.sh)")
    if not candidates("RAY_AUTH_TOKEN", env, file):
        where = f"{shown} has no RAY_AUTH_TOKEN" if env_file.is_file() else f"no {shown}"
        out.append(f"{where}: cp docker/example.env docker/.env and set RAY_AUTH_TOKEN=$(python3 -c "
                   f"'import secrets; print(secrets.token_hex(32))')")
    for value in candidates("R2AC_DASHBOARD_PORT", env, file, "8265"):
        if not value.isdigit() or not 0 < int(value) < 65536:
            out.append(f"R2AC_DASHBOARD_PORT={value} is not a port number: set R2AC_DASHBOARD_PORT=8265 (or another "
                       f"free port) in {shown}")
        elif port_in_use(int(value)):
            out.append(f"port 127.0.0.1:{value} (R2AC_DASHBOARD_PORT, the head's dashboard and job API) is in use by "
                       f"another program: set R2AC_DASHBOARD_PORT={free_port_near(int(value))} (free now) in {shown}, "
                       f"or stop what holds {value} (e.g. a local `ray start --head`)")
    for runs in candidates("R2AC_RUNS", env, file, "runs"):
        if "/" not in runs:
            continue  # a named volume
        path = Path(runs)
        if not path.is_absolute():
            out.append(f"R2AC_RUNS={runs}: a host folder must be an absolute path (or a volume name such as runs)")
        elif not path.is_dir():
            out.append(f"R2AC_RUNS={runs} does not exist: mkdir -p {runs} && chown 1000:1000 {runs}")
        else:
            st = path.stat()
            if st.st_uid != 1000 and not st.st_mode & 0o002:
                out.append(f"R2AC_RUNS={runs} is not writable by UID 1000 (the containers' user): "
                           f"chown 1000:1000 {runs}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-file", type=Path, default=HERE / ".env",
                        help="the env file compose reads (default: docker/.env)")
    args = parser.parse_args(argv)
    found = problems(dict(os.environ), args.env_file)
    for line in found:
        print(f"preflight: {line}", file=sys.stderr)
    if not found:
        print(f"preflight: ready ({compose_engine(dict(os.environ))})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
