"""Shared helpers: which cores exist, and a clear error for the ones that do not (yet)."""

from __future__ import annotations

from r2ac.cores import CORES


class CoreUnavailable(RuntimeError):
    """A core name that is not registered in ``r2ac.cores.CORES`` (benchmarks skip it with this message)."""


def require_core(name: str, learning: str | None = None) -> None:
    if name not in CORES:
        raise CoreUnavailable(
            f"core {name!r} is not registered in r2ac.cores.CORES (available: {', '.join(sorted(CORES))}); skipped"
        )
    if learning == "rtrl" and not CORES[name].supports_rtrl:
        raise CoreUnavailable(f"core {name!r} has no RTRL (learning='rtrl'); skipped")
