"""Checkpoints: atomic, ``torch.load(weights_only=True)``-safe, with RNG state and pruning.

Layout inside a run directory::

    <run_dir>/checkpoints/ckpt_<step>.pt   # one file per saved step, newest ``keep`` are kept
    <run_dir>/checkpoints/latest           # text: file name of the newest complete checkpoint

A checkpoint file holds a dict::

    {"format": "r2ac-checkpoint", "version": 1, "model": ..., "optimizer": ...,
     "counters": {...}, "rng": {...}, "config": {...}, "extra": {...}}

Only tensors, plain Python containers (dict/list/tuple), numbers, strings, bytes and None are
stored, so files load with ``weights_only=True`` (no arbitrary code runs on load).  numpy
scalars are converted to Python numbers on save; anything else that is not allowed is refused
*before* anything is written, with the path of the offending value in the message.
"""

from __future__ import annotations

import os
import random
import re
import warnings
from typing import Any, Iterable

import numpy as np
import torch

from r2ac.fileio import atomic_write, fsync_dir

__all__ = [
    "CheckpointError",
    "save_checkpoint",
    "load_checkpoint",
    "capture_rng_state",
    "restore_rng_state",
    "checkpoint_dir",
    "checkpoint_path",
    "list_checkpoints",
    "latest_checkpoint",
    "save_run_checkpoint",
    "load_latest_checkpoint",
    "prune_checkpoints",
]

FORMAT = "r2ac-checkpoint"
VERSION = 1
_CKPT_RE = re.compile(r"^ckpt_(\d+)\.pt$")
_TMP_PREFIX = ".tmp_"


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or read (missing, truncated, corrupt, foreign)."""


# --------------------------------------------------------------------------------------------
# Payload sanitising
# --------------------------------------------------------------------------------------------

_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _sanitize(x: Any, where: str) -> Any:
    if isinstance(x, torch.Tensor):  # saved on the CPU: a GPU run's checkpoint loads on any machine
        return x.detach().cpu()
    if isinstance(x, _SCALARS):
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {k: _sanitize(v, f"{where}[{k!r}]") for k, v in x.items()}
    if isinstance(x, list):
        return [_sanitize(v, f"{where}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, tuple):
        return tuple(_sanitize(v, f"{where}[{i}]") for i, v in enumerate(x))
    if isinstance(x, (torch.dtype, torch.device, torch.Size)):
        return x
    hint = (
        "convert it with torch.from_numpy(...)" if isinstance(x, np.ndarray)
        else "store tensors, dicts, lists, tuples, numbers, strings or None"
    )
    raise CheckpointError(
        f"cannot checkpoint {where}: a {type(x).__module__}.{type(x).__qualname__} is not "
        f"loadable with torch.load(weights_only=True); {hint}"
    )


def _fsync_dir(d: str) -> None:
    fsync_dir(d)


def _atomic_write(path: str, write: Any) -> None:
    """Write via ``write(fileobj)`` into a temp file in the same directory, fsync, rename."""
    atomic_write(path, write, tmp_prefix=_TMP_PREFIX)


def save_checkpoint(
    path: str | os.PathLike,
    *,
    model_state: dict,
    optimizer_state: dict | None,
    counters: dict,
    rng_state: dict,
    config: dict,
    extra: dict | None = None,
) -> str:
    """Atomically write a checkpoint to ``path``; returns ``path``. Tensors are written from the CPU (a GPU
    learner's weights and optimizer state too), so ``torch.load`` needs no ``map_location`` anywhere.

    The previous file at ``path`` (if any) stays intact until the new one is complete.
    """
    path = os.fspath(path)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "model": model_state,
        "optimizer": optimizer_state,
        "counters": dict(counters),
        "rng": rng_state,
        "config": config,
        "extra": dict(extra or {}),
    }
    payload = {k: _sanitize(v, k) for k, v in payload.items()}
    _atomic_write(path, lambda fh: torch.save(payload, fh))
    return path


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` (``weights_only=True``).

    Returns the dict with keys model, optimizer, counters, rng, config, extra (and format,
    version).  Raises :class:`CheckpointError` naming the file for a missing, truncated or
    foreign file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint not found: {path}")
    if os.path.getsize(path) == 0:
        raise CheckpointError(
            f"checkpoint {path} is empty (0 bytes); delete it and resume from an older one "
            "(see latest_checkpoint / load_latest_checkpoint)"
        )
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises several types for truncated/garbled files
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupt and cannot be loaded "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); delete it and "
            "resume from an older one"
        ) from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an r2ac checkpoint (no '{FORMAT}' marker)")
    if data.get("version", 0) > VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {data.get('version')}, newer than this "
            f"r2ac understands ({VERSION}); upgrade r2ac"
        )
    data["path"] = path
    return data


# --------------------------------------------------------------------------------------------
# RNG state
# --------------------------------------------------------------------------------------------


def _np_encode(x: Any) -> Any:
    """numpy RNG state -> weights_only-safe containers (arrays become int64 tensors)."""
    if isinstance(x, np.ndarray):
        return {"__ndarray__": torch.from_numpy(x.astype(np.int64)), "dtype": str(x.dtype)}
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {k: _np_encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_np_encode(v) for v in x)
    return x


def _np_decode(x: Any) -> Any:
    if isinstance(x, dict):
        if "__ndarray__" in x:
            return x["__ndarray__"].numpy().astype(np.dtype(x["dtype"]))
        return {k: _np_decode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_np_decode(v) for v in x)
    return x


def _gen_state(g: Any) -> dict:
    if isinstance(g, np.random.Generator):
        return {"kind": "numpy", "state": _np_encode(g.bit_generator.state)}
    if isinstance(g, np.random.RandomState):
        return {"kind": "numpy_legacy", "state": _np_encode(g.get_state(legacy=False))}
    if isinstance(g, torch.Generator):
        return {"kind": "torch", "state": g.get_state()}
    raise TypeError(
        f"capture_rng_state: generators must be numpy Generator/RandomState or torch.Generator, "
        f"got {type(g).__name__}"
    )


def capture_rng_state(generators: Iterable[Any] | None = None) -> dict:
    """Snapshot python ``random``, numpy's global RNG, torch (CPU and CUDA) and ``generators``.

    The result only holds checkpoint-safe types (see :func:`save_checkpoint`).
    """
    state = {
        "python": random.getstate(),
        "numpy": _np_encode(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
        "cuda": (
            torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else []
        ),
        "generators": [_gen_state(g) for g in (generators or [])],
    }
    return state


def restore_rng_state(state: dict, generators: Iterable[Any] | None = None) -> None:
    """Restore a :func:`capture_rng_state` snapshot; ``generators`` are restored in place."""
    try:
        py = state["python"]
        random.setstate((py[0], tuple(py[1]), py[2]))
        np.random.set_state(_np_decode(state["numpy"]))
        torch.set_rng_state(state["torch"].cpu())
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"RNG state is incomplete or malformed: {e!r}") from e
    cuda = state.get("cuda") or []
    if cuda:
        if torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
            torch.cuda.set_rng_state_all([c.cpu() for c in cuda])
        else:
            warnings.warn(
                f"checkpoint has CUDA RNG state for {len(cuda)} device(s) but "
                f"{torch.cuda.device_count() if torch.cuda.is_available() else 0} are visible; "
                "CUDA random streams are not restored",
                RuntimeWarning,
                stacklevel=2,
            )
    gens = list(generators or [])
    saved = state.get("generators") or []
    if gens and len(gens) != len(saved):
        raise CheckpointError(
            f"restore_rng_state: {len(gens)} generators passed but the checkpoint has "
            f"{len(saved)}; pass the same generators (in the same order) as when capturing"
        )
    for i, (g, s) in enumerate(zip(gens, saved)):
        kind = _gen_state(g)["kind"]
        if kind != s["kind"]:
            raise CheckpointError(
                f"restore_rng_state: generator {i} is a {kind} generator but a {s['kind']} "
                "state was saved"
            )
        if kind == "numpy":
            g.bit_generator.state = _np_decode(s["state"])
        elif kind == "numpy_legacy":
            g.set_state(_np_decode(s["state"]))
        else:
            g.set_state(s["state"])


# --------------------------------------------------------------------------------------------
# Run directory management
# --------------------------------------------------------------------------------------------


def checkpoint_dir(run_dir: str | os.PathLike) -> str:
    return os.path.join(os.fspath(run_dir), "checkpoints")


def checkpoint_path(run_dir: str | os.PathLike, step: int) -> str:
    if int(step) < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    return os.path.join(checkpoint_dir(run_dir), f"ckpt_{int(step)}.pt")


def list_checkpoints(run_dir: str | os.PathLike) -> list[tuple[int, str]]:
    """``(step, path)`` of every ``ckpt_<step>.pt`` in the run, oldest first."""
    d = checkpoint_dir(run_dir)
    if not os.path.isdir(d):
        return []
    out = []
    for name in os.listdir(d):
        m = _CKPT_RE.match(name)
        if m:
            out.append((int(m.group(1)), os.path.join(d, name)))
    return sorted(out)


def _read_pointer(run_dir: str | os.PathLike) -> str | None:
    p = os.path.join(checkpoint_dir(run_dir), "latest")
    try:
        with open(p, encoding="utf-8") as fh:
            name = fh.read().strip()
    except OSError:
        return None
    if not _CKPT_RE.match(name):
        return None
    return os.path.join(checkpoint_dir(run_dir), name)


def latest_checkpoint(run_dir: str | os.PathLike) -> str | None:
    """Path of the newest checkpoint of a run, or ``None`` when there is none.

    Follows the ``latest`` pointer; if it is missing or stale, falls back to the highest step.
    """
    p = _read_pointer(run_dir)
    if p is not None and os.path.isfile(p):
        return p
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def prune_checkpoints(run_dir: str | os.PathLike, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` checkpoints (never the one ``latest`` points to) and
    stale temp files of interrupted writes.  Returns the deleted paths."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1 (checkpoint.keep), got {keep}")
    found = list_checkpoints(run_dir)
    protect = {os.path.abspath(p) for p in (_read_pointer(run_dir),) if p}
    deleted = []
    for _, path in found[:-keep]:
        if os.path.abspath(path) in protect:
            continue
        try:
            os.unlink(path)
            deleted.append(path)
        except FileNotFoundError:
            pass
    d = checkpoint_dir(run_dir)
    if os.path.isdir(d):
        for name in os.listdir(d):
            if name.startswith(_TMP_PREFIX):
                try:
                    os.unlink(os.path.join(d, name))
                    deleted.append(os.path.join(d, name))
                except OSError:
                    pass
    return deleted


def save_run_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    *,
    keep: int = 2,
    model_state: dict,
    optimizer_state: dict | None,
    counters: dict,
    rng_state: dict,
    config: dict,
    extra: dict | None = None,
) -> str:
    """Save ``<run_dir>/checkpoints/ckpt_<step>.pt``, point ``latest`` at it, prune to ``keep``.

    Order matters for crash safety: the checkpoint is complete on disk before the pointer
    moves, and old files are deleted only after the pointer moved.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1 (checkpoint.keep), got {keep}")
    path = checkpoint_path(run_dir, step)
    counters = dict(counters)
    counters.setdefault("step", int(step))
    save_checkpoint(
        path,
        model_state=model_state,
        optimizer_state=optimizer_state,
        counters=counters,
        rng_state=rng_state,
        config=config,
        extra=extra,
    )
    name = os.path.basename(path)
    _atomic_write(
        os.path.join(checkpoint_dir(run_dir), "latest"), lambda fh: fh.write((name + "\n").encode())
    )
    prune_checkpoints(run_dir, keep)
    return path


def load_latest_checkpoint(run_dir: str | os.PathLike, map_location: Any = "cpu") -> dict | None:
    """Load the newest *loadable* checkpoint of a run (``None`` if the run has none).

    A corrupt newest file (e.g. a disk error) is skipped with a warning and the next older one
    is tried; if every checkpoint is unreadable a :class:`CheckpointError` is raised.
    The returned dict has an extra key ``"path"``.
    """
    candidates = []
    p = latest_checkpoint(run_dir)
    if p:
        candidates.append(p)
    candidates += [path for _, path in reversed(list_checkpoints(run_dir)) if path != p]
    if not candidates:
        return None
    problems = []
    for path in candidates:
        try:
            data = load_checkpoint(path, map_location=map_location)
        except CheckpointError as e:
            problems.append(str(e))
            warnings.warn(f"skipping unreadable checkpoint: {e}", RuntimeWarning, stacklevel=2)
            continue
        data["path"] = path
        return data
    raise CheckpointError(f"no loadable checkpoint in {checkpoint_dir(run_dir)}: " + "; ".join(problems))
