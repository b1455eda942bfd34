"""A short training run on a real benchmark env, compared with a random policy on the same env.

    python -m r2ac.experiments.short_run configs/atari/seaquest_quick.yaml --out results/seaquest_quick

Trains the config (single-process runtime), then plays ``--episodes`` episodes with the trained policy
(``r2ac eval``) and with uniformly random actions, and writes ``results.md`` and ``results.csv`` (returns
with standard errors, the mean training return over the first and the last 10 % of the steps, steps,
wall time, training steps/s on this machine) next to the run's own metrics and learning curve.
``--eval-only`` does the comparison for a run already trained with ``r2ac train CONFIG run_dir=OUT``
(its resolved config is checked against CONFIG).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from r2ac.config import load_config
from r2ac.envs import make_config_env, make_vec_env
from r2ac.experiments.common import read_curve, write_results_md
from r2ac.evaluation import EpisodeQuota
from r2ac.evaluation import evaluate_checkpoint, play_episodes
from r2ac.runtime.local import train


def random_policy_returns(env_id: str, options: dict, episodes: int, num_envs: int = 16, seed: int = 999):
    venv = make_vec_env(env_id, num_envs, seed, **options)
    rng = np.random.default_rng(seed)
    venv.reset()
    quota = EpisodeQuota(num_envs, episodes)  # the same protocol as `r2ac eval`
    while not quota.full():
        _, _, done, info = venv.step(rng.integers(0, venv.num_actions, size=num_envs))
        quota.add(done, info["episode_return"])
    venv.close()
    return quota.returns()


def untrained_policy_returns(cfg, episodes: int, seed: int = 999):
    """Returns of a freshly initialised network (the config's architecture and init, seed ``cfg.seed``):
    the starting point of training, which is not the uniform random policy."""
    import torch

    from r2ac.runtime import build_net

    venv = make_config_env(cfg.env, cfg.env.num_envs, seed)
    torch.manual_seed(cfg.seed)
    net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    return play_episodes(net, venv, episodes, seed)


def training_return_windows(metrics_csv: str, fraction: float = 0.1):
    """Mean training return over the first and the last ``fraction`` of the logged agent steps."""
    rows = list(zip(*read_curve(metrics_csv)))
    if not rows:
        return float("nan"), float("nan")
    last_step = rows[-1][0]
    first = [r for s, r in rows if s <= fraction * last_step] or [rows[0][1]]
    last = [r for s, r in rows if s >= (1 - fraction) * last_step] or [rows[-1][1]]
    return float(np.mean(first)), float(np.mean(last))


def _mean_sem(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def _finished_run(cfg, run_dir: str) -> dict:
    """The summary of a finished run in ``run_dir`` whose resolved config equals ``cfg`` (name, run_dir,
    logger settings aside); a clear error otherwise."""
    from r2ac.config import config_to_dict

    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    if summary.get("status") != "finished":
        raise ValueError(f"{run_dir}: the run did not finish (status {summary.get('status')!r}); train it first")
    ran = config_to_dict(load_config(os.path.join(run_dir, "config.yaml")))
    want = config_to_dict(cfg)
    ignore = ("name", "run_dir", "logger")
    diff = sorted(k for k in set(ran) | set(want) if k not in ignore and ran.get(k) != want.get(k))
    if diff:
        raise ValueError(f"{run_dir} was trained with a different config (sections {diff} differ); "
                         "run without --eval-only to train it")
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--out", required=True)
    p.add_argument("--eval-only", action="store_true",
                   help="skip training: evaluate the finished run in --out (trained with `r2ac train CONFIG "
                        "run_dir=OUT`; its resolved config must match CONFIG apart from name and run_dir)")
    a = p.parse_args(argv)
    cfg = load_config(a.config, list(a.overrides) + [f"run_dir={a.out}", "logger.progress_bar=false"])
    if a.eval_only:
        summary = _finished_run(cfg, a.out)
        wall = summary["step"] / summary["steps_per_s"]
    else:
        t0 = time.time()
        summary = train(cfg)
        wall = time.time() - t0
    trained = evaluate_checkpoint(a.out, sets=1, episodes=a.episodes)["episode_returns"]
    rand = random_policy_returns(cfg.env.id, dict(cfg.env.options), a.episodes)
    untrained = untrained_policy_returns(cfg, a.episodes)
    early, late = training_return_windows(os.path.join(a.out, "metrics.csv"))
    rows = [("uniform random policy", *_mean_sem(rand)),
            ("untrained network (training's start)", *_mean_sem(untrained)),
            (f"trained {cfg.model.core}/{cfg.model.learning}, M={cfg.learner.unroll_length}", *_mean_sem(trained))]
    with open(os.path.join(a.out, "results.csv"), "w") as f:
        f.write("policy,mean_return,sem,episodes\n")
        for name, m, se in rows:
            f.write(f"{name},{m:.4f},{se:.4f},{a.episodes}\n")
        f.write(f"training first 10%,{early:.4f},,\ntraining last 10%,{late:.4f},,\n")
    table = [f"{cfg.env.id}: {summary['step']} agent steps in {wall / 60:.1f} min "
             f"({summary['step'] / wall:.0f} steps/s including learning); test: {a.episodes} episodes each "
             "(mean +- standard error)", "",
             "| policy | mean return |", "| --- | --- |"]
    table += [f"| {n} | {m:.2f} +- {se:.2f} |" for n, m, se in rows]
    table += [f"| training episodes, first 10 % of steps | {early:.2f} |",
              f"| training episodes, last 10 % of steps | {late:.2f} |"]
    write_results_md(a.out, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
