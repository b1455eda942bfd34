"""A short training run on a real benchmark env, compared with a random policy on the same env.

    python -m r2ac.experiments.short_run configs/atari/breakout_quick.yaml --out results/breakout_quick

Trains the config (single-process runtime), then plays ``--episodes`` episodes with the trained policy
(``r2ac eval``) and with uniformly random actions, and writes ``results.md`` (table: returns, steps,
wall time, training steps/s on this machine) next to the run's own metrics and learning curve.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from r2ac.config import load_config
from r2ac.envs import make_vec_env
from r2ac.evaluation import EpisodeQuota
from r2ac.runtime.local import evaluate, train


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    cfg = load_config(a.config, list(a.overrides) + [f"run_dir={a.out}", "logger.progress_bar=false"])
    t0 = time.time()
    summary = train(cfg)
    wall = time.time() - t0
    trained = evaluate(a.out, sets=1, episodes=a.episodes)
    rand = random_policy_returns(cfg.env.id, dict(cfg.env.options), a.episodes)
    rows = [("random policy", float(np.mean(rand)), float(np.std(rand))),
            (f"trained {cfg.model.core}/{cfg.model.learning}, M={cfg.learner.unroll_length}",
             trained["mean"], float(np.std(json.load(open(os.path.join(a.out, "eval.json")))["set_means"])))]
    table = [f"{cfg.env.id}: {summary['step']} agent steps in {wall / 60:.1f} min "
             f"({summary['step'] / wall:.0f} steps/s including learning), {a.episodes} test episodes each", "",
             "| policy | mean return |", "| --- | --- |"] + [f"| {n} | {m:.2f} |" for n, m, _ in rows]
    text = "\n".join(table)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
