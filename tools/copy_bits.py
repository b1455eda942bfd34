"""Which bits a trained agent of the copy task gets right: the accuracy at each query position, for trained
runs of ``r2ac bench memory --tasks copy`` (docs/results.md, the copy rows of the suite).

    python tools/copy_bits.py RUN_DIR [RUN_DIR ...] [--episodes N] [--out CSV] [--patterns] [--probe]

For each run: its newest checkpoint and its task (``env.options``), ``--episodes`` episodes on fresh envs
(one episode per env, all started together), the policy's action at the k-th query step against the k-th
bit shown, with actions sampled (as in training) and greedy. Chance is 0.5 per bit.

``--patterns``: per pattern of bits shown, for each query step, the fraction of episodes answering 1
(sampled) and the median logit gap z_1 - z_0 (a wrong answer given with certainty shows as a fraction of
0 or 1 on the wrong side and a gap of many nats). ``--probe``: how well a linear read-out of the core's
state at each query step (after the query frame) predicts each bit shown, fitted by logistic regression on
3/4 of the episodes and scored on the rest: a bit the probe reads and the policy does not answer is in the
memory, and lost at the policy's head (docs/results.md, "The copy task's middle bit").
"""

from __future__ import annotations

import argparse
import csv
import os

import numpy as np
import torch

from r2ac.api import load
from r2ac.bench.probe import probe_right, state_rows
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


def query_internals(policy, span: int, symbols: int, episodes: int, seed: int = 12345):
    """(bits [N, L], sampled actions [N, L], logit gaps z_1 - z_0 [N, L], core states [N, L, D]) at the L
    query steps of ``episodes`` fresh episodes of a trained policy (``r2ac.api.Policy``)."""
    env = CopyVecEnv(episodes, seed, span=span, symbols=symbols)
    obs = env.reset()
    bits = env.bits.copy()
    state = policy.initial_state(episodes)
    acts, gaps, states = [], [], []
    reward = done = None
    for t in range(span + 2 * symbols):
        action, state, logits = policy.act_with_logits(obs, state, reward=reward, done=done, greedy=False)
        if t >= symbols + span:
            acts.append(np.asarray(action))
            gaps.append((logits[:, 1] - logits[:, 0]).cpu().numpy())
            states.append(torch.from_numpy(state_rows(state.core)))
        obs, reward, done, _ = env.step(np.asarray(action))
    return bits, np.stack(acts, 1), np.stack(gaps, 1), torch.stack(states, 1)


def linear_probe_accuracy(x: torch.Tensor, y: np.ndarray, train_fraction: float = 0.75) -> float:
    """Test accuracy of a linear probe (``r2ac.bench.probe``: a softmax regression on standardised features, a
    small ridge) of binary labels ``y`` [N] on features ``x`` [N, D], fitted on the first ``train_fraction`` of
    the rows and scored on the rest."""
    held_out = np.arange(len(y)) >= int(len(y) * train_fraction)
    return float(probe_right(np.asarray(x, np.float64), np.asarray(y).astype(int), 2, held_out).mean())


def _print_patterns(name: str, bits, acts, gaps) -> None:
    L = bits.shape[1]
    print(f"\n{name}: per pattern of bits, the fraction answering 1 (sampled) / median logit gap z_1 - z_0")
    print("| bits | episodes | " + " | ".join(f"query {k + 1}" for k in range(L)) + " |")
    print("| " + " | ".join(["---"] * (L + 2)) + " |")
    code = bits @ (2 ** np.arange(L)[::-1])
    for c in range(2 ** L):
        m = code == c
        if not m.any():
            continue
        cells = [f"{acts[m, k].mean():.3f} / {np.median(gaps[m, k]):+.1f}" for k in range(L)]
        print(f"| {c:0{L}b} | {int(m.sum())} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--out", default="", help="also write the table as CSV here")
    p.add_argument("--patterns", action="store_true", help="also the answers and logit gaps per pattern of bits")
    p.add_argument("--probe", action="store_true", help="also a linear probe of each bit from the core's state")
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
            if a.patterns or a.probe:
                bits, acts, gaps, states = query_internals(policy, int(opts.get("span", 100)),
                                                           int(opts.get("symbols", 3)), a.episodes)
                name = os.path.basename(os.path.normpath(run))
                if a.patterns:
                    _print_patterns(name, bits, acts, gaps)
                if a.probe:
                    L = bits.shape[1]
                    print(f"\n{name}: linear probe of each bit from the core state at each query step (test accuracy)")
                    print("| state at | " + " | ".join(f"bit {j + 1}" for j in range(L)) + " |")
                    print("| " + " | ".join(["---"] * (L + 1)) + " |")
                    for k in range(L):
                        accs = [linear_probe_accuracy(states[:, k], bits[:, j]) for j in range(L)]
                        print(f"| query {k + 1} | " + " | ".join(f"{v:.3f}" for v in accs) + " |")
                print()
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
