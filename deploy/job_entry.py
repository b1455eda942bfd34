"""Entry point for r2ac training jobs on a running Ray cluster.

Works with both ways of starting a job on a cluster:

    ray submit deploy/cluster.yaml deploy/job_entry.py -- CONFIG [key=value ...]
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python deploy/job_entry.py CONFIG [key=value ...]

It runs ``r2ac train CONFIG runtime.kind=ray [key=value ...] --address auto``: the
job's driver joins the cluster it runs on (``ray.init(address="auto")`` semantics;
``RAY_ADDRESS``, which Ray's job manager sets, takes precedence over ``auto``).
Arguments the caller gives win: an explicit ``runtime.kind=...`` or ``--address``
is passed through unchanged.

``ray submit`` copies this file alone to ``~/job_entry.py`` on the head node, so a
relative CONFIG that does not exist in the working directory is looked up under
``$R2AC_HOME`` (``/opt/r2ac`` in the r2ac images), then under this checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

_REPO_ROOT = Path(__file__).resolve().parent.parent


def _resolve_config(path: str) -> str:
    """Return ``path`` if it exists as given, else the first match under R2AC_HOME or the repo."""
    if Path(path).is_absolute() or Path(path).exists():
        return path
    roots = [os.environ.get("R2AC_HOME"), str(_REPO_ROOT)]
    for root in roots:
        if root and (Path(root) / path).is_file():
            return str(Path(root) / path)
    return path  # let r2ac report the missing file


def build_argv(argv: Sequence[str]) -> list[str]:
    """The argument list for ``r2ac.cli.main``: ``["train", CONFIG, overrides..., flags...]``.

    ``CONFIG`` may be replaced by ``--resume RUN_DIR``. ``runtime.kind=ray`` goes right
    after CONFIG (or ``--resume RUN_DIR``), where ``r2ac train`` reads overrides, and
    ``--address auto`` at the end; each only if the caller did not give one.
    """
    args = list(argv)
    if args[:1] == ["train"]:  # tolerate `job_entry.py train CONFIG ...`
        args = args[1:]
    resume_first = bool(args) and (args[0] == "--resume" or args[0].startswith("--resume="))
    if not args or (args[0].startswith("-") and not resume_first):
        raise SystemExit(
            "usage: job_entry.py CONFIG [key=value ...] [--resume RUN_DIR] [--address ADDR]\n"
            "       job_entry.py --resume RUN_DIR [key=value ...]"
        )
    if resume_first:
        split = 2 if args[0] == "--resume" else 1  # after `--resume RUN_DIR`
    else:
        args[0] = _resolve_config(args[0])
        split = 1  # right after CONFIG, before the caller's overrides
    if not any(a.startswith("runtime.kind=") for a in args):
        args.insert(split, "runtime.kind=ray")
    if not any(a == "--address" or a.startswith("--address=") for a in args):
        args += ["--address", "auto"]
    return ["train", *args]


def run_dir_of_args(args: Sequence[str]) -> str | None:
    """The run directory the arguments name (``--resume RUN_DIR`` or ``run_dir=...``), else None."""
    found = None
    for i, a in enumerate(args):
        if a == "--resume" and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith("--resume="):
            found = a.split("=", 1)[1]
        elif a.startswith("run_dir="):
            found = a.split("=", 1)[1]
    return found


def resume_hint(run_dir: str) -> str:
    """How a job user continues ``run_dir``: the same entry point with ``--resume``, as a job or with
    ``ray submit``."""
    return (f"job_entry: {run_dir} keeps its last checkpoint; continue it with\n"
            f"  ray job submit --address http://HEAD:8265 -- python /opt/r2ac/deploy/job_entry.py --resume {run_dir}\n"
            f"  (or: ray submit CLUSTER.yaml deploy/job_entry.py -- --resume {run_dir})")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``r2ac train`` on the cluster this process runs on; returns its exit status. When the run stops
    early with a checkpoint on disk, the last line says how to resume it as a job."""
    from r2ac import cli  # imported here so this module loads without r2ac installed

    args = build_argv(sys.argv[1:] if argv is None else argv)
    result = int(cli.main(args) or 0)
    run_dir = run_dir_of_args(args)
    if result != 0 and run_dir and (Path(run_dir) / "checkpoints" / "latest").is_file():
        print(resume_hint(run_dir), file=sys.stderr, flush=True)
    return result


if __name__ == "__main__":
    sys.exit(main())
