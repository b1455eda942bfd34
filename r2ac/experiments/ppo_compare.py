"""The control comparison of Elelimy et al. 2024 in miniature: PPO with RTU trained by RTRL (stored per-step
traces) vs GRU and LSTM trained by TBPTT vs LRU trained by RTRL, with the same number of recurrent parameters, on POPGym
memory tasks and MuJoCo-P.

    python -m r2ac.experiments.ppo_compare --tasks popgym:RepeatFirstEasy popgym:RepeatPreviousEasy \\
        mujoco-p:HalfCheetah-v5 --seeds 0 1 2 --steps 100000 --params 6000 --out results/ppo_compare

Each (task, agent, seed) trains with ``train_ppo`` in a subprocess (``--jobs`` at a time; a finished run is
skipped when the command is repeated). Hidden sizes are chosen so that every core has about ``--params``
parameters (printed and written to ``hidden_sizes.json``). Writes ``results.csv`` (one row per run: mean
episode return over the last 20 % of the steps), ``results.md`` (mean +- standard error over seeds) and
``learning_curves.png`` (one panel per task, mean over seeds, shaded standard error).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
import warnings
from typing import Dict, List, Tuple

import numpy as np

from r2ac.experiments.common import read_curve, write_results_md

#: agent -> (core, learning, core options)
AGENTS: Dict[str, Tuple[str, str, dict]] = {
    "rtu-rtrl": ("rtu", "rtrl", {}),
    "lru-rtrl": ("lru", "rtrl", {}),
    "gru-tbptt": ("gru", "tbptt", {}),
    "lstm-tbptt": ("lstm", "tbptt", {}),
}


def core_parameters(core: str, input_size: int, hidden_size: int, options: dict) -> int:
    from r2ac.cores import make_core

    return sum(p.numel() for p in make_core(core, input_size, hidden_size, learning="tbptt", **options).parameters())


def equal_hidden_sizes(target: int, input_size: int, agents=AGENTS) -> Dict[str, Tuple[int, int]]:
    """agent -> (hidden size, parameter count) with the count closest to ``target`` (counts grow with the
    hidden size, so a bisection finds it)."""
    out = {}
    for name, (core, _, opts) in agents.items():
        lo, hi = 1, 1
        while core_parameters(core, input_size, hi, opts) < target:
            hi *= 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if core_parameters(core, input_size, mid, opts) < target:
                lo = mid
            else:
                hi = mid
        best = min((lo, hi), key=lambda h: abs(core_parameters(core, input_size, h, opts) - target))
        out[name] = (best, core_parameters(core, input_size, best, opts))
    return out


def task_overrides(task: str) -> List[str]:
    """Per-task settings shared by every agent (not tuned per agent; the paper tuned lr per agent)."""
    if task.startswith("popgym:"):
        return ["ppo.learning_rate=0.001", "ppo.entropy_cost=0.01"]
    return ["ppo.learning_rate=0.0003", "ppo.entropy_cost=0.0"]


def run_dir(out: str, task: str, agent: str, seed: int) -> str:
    return os.path.join(out, "runs", f"{task.replace(':', '_')}__{agent}__seed{seed}")


def overrides_for(args, task: str, agent: str, seed: int, hidden: int) -> List[str]:
    core, learning, opts = AGENTS[agent]
    ov = [f"env.id={task}", f"model.core={core}", f"model.learning={learning}", f"model.hidden_size={hidden}",
          f"seed={seed}", f"total_steps={args.steps}", f"run_dir={run_dir(args.out, task, agent, seed)}",
          f"name={task}_{agent}_seed{seed}", f"ppo.truncation_length={args.tbptt}", "logger.progress_bar=false",
          "logger.tensorboard=false", "env.options={}"]
    if opts:
        ov.append("model.core_options=" + json.dumps(opts))
    return ov + task_overrides(task) + list(args.override)


def _train_one(config: str, overrides: List[str]) -> int:
    import torch

    torch.set_num_threads(1)
    from r2ac.runtime.ppo import train_ppo
    from r2ac.config import load_config

    summary = train_ppo(load_config(config, overrides))
    print(json.dumps({k: summary[k] for k in ("run_dir", "status", "step", "recent_return", "wall_s")}))
    return 0 if summary["status"] == "finished" else 1


def final_score(path: str, total: int, frac: float = 0.2) -> float:
    x, y = read_curve(path)
    keep = x > (1 - frac) * total
    return float(y[keep].mean()) if keep.any() else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/ppo/base.yaml")
    p.add_argument("--tasks", nargs="+", default=["popgym:RepeatFirstEasy", "popgym:RepeatPreviousEasy",
                                                  "mujoco-p:HalfCheetah-v5"])
    p.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--params", type=int, default=6000, help="recurrent parameters per agent (paper: ~24k)")
    p.add_argument("--tbptt", type=int, default=32, help="truncation length of the TBPTT agents")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default="results/ppo_compare")
    p.add_argument("--override", nargs="*", default=[], help="extra key=value config overrides for every run")
    p.add_argument("--report-only", action="store_true", help="only rebuild the table and figure from the runs")
    p.add_argument("--train-one", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.train_one is not None:
        return _train_one(args.config, args.train_one)

    from r2ac.config import load_config

    cfg = load_config(args.config)
    d = cfg.ppo.encoder[-1]  # the core's input: the 64-unit encoder
    sizes = {k: v for k, v in equal_hidden_sizes(args.params, d).items() if k in args.agents}
    os.makedirs(args.out, exist_ok=True)
    print(f"recurrent parameters (target {args.params}, core input {d}):")
    for a, (h, n) in sizes.items():
        print(f"  {a:11s} hidden_size {h:4d}  parameters {n}")
    with open(os.path.join(args.out, "hidden_sizes.json"), "w") as f:
        json.dump({a: {"hidden_size": h, "parameters": n} for a, (h, n) in sizes.items()}, f, indent=2)

    if args.report_only:
        report(args, sizes)
        return 0
    jobs = [(t, a, s) for s in args.seeds for t in args.tasks for a in args.agents]
    todo = []
    for t, a, s in jobs:
        sp = os.path.join(run_dir(args.out, t, a, s), "summary.json")
        if os.path.exists(sp) and json.load(open(sp)).get("status") == "finished":
            continue
        todo.append((t, a, s))
    print(f"{len(jobs)} runs, {len(todo)} to do, {args.jobs} at a time")
    running: List[Tuple[subprocess.Popen, str]] = []
    t_start = time.time()
    while todo or running:
        while todo and len(running) < args.jobs:
            t, a, s = todo.pop(0)
            rd = run_dir(args.out, t, a, s)
            if os.path.isdir(rd):  # an unfinished run: start it again
                import shutil

                shutil.rmtree(rd)
            os.makedirs(os.path.dirname(rd), exist_ok=True)
            cmd = [sys.executable, "-m", "r2ac.experiments.ppo_compare", "--config", args.config, "--train-one",
                   *overrides_for(args, t, a, s, sizes[a][0])]
            log = open(rd + ".log", "w")
            running.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), rd))
        time.sleep(2)
        for proc, rd in list(running):
            if proc.poll() is not None:
                running.remove((proc, rd))
                print(f"[{time.time() - t_start:7.0f}s] {os.path.basename(rd)}: exit {proc.returncode}", flush=True)
    report(args, sizes)
    return 0


def report(args, sizes) -> None:
    rows = []
    for t in args.tasks:
        for a in args.agents:
            for s in args.seeds:
                rd = run_dir(args.out, t, a, s)
                mpath = os.path.join(rd, "metrics.csv")
                if not os.path.exists(mpath):
                    continue
                summ = json.load(open(os.path.join(rd, "summary.json"))) if os.path.exists(
                    os.path.join(rd, "summary.json")) else {}
                rows.append({"task": t, "agent": a, "seed": s, "hidden_size": sizes[a][0],
                             "core_parameters": sizes[a][1], "final_return": final_score(mpath, args.steps),
                             "wall_s": summ.get("wall_s", float("nan")), "status": summ.get("status", "?")})
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["task"])
        w.writeheader()
        w.writerows(rows)
    lines = ["| task | " + " | ".join(args.agents) + " |", "|---" * (len(args.agents) + 1) + "|"]
    for t in args.tasks:
        cells = []
        for a in args.agents:
            v = np.array([r["final_return"] for r in rows if r["task"] == t and r["agent"] == a])
            v = v[np.isfinite(v)]
            if len(v) == 0:
                cells.append("-")
            else:
                se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
                cells.append(f"{v.mean():.3f} ± {se:.3f} (n={len(v)})" if len(v) > 1 else f"{v.mean():.3f} (n=1)")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    write_results_md(args.out, lines,
                     preamble=f"Mean episode return over the last 20% of {args.steps} steps; mean ± s.e. over "
                              "seeds.\n\n")
    plot(args)


def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.tasks), figsize=(5 * len(args.tasks), 3.8), squeeze=False)
    grid = np.linspace(0, args.steps, 61)[1:]
    for ax, t in zip(axes[0], args.tasks):
        for a in args.agents:
            curves = []
            for s in args.seeds:
                mpath = os.path.join(run_dir(args.out, t, a, s), "metrics.csv")
                if os.path.exists(mpath):
                    x, y = read_curve(mpath)
                    if len(x) >= 1:
                        # debiased exponential moving average over the rows (weight 0.7), onto a common grid
                        ys, acc, norm = [], 0.0, 0.0
                        for v in y:
                            acc, norm = 0.7 * acc + 0.3 * v, 0.7 * norm + 0.3
                            ys.append(acc / norm)
                        curves.append(np.interp(grid, x, ys, left=np.nan))
            if not curves:
                continue
            c = np.array(curves)
            with warnings.catch_warnings():  # grid points before a run's first episode are NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                m = np.nanmean(c, 0)
            ax.plot(grid, m, label=f"{a} (n={len(curves)})")
            if len(curves) > 1:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    se = np.nanstd(c, 0, ddof=1) / np.sqrt(len(curves))
                ax.fill_between(grid, m - se, m + se, alpha=0.2)
        ax.set_title(t)
        ax.set_xlabel("agent steps")
        ax.set_ylabel("episode return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "learning_curves.png"), dpi=100)


if __name__ == "__main__":
    sys.exit(main())
