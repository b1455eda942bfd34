"""What a return on POPGym's MultiarmedBandit is worth: classical bandit strategies played on the task's own
episodes, beside trained runs (docs/results.md, "The bandit's plateau").

    python tools/bandit_reference.py [RUN_DIR ...] [--level easy|medium|hard] [--episodes N] [--seed S] [--out CSV]

POPGym's bandit draws each arm's chance of paying uniformly in [0, 1] at the start of an episode; a pull pays
+1/length if the arm pays, -1/length if not, so an episode's return is 2 x (share of paid pulls) - 1, and an
agent sees only whether its last pull paid. Each strategy below plays ``--episodes`` such episodes (numpy,
all episodes side by side):

- ``best arm``: always the arm with the highest chance (it knows the chances: an upper bound nothing that
  must learn them reaches; its mean is 2 K / (K + 1) - 1 for K arms);
- ``uniform``: a random arm at every pull (0 on average);
- ``each once, then greedy`` / ``each twice, then greedy``: pull every arm once (twice), then the arm with the
  highest share paid so far, ties to the lower index;
- ``Thompson``: the arm whose draw from its Beta(1 + paid, 1 + unpaid) posterior is highest;
- ``greedy on the posterior mean``: the arm with the highest (1 + paid) / (2 + pulls);
- ``UCB1``: each arm once, then the highest share paid + sqrt(2 ln t / pulls).

Each RUN_DIR (a run of ``r2ac bench memory`` or ``r2ac train`` on the bandit) adds its final weights' mean
return on fresh envs (``r2ac.bench.memory.fresh_return``: each env's first episodes, sampled actions).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, List

import numpy as np

LEVELS = {"easy": (10, 200), "medium": (20, 400), "hard": (30, 600)}  # POPGym's (num_bandits, episode_length)
FIELDS = ("strategy", "arms", "pulls", "episodes", "mean_return", "stderr", "share_paid")

# a strategy: (pull index t, paid counts, pull counts, rng) -> the arm of every episode, shape (E,)
Strategy = Callable[[int, np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


def _greedy_after(rounds: int) -> Strategy:
    def choose(t, paid, pulls, rng):
        arms = paid.shape[1]
        if t < rounds * arms:
            return np.full(paid.shape[0], t % arms)
        return np.argmax(paid / np.maximum(pulls, 1), axis=1)
    return choose


def _thompson(t, paid, pulls, rng):
    return np.argmax(rng.beta(1.0 + paid, 1.0 + pulls - paid), axis=1)


def _posterior_mean(t, paid, pulls, rng):
    return np.argmax((1.0 + paid) / (2.0 + pulls), axis=1)


def _ucb1(t, paid, pulls, rng):
    arms = paid.shape[1]
    if t < arms:
        return np.full(paid.shape[0], t)
    return np.argmax(paid / pulls + np.sqrt(2.0 * np.log(t) / pulls), axis=1)


def _uniform(t, paid, pulls, rng):
    return rng.integers(0, paid.shape[1], size=paid.shape[0])


STRATEGIES: Dict[str, Strategy] = {
    "uniform": _uniform,
    "each once, then greedy": _greedy_after(1),
    "each twice, then greedy": _greedy_after(2),
    "Thompson": _thompson,
    "greedy on the posterior mean": _posterior_mean,
    "UCB1": _ucb1,
}


def play(strategy: Strategy, arms: int, pulls: int, episodes: int, seed: int) -> np.ndarray:
    """The return of each of ``episodes`` bandit episodes played by ``strategy`` (shape ``(episodes,)``)."""
    rng = np.random.default_rng(seed)
    chance = rng.random((episodes, arms))
    paid = np.zeros((episodes, arms))
    pulled = np.zeros((episodes, arms))
    rows = np.arange(episodes)
    total = np.zeros(episodes)
    for t in range(pulls):
        a = strategy(t, paid, pulled, rng)
        pays = rng.random(episodes) < chance[rows, a]
        paid[rows, a] += pays
        pulled[rows, a] += 1
        total += np.where(pays, 1.0, -1.0)
    return total / pulls


def best_arm(arms: int, pulls: int, episodes: int, seed: int) -> np.ndarray:
    """The returns of always pulling the arm with the highest chance (known to it)."""
    rng = np.random.default_rng(seed)
    chance = rng.random((episodes, arms)).max(axis=1)
    share = rng.binomial(pulls, chance) / pulls
    return 2.0 * share - 1.0


def _row(name: str, arms: int, pulls: int, returns: np.ndarray) -> Dict:
    n = len(returns)
    return {"strategy": name, "arms": arms, "pulls": pulls, "episodes": n, "mean_return": float(returns.mean()),
            "stderr": float(returns.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"),
            "share_paid": float((returns.mean() + 1.0) / 2.0)}


def reference_rows(arms: int, pulls: int, episodes: int, seed: int) -> List[Dict]:
    """One row per strategy (the best arm first), each played on its own ``episodes`` episodes."""
    rows = [_row("best arm (knows the chances)", arms, pulls, best_arm(arms, pulls, episodes, seed))]
    for i, (name, strategy) in enumerate(STRATEGIES.items()):
        rows.append(_row(name, arms, pulls, play(strategy, arms, pulls, episodes, seed + 1 + i)))
    return rows


def run_rows(run_dirs: List[str], arms: int, pulls: int) -> List[Dict]:
    """A row per trained run: its final weights' mean return on fresh envs (``fresh.json``)."""
    from r2ac.bench.common import run_labels
    from r2ac.bench.memory import fresh_return  # torch only where runs are given
    rows = []
    for d, label in zip(run_dirs, run_labels(run_dirs)):
        if not os.path.isdir(d):
            raise SystemExit(f"bandit_reference: {d}: no such run directory (give the directory of a run, "
                             f"e.g. RESULTS/runs/popgym-MultiarmedBanditEasy-200-rtrl-s0)")
        mean = fresh_return(d)
        rows.append({"strategy": f"trained: {label}", "arms": arms,
                     "pulls": pulls, "episodes": float("nan"), "mean_return": mean, "stderr": float("nan"),
                     "share_paid": (mean + 1.0) / 2.0})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="*", help="run directories of trained agents on the bandit")
    p.add_argument("--level", choices=sorted(LEVELS), default="easy", help="POPGym's level (arms, pulls)")
    p.add_argument("--episodes", type=int, default=4000, help="episodes per strategy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="", help="write the rows as CSV here")
    a = p.parse_args(argv)
    if a.episodes < 2:
        p.error(f"--episodes must be at least 2 (a standard error needs two), got {a.episodes}")
    arms, pulls = LEVELS[a.level]
    rows = reference_rows(arms, pulls, a.episodes, a.seed) + run_rows(a.runs, arms, pulls)
    print(f"MultiarmedBandit {a.level}: {arms} arms, {pulls} pulls; return = 2 x share paid - 1")
    print("| strategy | mean return | standard error | share of pulls paid |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        se = "-" if np.isnan(r["stderr"]) else f"{r['stderr']:.3f}"
        print(f"| {r['strategy']} | {r['mean_return']:.3f} | {se} | {r['share_paid']:.3f} |")
    if a.out:
        from r2ac.bench.common import write_csv
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        write_csv(a.out, rows, FIELDS)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raise SystemExit(main())
