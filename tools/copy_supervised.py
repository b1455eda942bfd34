"""The copy task of ``r2ac bench memory`` learned by supervision instead of reward: where the RL agent's
plateau comes from (docs/results.md, "The copy task's plateau was the policy's certainty").

    python tools/copy_supervised.py [--span 100] [--seeds 0,1,2] [--seconds 60] [--out CSV]

The same episodes as the RL task (``CopyVecEnv``: the bits one-hot, the blank steps, the query steps; the
episode-start flag beside them, as ``model.episode_start_input`` gives the agent), the same core
(contractive eLSTM, 64 units, chrono keep gates) and a linear read-out of its output at each query step,
trained by full BPTT over whole episodes on the cross-entropy with the bit asked for (Adam, gradient norm
clipped at 1). Each seed trains for ``--seconds`` of wall time on one thread; every 50 batches the
accuracy per query position on the batch is logged. Prints when the mean accuracy (the RL task's return,
the fraction of bits right) first reached 0.9 and 0.99, per seed, and writes the log as CSV.
"""

from __future__ import annotations

import argparse
import csv
import time

import numpy as np
import torch
import torch.nn.functional as Fn

from r2ac.cores.elstm import ELSTM
from r2ac.envs.recall import CopyVecEnv


def copy_episodes(env: CopyVecEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """One episode per env of ``env``, all started together: inputs ``[T, B, 5]`` (the observation and the
    episode-start flag) and the bits ``[B, symbols]``."""
    obs = [env.reset()]
    bits = env.bits.copy()  # the env draws new bits when it resets at the episode's end
    T = env.span + 2 * env.symbols
    for _ in range(T - 1):
        obs.append(env.step(np.zeros(env.num_envs, dtype=np.int64))[0])
    x = np.stack(obs).astype(np.float32)
    flag = np.zeros(x.shape[:2] + (1,), dtype=np.float32)
    flag[0] = 1.0
    return torch.from_numpy(np.concatenate([x, flag], -1)), torch.from_numpy(bits)


def train(span: int, seed: int, seconds: float, *, symbols: int = 3, batch: int = 128, hidden: int = 64,
          lr: float = 3e-3, log_every: int = 50) -> list[dict]:
    """Train one seed; the log rows (seconds, batches, episodes, accuracy per bit and their mean)."""
    torch.manual_seed(seed)
    env = CopyVecEnv(batch, seed, span=span, symbols=symbols)
    core = ELSTM(5, hidden, learning="tbptt", contractive=True)
    head = torch.nn.Linear(hidden, 2)
    params = list(core.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=lr)
    T = span + 2 * symbols
    rows, n, start = [], 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        x, bits = copy_episodes(env)
        y, _ = core(x, core.initial_state(batch, sensitivities=False), torch.zeros(T, batch, dtype=torch.bool),
                    return_state=False)
        logits = head(y[T - symbols:])  # [symbols, B, 2]: the query steps
        loss = Fn.cross_entropy(logits.reshape(-1, 2), bits.T.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        core.project_()
        n += 1
        if n % log_every == 0:
            acc = (logits.argmax(-1) == bits.T).float().mean(1).tolist()
            rows.append({"seed": seed, "seconds": round(time.perf_counter() - start, 2), "batches": n,
                         "episodes": n * batch, "loss": round(loss.item(), 5),
                         **{f"bit_{k + 1}": round(a, 4) for k, a in enumerate(acc)},
                         "fraction_right": round(float(np.mean(acc)), 4)})
    return rows


def first_reaching(rows: list[dict], level: float) -> dict | None:
    return next((r for r in rows if r["fraction_right"] >= level), None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--span", type=int, default=100)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--out", default="", help="also write the log rows of every seed as CSV here")
    a = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        logs = [train(a.span, int(s), a.seconds, batch=a.batch, lr=a.lr) for s in a.seeds.split(",")]
    finally:
        torch.set_num_threads(threads)
    print("| seed | seconds to 0.9 | episodes to 0.9 | seconds to 0.99 | episodes to 0.99 | final fraction right |")
    print("| --- | --- | --- | --- | --- | --- |")
    for rows in logs:
        cells = []
        for level in (0.9, 0.99):
            r = first_reaching(rows, level)
            cells += [f"{r['seconds']:.0f}", f"{r['episodes']}"] if r else ["-", "-"]
        final = f"{rows[-1]['fraction_right']:.3f}" if rows else "-"
        seed = rows[0]["seed"] if rows else "-"
        print(f"| {seed} | " + " | ".join(cells) + f" | {final} |")
    if a.out:
        with open(a.out, "w", newline="") as f:
            flat = [r for rows in logs for r in rows]
            if flat:
                w = csv.DictWriter(f, fieldnames=list(flat[0]))
                w.writeheader()
                w.writerows(flat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
