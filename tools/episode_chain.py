"""Does a trained agent succeed on its own, or only in a chain of episodes? For trained runs of
``r2ac bench memory`` (delayed cue, T-maze, copy; docs/results.md, "Episode chains").

    python tools/episode_chain.py RUN_DIR [RUN_DIR ...] [--envs B] [--episodes K] [--seed S]
        [--set key=value ...] [--out CSV]

For each run: its newest checkpoint plays ``K`` consecutive episodes on each of ``B`` fresh envs of its own
task (sampled actions, as in training). The table gives the mean return of the first episode (from nothing),
of the later ones, and of an episode after a paid one (return > 0) and after an unpaid one (pooled over
episodes 2..K). An agent whose memory works alone has about the same return in all four columns; one that
stores the cue only when the previous episode paid (through the reward input at the first frame, runs with
``model.carry_inputs_across_episodes=true``) is at chance in the first episode and after an unpaid one, and
near 1 after a paid one: the rolling training success then reads high while one miss drops the agent to
chance until a guess pays again. ``--set`` overrides the runs' configs (runs saved before
``model.carry_inputs_across_episodes`` existed load with ``true``, as they were trained).
"""

from __future__ import annotations

import argparse

import numpy as np

from r2ac.api import _config_of, load_checkpoint_for, policy_from_checkpoint
from r2ac.bench.common import labelled_runs, report_table
from r2ac.config import apply_overrides
from r2ac.envs import make_vec_env

COLUMNS = ("run", "envs", "episodes", "first", "later", "after_paid", "after_unpaid", "n_after_unpaid")


def episode_returns(policy, env_id: str, options: dict, envs: int, episodes: int, seed: int) -> np.ndarray:
    """[envs, episodes]: the returns of each env's first ``episodes`` episodes, played from fresh envs."""
    venv = make_vec_env(env_id, envs, seed, **options)
    out = np.full((envs, episodes), np.nan)
    count = np.zeros(envs, dtype=np.int64)
    try:
        obs, state, reward, done = venv.reset(), policy.initial_state(envs), None, None
        while (count < episodes).any():
            action, state = policy.act(obs, state, reward=reward, done=done)
            obs, reward, done, info = venv.step(action)
            for e in np.flatnonzero(done):
                if count[e] < episodes:
                    out[e, count[e]] = info["episode_return"][e]
                count[e] += 1
    finally:
        venv.close()
    return out


def chain_row(returns: np.ndarray) -> dict:
    """The table's columns from ``episode_returns``."""
    prev, nxt = returns[:, :-1].ravel(), returns[:, 1:].ravel()
    paid, unpaid = nxt[prev > 0], nxt[prev <= 0]
    return {"envs": returns.shape[0], "episodes": returns.shape[1], "first": float(returns[:, 0].mean()),
            "later": float(returns[:, 1:].mean()) if returns.shape[1] > 1 else np.nan,
            "after_paid": float(paid.mean()) if paid.size else np.nan,
            "after_unpaid": float(unpaid.mean()) if unpaid.size else np.nan, "n_after_unpaid": int(unpaid.size)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--envs", type=int, default=200)
    p.add_argument("--episodes", type=int, default=4, help="consecutive episodes per env (>= 2)")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the runs' configs")
    p.add_argument("--out", default="", help="also write the table as CSV here")
    a = p.parse_args(argv)
    if a.envs < 1 or a.episodes < 2:
        raise SystemExit("episode_chain: --envs must be >= 1 and --episodes >= 2")
    rows = []
    for run, label in labelled_runs(a.runs):
        ckpt = load_checkpoint_for(run)
        cfg = _config_of(ckpt, run)
        if a.set:
            cfg = apply_overrides(cfg, a.set)
        policy = policy_from_checkpoint(ckpt, cfg, seed=a.seed)
        returns = episode_returns(policy, cfg.env.id, dict(cfg.env.options), a.envs, a.episodes, a.seed)
        rows.append({"run": label, **chain_row(returns)})
    report_table(["run", "first episode", "later episodes", "after a paid episode", "after an unpaid one (episodes)"],
                 [[r["run"], f"{r['first']:.2f}", f"{r['later']:.2f}", f"{r['after_paid']:.2f}",
                   f"{r['after_unpaid']:.2f} ({r['n_after_unpaid']})"] for r in rows], rows, COLUMNS, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
