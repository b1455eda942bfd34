"""r2ac's Gymnasium vector env (``GymVecEnv``, a list of envs stepped in order) against gymnasium's own
``SyncVectorEnv`` and ``AsyncVectorEnv`` (both with same-step autoreset, r2ac's convention), on the same
envs with the same pre-drawn random actions.

    r2ac bench vecenv                                   # CartPole-v1 and the T-maze (gym ids), 8 and 32 envs
    r2ac bench vecenv --envs CartPole-v1 --num-envs 16 --seconds 2 --repeats 3

Rates are agent steps per second summed over the envs (median of ``repeats`` windows of ``seconds``), and
for the in-process vectors also per second of this process's CPU time (less sensitive to other processes
on the machine; AsyncVectorEnv's work happens in its worker processes, so it has no CPU-time rate).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any, Callable, Dict, List, Sequence

import numpy as np

from r2ac.bench.common import format_table, write_csv

DEFAULT_ENVS = ("CartPole-v1", "r2ac/TMaze-v0")
COLUMNS = ["env", "num_envs", "vector", "steps_per_s", "steps_per_cpu_s", "min_steps_per_s", "max_steps_per_s",
           "vs_r2ac"]


def _r2ac_vector(env_id: str, n: int, seed: int):
    from r2ac.envs.gym_env import GymVecEnv

    v = GymVecEnv(env_id, n, seed)
    v.reset()
    return (lambda a: v.step(a)), v.close


def _gymnasium_vector(kind: str) -> Callable:
    def make(env_id: str, n: int, seed: int):
        import gymnasium
        from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

        fns = [lambda: gymnasium.make(env_id) for _ in range(n)]
        cls = SyncVectorEnv if kind == "sync" else AsyncVectorEnv
        v = cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        v.reset(seed=seed)
        return (lambda a: v.step(a)), v.close
    return make


VECTORS: Dict[str, Callable] = {"r2ac": _r2ac_vector, "gymnasium-sync": _gymnasium_vector("sync"),
                                "gymnasium-async": _gymnasium_vector("async")}


def bench_one(env_id: str, n: int, vector: str, *, seconds: float, repeats: int, seed: int = 0) -> Dict[str, Any]:
    import gymnasium

    import r2ac.envs  # noqa: F401  (registers r2ac/TMaze-v0)

    num_actions = int(gymnasium.make(env_id).action_space.n)
    actions = np.random.default_rng(seed).integers(0, num_actions, size=(1024, n))
    step, close = VECTORS[vector](env_id, n, seed)
    try:
        for i in range(20):
            step(actions[i % 1024])
        rates, cpu_rates, i = [], [], 0
        for _ in range(repeats):
            t0, c0, k = time.perf_counter(), time.process_time(), 0
            while k == 0 or time.perf_counter() - t0 < seconds:  # at least one step, even when preempted
                step(actions[i % 1024])
                i += 1
                k += 1
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            rates.append(k * n / wall)
            cpu_rates.append(k * n / cpu if cpu > 0 else float("nan"))
    finally:
        close()
    return {"env": env_id, "num_envs": n, "vector": vector, "steps_per_s": statistics.median(rates),
            "steps_per_cpu_s": statistics.median(cpu_rates) if vector != "gymnasium-async" else float("nan"),
            "min_steps_per_s": min(rates), "max_steps_per_s": max(rates)}


def bench(envs: Sequence[str], num_envs: Sequence[int], *, seconds: float, repeats: int,
          vectors: Sequence[str] = tuple(VECTORS)) -> List[Dict[str, Any]]:
    rows = []
    for env_id in envs:
        for n in num_envs:
            group = [bench_one(env_id, n, v, seconds=seconds, repeats=repeats) for v in vectors]
            base = next((r["steps_per_s"] for r in group if r["vector"] == "r2ac"), None)
            for r in group:
                r["vs_r2ac"] = r["steps_per_s"] / base if base else float("nan")
            rows += group
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="r2ac bench vecenv", description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), help="gymnasium ids")
    parser.add_argument("--num-envs", nargs="+", type=int, default=[8, 32])
    parser.add_argument("--vectors", nargs="+", default=list(VECTORS), choices=list(VECTORS))
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one timing window")
    parser.add_argument("--repeats", type=int, default=3, help="timing windows (median reported)")
    parser.add_argument("--csv", default="runs/bench/vecenv.csv", help="where to write the CSV")
    args = parser.parse_args(argv)
    rows = bench(args.envs, args.num_envs, seconds=args.seconds, repeats=args.repeats, vectors=args.vectors)
    print(format_table(rows, COLUMNS))
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    write_csv(args.csv, rows, COLUMNS)
    path = args.csv
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, Python {platform.python_version()}; "
          f"CSV: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
