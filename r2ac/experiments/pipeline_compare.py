"""Irie et al. 2024, Sec. 4, in miniature: one vision stem pretrained with TBPTT, then the same frozen stem under
RTRL and under TBPTT (same M), on the built-in watermaze.

    python -m r2ac.experiments.pipeline_compare configs/memory/watermaze_pipeline.yaml --seeds 0 1 \
        --out results/watermaze_pipeline

Stage 1 runs once (``r2ac pretrain`` settings of the config's ``pipeline`` section); stage 2 runs for each
learning mode and seed with ``stem.path`` = the exported stem and ``stem.freeze=true``. Each final
checkpoint is evaluated (sets x episodes of the config's ``eval``); writes results.csv, results.md and
learning_curves.png.
"""

from __future__ import annotations

import argparse
import csv
import os

import numpy as np

from r2ac.config import apply_overrides, load_config
from r2ac.experiments.common import read_curve, write_results_md
from r2ac.evaluation import evaluate_checkpoint
from r2ac.runtime.pipeline import STEM_FILE, pretrain, run_training, stage_configs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    cfg = load_config(a.config, list(a.overrides) + [f"run_dir={a.out}", "logger.progress_bar=false"])
    stage1, stage2 = stage_configs(cfg)
    if not os.path.exists(os.path.join(stage1.run_dir, STEM_FILE)):
        pretrain(stage1)
    rows, curves = [], {}
    for learning in ("rtrl", "tbptt"):
        for seed in a.seeds:
            run = os.path.join(a.out, f"{learning}_seed{seed}")
            c = apply_overrides(stage2, [f"run_dir={run}", f"seed={seed}", f"model.learning={learning}",
                                         f"name=pipeline_{learning}_seed{seed}"])
            if not os.path.exists(os.path.join(run, "summary.json")):
                run_training(c)
            ev = evaluate_checkpoint(run)
            rows.append({"learning": learning, "seed": seed, "return": ev["mean"], "std_over_sets": ev["std"],
                         "steps": ev["step"]})
            curves[(learning, seed)] = list(zip(*read_curve(os.path.join(run, "metrics.csv"))))
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"{cfg.env.id} {dict(cfg.env.options)}: stem pretrained with TBPTT (M = {stage1.learner.unroll_length}, "
             f"{stage1.total_steps} steps), then frozen; stage 2: {stage2.total_steps} steps, "
             f"M = {stage2.learner.unroll_length}; eval {cfg.eval.sets} x {cfg.eval.episodes} episodes", "",
             "| stage 2 learning | return per seed | mean |", "| --- | --- | --- |"]
    for learning in ("rtrl", "tbptt"):
        v = [r["return"] for r in rows if r["learning"] == learning]
        lines.append(f"| {learning} | {', '.join(f'{x:.2f}' for x in v)} | {np.mean(v):.2f} |")
    write_results_md(a.out, lines)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (learning, seed), pts in curves.items():
        if pts:
            ax.plot(*zip(*pts), color="C0" if learning == "rtrl" else "C1", alpha=0.8,
                    label=learning if seed == a.seeds[0] else None)
    ax.set_xlabel("agent steps (stage 2)"), ax.set_ylabel("episode return (goals found)")
    ax.set_title(f"{cfg.env.id}, frozen TBPTT-pretrained stem"), ax.legend(), ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "learning_curves.png"), dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
