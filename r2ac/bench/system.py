"""``r2ac bench system``: throughput of the whole training system against the physical limit.

For each env, side by side in one process run:

- ``raw``: the vector env alone, uniformly random actions (``r2ac.bench.envs.bench_env``): the limit.
- ``actor``: one ``Actor`` alone: env stepping + batched CPU inference + the closed-form RTRL sensitivity
  transport, no learner (what one actor process can produce at most).
- ``local``: the single-process runtime (``runtime.kind=local``), actor and learner taking turns.
- ``ray-1``, ``ray-2``: the Ray runtime with 1 and 2 actor processes and the learner process, all on
  this machine (a local Ray instance).

Training runs are real ``train()`` calls stopped after ``--seconds``; their rate is the median of the
per-second metric rows after a warm-up (the first third, at least 3 s). Rates are agent steps/s summed
over envs; frames/s multiply by the action repeat (4 for Atari and DeepMind Lab; DMLab is skipped with
its reason where ``make dmlab`` has not installed it). Also reported: percent of the raw
rate, policy lag (learner version minus behaviour version, mean and max over the run), bytes shipped
per trajectory, learner updates/s. Prints a table, writes ``system.csv`` and ``system.png``.

    r2ac bench system                                   # tmaze, watermaze, atari:Breakout, dmlab; 30 s per run
    r2ac bench system --envs tmaze --seconds 10 --actors 1 2
    r2ac bench system --envs atari:Breakout --modes raw ray --actors 4 14 device=cuda runtime.learner_gpus=1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from typing import Dict, List, Optional, Sequence

from r2ac.bench.common import format_table, machine_description, write_csv

# Per env: the model and batch of the repository's quick configs (configs/quickstart.yaml for the
# memory tasks, configs/atari/breakout_quick.yaml for Atari), written out so the benchmark needs no files.
_MEMORY = ["model.stem=mlp", "model.stem_channels=[]", "model.stem_fc=64", "model.hidden_size=64",
           "learner.unroll_length=10", "learner.batch_size=32", "env.num_envs=32"]
CASES: Dict[str, List[str]] = {
    "tmaze": ["env.id=tmaze", "env.options={corridor_length: 20}", *_MEMORY],
    "watermaze": ["env.id=watermaze", *_MEMORY],
    "atari:Breakout": ["env.id=atari:Breakout", "env.num_envs=16", "model.stem=shallow", "model.stem_channels=[16, 32]",
                       "model.hidden_size=256", "learner.unroll_length=20", "learner.batch_size=32"],
    # configs/dmlab/select_nonmatching_quick_rtrl.yaml's model on rooms_watermaze (2 engine worker processes)
    "dmlab:rooms_watermaze": ["env.id=dmlab:rooms_watermaze", "env.num_envs=8", "env.options={workers: 2}",
                              "model.stem=shallow", "model.stem_channels=[16, 32]", "model.hidden_size=128",
                              "learner.unroll_length=10", "learner.batch_size=8"],
}
COLUMNS = ["env", "mode", "actors", "num_envs", "steps_per_s", "frames_per_s", "pct_of_raw", "policy_lag_mean",
           "policy_lag_max", "bytes_per_trajectory", "learner_updates_per_s", "seconds", "load_avg_1min", "note"]


def make_config(env: str, out: str, mode: str, actors: int = 1, extra: Sequence[str] = ()):
    from r2ac.config import load_config

    overrides = CASES.get(env, [f"env.id={env}", *_MEMORY])
    return load_config(None, [
        *overrides, "model.core=elstm", "model.learning=rtrl", f"name=bench-{env}-{mode}",
        f"run_dir={os.path.join(out, 'runs', env.replace(':', '_') + '-' + mode)}", "total_steps=1000000000000",
        f"runtime.kind={'ray' if mode.startswith('ray') else 'local'}", f"runtime.num_actors={actors}",
        "logger.tensorboard=false", "logger.log_interval_s=1.0", "logger.progress_bar=false",
        "checkpoint.interval_s=.inf", "runtime.torch_threads=1", *extra])


def raw_rate(cfg, seconds: float) -> float:
    from r2ac.bench.envs import bench_env

    row = bench_env(cfg.env.id, dict(cfg.env.options), num_envs=cfg.env.num_envs, seconds=max(seconds / 5, 0.2),
                    repeats=5, warmup_s=min(1.0, seconds / 5))
    if row["status"] != "ok":
        raise RuntimeError(row["status"])
    return float(row["steps_per_s"])


def actor_rate(cfg, seconds: float) -> tuple:
    """Agent steps/s of one Actor alone (envs + inference + sensitivity transport) and its trajectory bytes."""
    from r2ac.agent.actor import Actor
    from r2ac.agent.trajectory import nbytes
    from r2ac.runtime import build_net, make_env, set_fast_math

    set_fast_math(cfg.runtime.torch_threads)
    venv = make_env(cfg, 0)
    actor = Actor(build_net(cfg, venv.observation_shape, venv.num_actions), venv, cfg.learner.unroll_length)
    try:
        traj = actor.rollout()  # warm-up
        rates = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(rates) < 3:
            t0 = time.perf_counter()
            actor.rollout()
            rates.append(actor.M * actor.B / (time.perf_counter() - t0))
        return statistics.median(rates), nbytes(traj)
    finally:
        actor.close()


def _steady(rows: List[Dict], key: str, skip_s: float) -> Optional[float]:
    vals = [(float(r["wall_time"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
    if not vals:
        return None
    t0 = vals[0][0]
    late = [v for t, v in vals if t - t0 >= skip_s] or [v for _, v in vals[1:]] or [vals[0][1]]
    return statistics.median(late)


def run_rate(cfg, seconds: float) -> Dict:
    """Train for ``seconds`` with the configured runtime; steady-state rates from its metrics."""
    from r2ac.logger import read_metrics

    shutil.rmtree(cfg.run_dir, ignore_errors=True)
    if cfg.runtime.kind == "ray":
        from r2ac.runtime.ray_runtime import train
    else:
        from r2ac.runtime.local import train
    train(cfg, time_limit_s=seconds)
    _, rows = read_metrics(os.path.join(cfg.run_dir, "metrics.csv"))
    skip = max(3.0, seconds / 3)
    lag_means = [float(r["policy_lag_mean"]) for r in rows if r.get("policy_lag_mean")]
    lag_maxes = [float(r["policy_lag_max"]) for r in rows if r.get("policy_lag_max")]
    out = {"steps_per_s": _steady(rows, "steps_per_s", skip),
           "learner_updates_per_s": _steady(rows, "learner_updates_per_s", skip),
           "bytes_per_trajectory": _steady(rows, "bytes_per_trajectory", 0.0),
           "policy_lag_mean": statistics.mean(lag_means) if lag_means else None,
           "policy_lag_max": max(lag_maxes) if lag_maxes else None}
    if cfg.runtime.kind == "ray":
        out["actor_steps_per_s"] = _steady(rows, "actor_steps_per_s", skip)
    return out


def bench_env_system(env: str, out: str, seconds: float, actors: Sequence[int], modes: Sequence[str],
                     progress: bool = True, overrides: Sequence[str] = ()) -> List[Dict]:
    from r2ac.runtime import frames_per_step

    base = make_config(env, out, "raw", extra=overrides)
    fps = frames_per_step(base)
    rows: List[Dict] = []

    def add(mode: str, n: int, rate: Optional[float], raw: Optional[float], **kw) -> None:
        row = {"env": env, "mode": mode, "actors": n, "num_envs": base.env.num_envs, "seconds": seconds,
               "load_avg_1min": round(os.getloadavg()[0], 2), **kw}
        if rate is not None:
            row.update(steps_per_s=round(rate), frames_per_s=round(rate * fps))
            if raw:
                row["pct_of_raw"] = round(100 * rate / raw, 1)
        rows.append(row)
        if progress:
            print(format_table([row], COLUMNS).splitlines()[-1], flush=True)

    raw = None
    if "raw" in modes:
        raw = raw_rate(base, seconds)
        add("raw", 0, raw, raw, note="random actions, envs alone")
    if "actor" in modes:
        rate, size = actor_rate(base, min(seconds, 10.0))
        add("actor", 1, rate, raw, bytes_per_trajectory=size, note="one Actor, no learner")
    if "local" in modes:
        r = run_rate(make_config(env, out, "local", extra=overrides), seconds)
        add("local", 1, r["steps_per_s"], raw, policy_lag_mean=r["policy_lag_mean"],
            policy_lag_max=r["policy_lag_max"], bytes_per_trajectory=r["bytes_per_trajectory"],
            learner_updates_per_s=r["learner_updates_per_s"], note="single process")
    if "ray" in modes:
        for n in actors:
            r = run_rate(make_config(env, out, f"ray-{n}", n, overrides), seconds)
            add(f"ray-{n}", n, r["steps_per_s"], raw, policy_lag_mean=r["policy_lag_mean"],
                policy_lag_max=r["policy_lag_max"], bytes_per_trajectory=r["bytes_per_trajectory"],
                learner_updates_per_s=r["learner_updates_per_s"],
                note=f"actor {r['actor_steps_per_s']:.0f} steps/s while rolling out"
                if r.get("actor_steps_per_s") else "")
    if "ray-frozen" in modes:
        # the same Ray run with the stem loaded from a file and frozen: actors run the stem and ship
        # features; the learner skips it (issue: frozen-stem pipeline). A freshly initialised stem is
        # exported for this: throughput does not depend on what the stem learned.
        stem_file = export_fresh_stem(base, os.path.join(out, env.replace(":", "_") + "-stem.safetensors"))
        n = actors[0]
        r = run_rate(make_config(env, out, f"ray-{n}-frozen", n,
                                 [*overrides, f"stem.path={stem_file}", "stem.freeze=true"]), seconds)
        add(f"ray-{n}-frozen", n, r["steps_per_s"], raw, policy_lag_mean=r["policy_lag_mean"],
            policy_lag_max=r["policy_lag_max"], bytes_per_trajectory=r["bytes_per_trajectory"],
            learner_updates_per_s=r["learner_updates_per_s"], note="frozen stem: actors ship features")
    return rows


def export_fresh_stem(cfg, path: str) -> str:
    from r2ac.agent.stem_io import export_stem
    from r2ac.envs import make_config_env
    from r2ac.runtime import build_net

    venv = make_config_env(cfg.env, 1, 0)
    net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    venv.close()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return export_stem(net.stem, path, env_id=cfg.env.id, steps=0, note="freshly initialised, for benchmarks")


def plot(rows: List[Dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, ax = plt.subplots(figsize=(2.2 + 2.2 * len(envs), 4))
    width = 0.8 / max(len(modes), 1)
    for j, mode in enumerate(modes):
        xs, ys = [], []
        for i, env in enumerate(envs):
            r = next((r for r in rows if r["env"] == env and r["mode"] == mode and r.get("steps_per_s")), None)
            if r:
                xs.append(i + (j - (len(modes) - 1) / 2) * width)
                ys.append(r["steps_per_s"])
        ax.bar(xs, ys, width, label=mode)
    ax.set_xticks(range(len(envs)), envs)
    ax.set_yscale("log"), ax.set_ylabel("agent steps / s"), ax.grid(alpha=0.3, axis="y")
    ax.set_title("system throughput vs raw env stepping"), ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="r2ac bench system", description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=list(CASES), help=f"env ids (default: {' '.join(CASES)})")
    p.add_argument("--seconds", type=float, default=30.0, help="length of each measured training run")
    p.add_argument("--actors", type=int, nargs="+", default=[1, 2], help="Ray actor processes to try")
    p.add_argument("--modes", nargs="+", default=["raw", "actor", "local", "ray"],
                   choices=["raw", "actor", "local", "ray", "ray-frozen"],
                   help="ray-frozen: the Ray run with a frozen stem (actors ship features), for the first --actors")
    p.add_argument("--out", default="bench_out", help="folder for system.csv, system.png and the runs")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides for every run, e.g. device=cuda runtime.learner_gpus=1 (the learner "
                        "process on a GPU)")
    a = p.parse_args(argv)
    bad = [o for o in a.overrides if "=" not in o]
    if bad:
        p.error(f"not a key=value override: {' '.join(bad)} (e.g. device=cuda runtime.learner_gpus=1)")
    if a.overrides:  # a wrong key or value stops here, before Ray starts
        from r2ac.config import ConfigError

        try:
            make_config(a.envs[0], a.out, "ray", extra=a.overrides)
        except ConfigError as e:
            p.error(str(e))
    print(f"r2ac bench system: {a.seconds:g} s per run; {machine_description()}; "
          f"load average {os.getloadavg()[0]:.2f}" + (f"; overrides: {' '.join(a.overrides)}" if a.overrides else ""))
    print(format_table([], COLUMNS))
    started = False
    if "ray" in a.modes or "ray-frozen" in a.modes:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=max(os.cpu_count() or 1, max(a.actors) + 1), include_dashboard=False,
                     log_to_driver=False)
            started = True
    rows: List[Dict] = []
    try:
        for env in a.envs:
            try:
                rows += bench_env_system(env, a.out, a.seconds, a.actors, a.modes, overrides=a.overrides)
            except (ImportError, RuntimeError) as e:
                rows.append({"env": env, "mode": "skipped", "note": f"{type(e).__name__}: {e}"})
                print(f"{env}: skipped ({e})", flush=True)
    finally:
        if started:
            import ray

            ray.shutdown()
    print()
    print(format_table(rows, COLUMNS))
    os.makedirs(a.out, exist_ok=True)
    write_csv(os.path.join(a.out, "system.csv"), rows, COLUMNS)
    plot(rows, os.path.join(a.out, "system.png"))
    print(f"\n{os.cpu_count()} CPUs, load average now {os.getloadavg()[0]:.2f}; wrote {a.out}/system.csv and "
          f"{a.out}/system.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
