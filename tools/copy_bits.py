"""Which bits a trained agent of the copy task gets right: the accuracy at each query position, for trained
runs of ``r2ac bench memory --tasks copy`` (docs/results.md, the copy rows of the suite).

    python tools/copy_bits.py RUN_DIR [RUN_DIR ...] [--episodes N] [--out CSV]

For each run: its newest checkpoint and its task (``env.options``), ``--episodes`` episodes on fresh envs
(one episode per env, all started together), the policy's action at the k-th query step against the k-th
bit shown, with actions sampled (as in training) and greedy. Chance is 0.5 per bit.
"""

from __future__ import annotations

import argparse
import csv
import os

import numpy as np
import torch

from r2ac.api import load
from r2ac.envs.recall import CopyVecEnv


def bit_accuracy(policy, span: int, symbols: int, episodes: int, seed: int = 12345) -> np.ndarray:
    """Accuracy per query position ``[symbols]`` and, last, the fraction of episodes with every bit right."""
    env = CopyVecEnv(episodes, seed, span=span, symbols=symbols)
    obs = env.reset()
    bits = env.bits.copy()  # the episode's bits; the env draws new ones when it resets at the end
    state = policy.initial_state(episodes)
    right = np.zeros((episodes, symbols), dtype=bool)
    reward = done = None
    for t in range(span + 2 * symbols):
        action, state = policy.act(obs, state, reward=reward, done=done)
        k = t - symbols - span
        if k >= 0:
            right[:, k] = np.asarray(action) == bits[:, k]
        obs, reward, done, _ = env.step(np.asarray(action))
    if not done.all():
        raise RuntimeError("copy_bits: the episodes did not end together; is this the copy task?")
    return np.concatenate([right.mean(0), [right.all(1).mean()]])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--out", default="", help="also write the table as CSV here")
    a = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: a thread pool only adds waiting on a busy machine
    rows = []
    try:
        for run in a.runs:
            for greedy in (False, True):
                policy = load(run, greedy=greedy)
                cfg = policy.config
                if cfg.env.id != "copy":
                    raise SystemExit(f"copy_bits: {run} is a run of env {cfg.env.id!r}, not of the copy task")
                opts = dict(cfg.env.options)
                acc = bit_accuracy(policy, int(opts.get("span", 100)), int(opts.get("symbols", 3)), a.episodes)
                rows.append([os.path.basename(os.path.normpath(run)), "greedy" if greedy else "sampled", *acc])
    finally:
        torch.set_num_threads(threads)
    symbols = len(rows[0]) - 3
    print("| run | actions | " + " | ".join(f"bit {k + 1}" for k in range(symbols)) + " | all bits right |")
    print("| " + " | ".join(["---"] * (symbols + 3)) + " |")
    for r in rows:
        print("| " + " | ".join(r[:2] + [f"{v:.3f}" for v in r[2:]]) + " |")
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["run", "actions"] + [f"bit_{k + 1}" for k in range(symbols)] + ["all_right"])
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
