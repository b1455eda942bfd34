"""Raw env stepping rates: ``python -m r2ac.bench.envs`` prints a table and writes a CSV.

Each env is built with ``make_vec_env``, reset, warmed up, then stepped with uniformly random actions
(pre-drawn) for ``repeats`` timing windows of ``seconds`` each; the table reports the median window
(and the slowest and fastest). "steps/s" are agent steps summed over the ``num_envs`` envs (one
``venv.step`` = ``num_envs`` agent steps); "frames/s" multiplies by the action repeat (Atari and
DMLab: 4 emulator frames per agent step). Envs that cannot be built here (DeepMind Lab without
``make dmlab``) get a row saying why. DeepMind Lab runs at most 8 envs (``_MAX_NUM_ENVS``), in one worker
process unless ``workers=N`` is given (``--envs dmlab:rooms_watermaze,workers=2``): one worker = one core.

    python -m r2ac.bench.envs                                   # the default set, 32 envs
    python -m r2ac.bench.envs --envs tmaze,corridor_length=100 watermaze --num-envs 64
    python -m r2ac.bench.envs --ale-python-loop                 # also time a gymnasium sync loop

``--ale-python-loop`` adds a row for the cheapest Python-loop Atari backend with the same
preprocessing (``gymnasium.make_vec("ALE/<Game>-v5", vectorization_mode="sync")`` at frameskip 1,
four emulator steps per agent step, numpy max-pool, nearest resize and frame stack; see
``bench_ale_python_loop``), to compare with ale-py's native vector env.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["DEFAULT_ENVS", "bench_env", "bench_envs", "format_table", "main", "parse_env_arg", "write_csv"]

# (env id, options): the headline memory tasks at the lengths the experiments use, and one of each kind.
DEFAULT_ENVS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("tmaze", {"corridor_length": 40}),
    ("watermaze", {}),
    ("atari:Breakout", {}),
    ("procgen:chaser", {}),
    ("gym:CartPole-v1", {}),
    ("minigrid:MemoryS11", {}),
    ("dmlab:rooms_watermaze", {}),
)
_FRAMES_PER_STEP = {"atari": 4, "dmlab": 4}
# DeepMind Lab: each env is a whole engine instance (~1 s to load a level, ~100 MB): at most this many.
_MAX_NUM_ENVS = {"dmlab": 8}
CSV_FIELDS = ("env", "options", "num_envs", "steps_per_s", "steps_per_s_min", "steps_per_s_max",
              "frames_per_s", "us_per_vector_step", "setup_s", "windows", "seconds_per_window",
              "status", "cpus", "load_avg_1min", "python", "numpy", "machine", "date")


def parse_env_arg(text: str) -> tuple[str, dict[str, Any]]:
    """``"tmaze,corridor_length=40,auto_advance=False"`` -> ``("tmaze", {...})``."""
    env_id, *pairs = text.split(",")
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"bad env option {pair!r} in {text!r}: expected key=value")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            options[key.strip()] = value.strip()
    return env_id.strip(), options


def _time_windows(step, actions: np.ndarray, num_envs: int, seconds: float, repeats: int,
                  warmup_s: float) -> list[float]:
    n_actions = actions.shape[0]
    i = 0
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        step(actions[i % n_actions])
        i += 1
    rates = []
    for _ in range(repeats):
        steps = 0
        start = time.perf_counter()
        end = start + seconds
        while True:
            for _ in range(8):
                step(actions[i % n_actions])
                i += 1
            steps += 8
            now = time.perf_counter()
            if now >= end:
                break
        rates.append(num_envs * steps / (now - start))
    return rates


def _row(env: str, options: dict, num_envs: int, rates: list[float] | None, setup_s: float,
         seconds: float, frames_per_step: int, status: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "env": env, "options": ",".join(f"{k}={v}" for k, v in options.items()),
        "num_envs": num_envs, "setup_s": round(setup_s, 3), "seconds_per_window": seconds,
        "status": status, "cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "numpy": np.__version__, "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if rates:
        median = statistics.median(rates)
        row.update(steps_per_s=round(median), steps_per_s_min=round(min(rates)),
                   steps_per_s_max=round(max(rates)), frames_per_s=round(median * frames_per_step),
                   us_per_vector_step=round(1e6 * num_envs / median, 1), windows=len(rates))
    return row


def bench_env(env_id: str, options: dict[str, Any] | None = None, *, num_envs: int = 32,
              seconds: float = 2.0, repeats: int = 3, warmup_s: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """Time one env kind; returns a table row (``status`` says "ok" or why it was skipped)."""
    from r2ac.envs import make_vec_env, parse_env_id

    options = dict(options or {})
    kind = parse_env_id(env_id)[0]
    num_envs = min(num_envs, _MAX_NUM_ENVS.get(kind, num_envs))
    t0 = time.perf_counter()
    try:
        venv = make_vec_env(env_id, num_envs, seed, **options)
    except ImportError as exc:
        missing = getattr(exc.__cause__, "name", None) or getattr(exc, "name", None) or "a dependency"
        return _row(env_id, options, num_envs, None, 0.0, seconds, 1,
                    f"skipped: {missing} is not installed here")
    try:
        venv.reset()
        setup_s = time.perf_counter() - t0
        actions = np.random.default_rng(seed).integers(0, venv.num_actions, size=(1024, num_envs))
        rates = _time_windows(venv.step, actions, num_envs, seconds, repeats, warmup_s)
    finally:
        venv.close()
    return _row(env_id, options, num_envs, rates, setup_s, seconds, _FRAMES_PER_STEP.get(kind, 1), "ok")


def bench_ale_python_loop(game: str = "Breakout", *, num_envs: int = 32, seconds: float = 2.0,
                          repeats: int = 3, warmup_s: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """The cheapest Python-loop Atari backend with the same preprocessing, for comparison.

    gymnasium's SyncVectorEnv over ALE envs with frameskip 1 and grey frames; one agent step = 4
    emulator steps, max-pool of the last two frames, nearest-neighbour resize to 84x84 by index
    arrays (cheaper than the area interpolation ALE uses), 4-frame stack roll. A lower bound on the
    cost of doing in Python what ale-py's native vector env does in C++.
    """
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    t0 = time.perf_counter()
    venv = gymnasium.make_vec(f"ALE/{game}-v5", num_envs=num_envs, vectorization_mode="sync",
                              frameskip=1, repeat_action_probability=0.0, obs_type="grayscale")
    h, w = venv.single_observation_space.shape
    rows = (np.arange(84) * h // 84)[:, None]
    cols = np.arange(84) * w // 84
    stack = np.zeros((num_envs, 4, 84, 84), dtype=np.uint8)

    def step(actions: np.ndarray) -> np.ndarray:
        for k in range(4):
            frame = venv.step(actions)[0]
            if k == 2:
                previous = frame
        pooled = np.maximum(previous, frame)
        stack[:, :-1] = stack[:, 1:]
        stack[:, -1] = pooled[:, rows, cols]
        return stack.copy()

    try:
        venv.reset(seed=seed)
        setup_s = time.perf_counter() - t0
        actions = np.random.default_rng(seed).integers(0, venv.single_action_space.n, size=(1024, num_envs))
        rates = _time_windows(step, actions, num_envs, seconds, repeats, warmup_s)
    finally:
        venv.close()
    return _row(f"ale-python-loop:{game}", {"frameskip": "4x1", "maxpool": 2, "resize": "nearest", "stack": 4},
                num_envs, rates, setup_s, seconds, 4, "ok")


def bench_envs(envs: Sequence[tuple[str, dict[str, Any]]] = DEFAULT_ENVS, *, num_envs: int = 32,
               seconds: float = 2.0, repeats: int = 3, seed: int = 0, ale_python_loop: bool = False,
               progress: bool = True) -> list[dict[str, Any]]:
    """Time every env of ``envs``; returns the table rows."""
    rows = []
    for env_id, options in envs:
        if progress:
            print(f"timing {env_id} {options or ''} ...", file=sys.stderr, flush=True)
        rows.append(bench_env(env_id, options, num_envs=num_envs, seconds=seconds, repeats=repeats,
                              seed=seed))
        if ale_python_loop and env_id.startswith("atari:"):
            game = env_id.split(":", 1)[1]
            if progress:
                print(f"timing gymnasium sync loop over ALE/{game}-v5 ...", file=sys.stderr, flush=True)
            rows.append(bench_ale_python_loop(game, num_envs=num_envs, seconds=seconds,
                                              repeats=repeats, seed=seed))
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    header = ("env", "options", "envs", "steps/s", "(min-max)", "frames/s", "us/vec-step", "note")
    lines = []
    for r in rows:
        if r["status"] != "ok":
            lines.append((r["env"], r["options"], str(r["num_envs"]), "-", "", "", "", r["status"]))
            continue
        lines.append((r["env"], r["options"], str(r["num_envs"]), f"{r['steps_per_s']:,}",
                      f"({r['steps_per_s_min']:,}-{r['steps_per_s_max']:,})", f"{r['frames_per_s']:,}",
                      f"{r['us_per_vector_step']:,}", ""))
    widths = [max([len(h)] + [len(line[i]) for line in lines]) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    return "\n".join(out)


def write_csv(rows: Sequence[dict[str, Any]], path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in CSV_FIELDS})
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m r2ac.bench.envs", description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", metavar="ID[,KEY=VALUE...]",
                        help="env ids with options (default: " + " ".join(
                            e + "".join(f",{k}={v}" for k, v in o.items()) for e, o in DEFAULT_ENVS) + ")")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one timing window")
    parser.add_argument("--repeats", type=int, default=3, help="timing windows per env (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", default="runs/bench/envs.csv", help="where to write the CSV")
    parser.add_argument("--ale-python-loop", action="store_true",
                        help="also time a gymnasium sync loop over ALE envs for each atari: env")
    args = parser.parse_args(argv)
    envs = [parse_env_arg(e) for e in args.envs] if args.envs else list(DEFAULT_ENVS)
    rows = bench_envs(envs, num_envs=args.num_envs, seconds=args.seconds, repeats=args.repeats,
                      seed=args.seed, ale_python_loop=args.ale_python_loop)
    print(format_table(rows))
    path = write_csv(rows, args.csv)
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (other processes slow the "
          f"rates down), Python {platform.python_version()}, numpy {np.__version__}; CSV: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
