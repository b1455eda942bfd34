"""The headline effect of R2AC in miniature: on the delayed-cue T-maze, the cue lies further back than the
segment length M. Exact RTRL (eLSTM) carries credit across segment boundaries; TBPTT with the same M
cannot; a feed-forward agent has no memory at all.

    python -m r2ac.experiments.tmaze --corridor 40 --M 10 --seeds 0 1 2 --steps 3000000 --out results/tmaze

Trains every (method, seed) with ``r2ac train`` in subprocesses (``--jobs`` at a time), evaluates each
final checkpoint with ``r2ac eval`` (success rate = mean return, since a correct turn pays 1 and a wrong
one 0), and writes ``results.csv``, ``results.md`` (table) and ``learning_curves.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np

from r2ac.experiments.common import read_curve, write_results_md

METHODS = {
    "rtrl": ["model.core=elstm", "model.learning=rtrl"],
    "tbptt": ["model.core=elstm", "model.learning=tbptt"],
    "feedforward": ["model.core=none", "model.learning=tbptt"],
}


def run_dir(out, method, seed):
    return os.path.join(out, "runs", f"{method}_seed{seed}")


def train_cmd(args, method, seed):
    return [sys.executable, "-m", "r2ac.cli", "train", args.config, f"run_dir={run_dir(args.out, method, seed)}",
            f"name=tmaze_{method}_seed{seed}", f"seed={seed}", f"total_steps={args.steps}",
            f"learner.unroll_length={args.M}", f"env.options={{corridor_length: {args.corridor}}}",
            "logger.progress_bar=false", "logger.tensorboard=false", *METHODS[method], *args.override]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/memory/tmaze.yaml")
    p.add_argument("--corridor", type=int, default=40)
    p.add_argument("--M", type=int, default=10)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--steps", type=int, default=3_000_000)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--eval-sets", type=int, default=3)
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--out", default="results/tmaze")
    p.add_argument("--override", nargs="*", default=[], help="extra key=value overrides for every run")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    # runs that finished before (summary.json written) are not trained again: rerunning re-evaluates them
    jobs = [(m, s) for m in args.methods for s in args.seeds
            if not os.path.exists(os.path.join(run_dir(args.out, m, s), "summary.json"))]
    running, t0 = [], time.time()
    while jobs or running:
        while jobs and len(running) < args.jobs:
            m, s = jobs.pop(0)
            log = open(os.path.join(args.out, f"{m}_seed{s}.log"), "w")
            running.append((m, s, subprocess.Popen(train_cmd(args, m, s), stdout=log, stderr=subprocess.STDOUT)))
            print(f"[{time.time() - t0:6.0f}s] started {m} seed {s}", flush=True)
        for item in list(running):
            if item[2].poll() is not None:
                running.remove(item)
                print(f"[{time.time() - t0:6.0f}s] finished {item[0]} seed {item[1]} (exit {item[2].returncode})",
                      flush=True)
                if item[2].returncode != 0:
                    raise SystemExit(f"training {item[0]} seed {item[1]} failed; see {args.out}")
        time.sleep(1)
    rows = []
    for m in args.methods:
        for s in args.seeds:
            d = run_dir(args.out, m, s)
            subprocess.run([sys.executable, "-m", "r2ac.cli", "eval", d, "--sets", str(args.eval_sets),
                            "--episodes", str(args.eval_episodes)], check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(d, "eval.json")) as f:
                ev = json.load(f)
            rows.append({"method": m, "seed": s, "success": ev["mean"], "success_std_over_sets": ev["std"],
                         "steps": ev["step"]})
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"T-maze, corridor {args.corridor} (cue {args.corridor} steps before the decision), M = {args.M}, "
             f"{args.steps} steps, eval {args.eval_sets} x {args.eval_episodes} episodes per seed", "",
             "| method | success per seed | mean | std over seeds |", "| --- | --- | --- | --- |"]
    for m in args.methods:
        v = [r["success"] for r in rows if r["method"] == m]
        lines.append(f"| {m} | {', '.join(f'{x:.3f}' for x in v)} | {np.mean(v):.3f} | {np.std(v):.3f} |")
    write_results_md(args.out, lines)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, m in enumerate(args.methods):
        for j, s in enumerate(args.seeds):
            x, y = read_curve(os.path.join(run_dir(args.out, m, s), "metrics.csv"))
            ax.plot(x, y, color=f"C{i}", alpha=0.8, label=m if j == 0 else None)
    ax.axhline(0.5, color="grey", ls=":", label="chance")
    ax.set_xlabel("agent steps"), ax.set_ylabel("success rate (episode return)")
    ax.set_title(f"T-maze, cue {args.corridor} steps back, M = {args.M}"), ax.legend(), ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "learning_curves.png"), dpi=110)
    print(f"wrote {args.out}/results.csv, results.md, learning_curves.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
