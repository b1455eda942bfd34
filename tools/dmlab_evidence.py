"""DeepMind Lab training evidence on a small CPU machine: the runs, baselines and figures of
docs/results-dmlab.md.

    python tools/dmlab_evidence.py baselines CONFIG --out DIR [--episodes N]
    python tools/dmlab_evidence.py train CONFIG --out DIR --minutes T [--episodes N] [key=value ...]
    python tools/dmlab_evidence.py pipeline CONFIG --out DIR --pretrain-minutes T1 --minutes T2 [--episodes N]
    python tools/dmlab_evidence.py report --out results/dmlab --panel TITLE BASELINE_DIR RUN_DIR [RUN_DIR ...] ...

``baselines``: returns of the uniform random policy and of the config's untrained network (its
initialisation, seed ``cfg.seed``) over N episodes each -> DIR/baselines.json.

``train``: one single-process (``runtime.kind=local``) run of CONFIG in DIR, stopped at the config's
``total_steps`` or after T minutes, whichever comes first (the summary's status says which), then N test
episodes of the trained stochastic policy (``r2ac eval``'s protocol) -> DIR/eval.json, DIR/evidence.json.

``pipeline``: Irie et al. 2024, Sec. 4 as ``r2ac pipeline`` runs it (``r2ac.runtime.pipeline.stage_configs``): stage 1
trains the whole agent with TBPTT in DIR/pretrain and exports its stem; stage 2 trains in DIR/main with that
stem loaded and frozen. Each stage stops at its step budget or its time limit; then stage 2 is evaluated.

``report``: per panel (one level) the curves of the given runs (a pipeline directory contributes both
stages, stage 2 drawn after stage 1) and the baselines -> OUT/curves.csv (every metrics row with a training
return), OUT/summary.csv and OUT/summary.md (steps, frames, wall time, training return over the first and
last 10 % of each run, test return of the final policy, baselines) and OUT/curves.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import time

import numpy as np

FRAMES_PER_STEP = 4  # DeepMind Lab's action repeat in these configs


def _machine() -> str:
    from r2ac.bench.common import machine_description

    return (f"{machine_description()}, Python {platform.python_version()}, load average "
            f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


def _config(path: str, overrides, out: str):
    from r2ac.config import load_config

    cfg = load_config(path, list(overrides) + [f"run_dir={out}", "logger.progress_bar=false"])
    if cfg.runtime.kind != "local" or cfg.algo != "impala":
        raise SystemExit(f"{path}: these runs use runtime.kind=local and algo=impala "
                         f"(got {cfg.runtime.kind}, {cfg.algo})")
    return cfg


def _mean_sem(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), (float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0)


def _write_json(path: str, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def _train_with_limit(cfg, minutes: float) -> dict:
    """Train (single process) until total_steps or ``minutes``; the summary gains the wall time and the
    1-minute load average sampled every 15 s (other jobs on the machine slow a run down)."""
    import threading

    from r2ac.runtime.local import train

    loads: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(15.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.time()
    try:
        summary = train(cfg, time_limit_s=60.0 * minutes)
    finally:
        stop.set()
        sampler.join()
    summary["wall_s"] = time.time() - t0
    if loads:
        summary["load_avg_1min"] = {"min": min(loads), "mean": float(np.mean(loads)), "max": max(loads)}
    return summary


def _evaluate(run_dir: str, episodes: int) -> dict:
    from r2ac.evaluation import evaluate_checkpoint

    ev = evaluate_checkpoint(run_dir, sets=1, episodes=episodes)  # also writes run_dir/eval.json
    mean, sem = _mean_sem(ev["episode_returns"])
    return {"mean": mean, "sem": sem, "episodes": episodes, "step": ev["step"]}


def cmd_baselines(a) -> int:
    from r2ac.experiments.short_run import random_policy_returns, untrained_policy_returns

    cfg = _config(a.config, a.overrides, a.out)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    rand = random_policy_returns(cfg.env.id, dict(cfg.env.options), a.episodes)
    untrained = untrained_policy_returns(cfg, a.episodes)
    out = {"env": cfg.env.id, "config": a.config, "episodes": a.episodes,
           "random": dict(zip(("mean", "sem"), _mean_sem(rand)), returns=[float(r) for r in rand]),
           "untrained": dict(zip(("mean", "sem"), _mean_sem(untrained)), returns=[float(r) for r in untrained]),
           "wall_s": time.time() - t0, "machine": _machine()}
    _write_json(os.path.join(a.out, "baselines.json"), out)
    print(json.dumps({k: v for k, v in out.items() if k not in ("random", "untrained")}, indent=2))
    print(f"random {out['random']['mean']:.2f} +- {out['random']['sem']:.2f}, "
          f"untrained {out['untrained']['mean']:.2f} +- {out['untrained']['sem']:.2f}")
    return 0


def cmd_train(a) -> int:
    cfg = _config(a.config, a.overrides, a.out)
    summary = _train_with_limit(cfg, a.minutes)
    ev = _evaluate(a.out, a.episodes)
    out = {"config": a.config, "overrides": a.overrides, "minutes": a.minutes, "summary": summary, "eval": ev,
           "machine": _machine()}
    _write_json(os.path.join(a.out, "evidence.json"), out)
    print(json.dumps(out, indent=2))
    return 0


def cmd_pipeline(a) -> int:
    from r2ac.runtime.pipeline import export_run_stem, stage_configs

    cfg = _config(a.config, a.overrides, a.out)
    stage1, stage2 = stage_configs(cfg)  # stage 1: model.learning=tbptt, stem.freeze=false (as r2ac pretrain)
    s1 = _train_with_limit(stage1, a.pretrain_minutes)
    s1["stem_path"] = export_run_stem(stage1.run_dir, stage1, s1)
    s2 = _train_with_limit(stage2, a.minutes)
    ev = _evaluate(stage2.run_dir, a.episodes)
    out = {"config": a.config, "overrides": a.overrides, "pretrain_minutes": a.pretrain_minutes,
           "minutes": a.minutes, "pretrain": s1, "main": s2, "eval": ev, "machine": _machine()}
    _write_json(os.path.join(a.out, "evidence.json"), out)
    _write_json(os.path.join(stage2.run_dir, "evidence.json"), {k: v for k, v in out.items() if k != "pretrain"})
    print(json.dumps(out, indent=2))
    return 0


# ---------------------------------------------------------------------------------------------- report

def _rows(metrics_csv: str) -> list[dict]:
    with open(metrics_csv) as f:
        return list(csv.DictReader(f))


def _config_of(run_dir: str) -> dict:
    import yaml

    with open(os.path.join(run_dir, "config.yaml")) as f:
        return yaml.safe_load(f)


def _stages(run_dir: str) -> list[tuple[str, str]]:
    """(stage label, run directory) of a run directory: a pipeline directory has pretrain/ and main/."""
    if os.path.isdir(os.path.join(run_dir, "pretrain")) and os.path.isdir(os.path.join(run_dir, "main")):
        return [("stage 1", os.path.join(run_dir, "pretrain")), ("stage 2", os.path.join(run_dir, "main"))]
    return [("", run_dir)]


def _load_of(run_dir: str, stage: str) -> dict | None:
    """The 1-minute load average sampled during a run (evidence.json of ``train``/``pipeline``)."""
    path = os.path.join(run_dir, "evidence.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        ev = json.load(f)
    summary = ev.get({"stage 1": "pretrain", "stage 2": "main"}.get(stage, "summary"), {})
    return summary.get("load_avg_1min")


def _label(cfg: dict, stage: str) -> str:
    learning, m = cfg["model"]["learning"].upper(), cfg["learner"]["unroll_length"]
    if stage == "stage 1":
        return f"pipeline stage 1: {learning}, M={m}, whole agent"
    if stage == "stage 2":
        return f"pipeline stage 2: {learning}, M={m}, stem frozen"
    return f"{learning}, M={m}"


def _window_means(steps: np.ndarray, rets: np.ndarray, counts: np.ndarray, fraction: float = 0.1):
    """Episode-weighted mean training return over the first and the last ``fraction`` of the steps."""
    if len(steps) == 0:
        return float("nan"), float("nan")
    last = steps[-1]
    out = []
    for sel in (steps <= fraction * last, steps >= (1 - fraction) * last):
        if not sel.any():
            sel = np.zeros_like(sel)
            sel[0 if len(out) == 0 else -1] = True
        out.append(float(np.average(rets[sel], weights=np.maximum(counts[sel], 1))))
    return out[0], out[1]


def _binned(x: np.ndarray, y: np.ndarray, w: np.ndarray, bins: int = 12):
    """Episode-weighted means of y over ``bins`` equal spans of x (empty spans dropped)."""
    if len(x) == 0:
        return x, y
    edges = np.linspace(0, x[-1], bins + 1)
    idx = np.clip(np.searchsorted(edges, x, side="left") - 1, 0, bins - 1)
    bx, by = [], []
    for b in range(bins):
        sel = idx == b
        if sel.any():
            bx.append(float(np.average(x[sel], weights=w[sel])))
            by.append(float(np.average(y[sel], weights=w[sel])))
    return np.array(bx), np.array(by)


def cmd_report(a) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(a.out, exist_ok=True)
    curve_rows, summary_rows = [], []
    fig, axes = plt.subplots(1, len(a.panel), figsize=(5.2 * len(a.panel), 3.9), squeeze=False)
    for ax, (title, baseline_dir, *runs) in zip(axes[0], a.panel):
        with open(os.path.join(baseline_dir, "baselines.json")) as f:
            base = json.load(f)
        env = base["env"]
        for run in runs:
            offset = 0.0
            for stage, d in _stages(run):
                cfg = _config_of(d)
                with open(os.path.join(d, "summary.json")) as f:
                    summ = json.load(f)
                rows = _rows(os.path.join(d, "metrics.csv"))
                t0 = float(rows[0]["wall_time"]) if rows else 0.0
                steps, rets, counts, prev = [], [], [], 0
                for r in rows:
                    if r.get("episode_return") in (None, "", "nan"):
                        continue
                    n = int(float(r["episodes"]))
                    steps.append(float(r["step"]))
                    rets.append(float(r["episode_return"]))
                    counts.append(n - prev)
                    prev = n
                    curve_rows.append({"panel": title, "env": env, "run": os.path.relpath(d), "stage": stage or "-",
                                       "learning": cfg["model"]["learning"],
                                       "unroll_length": cfg["learner"]["unroll_length"],
                                       "stem_frozen": bool(cfg.get("stem", {}).get("freeze", False)),
                                       "step": int(float(r["step"])),
                                       "frames": int(float(r["step"])) * FRAMES_PER_STEP,
                                       "wall_s": round(float(r["wall_time"]) - t0, 1),
                                       "episode_return": float(r["episode_return"]),
                                       "episodes_in_row": counts[-1]})
                steps_a, rets_a, counts_a = np.array(steps), np.array(rets), np.array(counts, dtype=float)
                first, last = _window_means(steps_a, rets_a, counts_a)
                ev_path = os.path.join(d, "eval.json")
                ev = None
                if os.path.exists(ev_path):
                    with open(ev_path) as f:
                        e = json.load(f)
                    ev = dict(zip(("mean", "sem"), _mean_sem(e["episode_returns"])), episodes=len(e["episode_returns"]))
                wall = float(rows[-1]["wall_time"]) - t0 if rows else float("nan")
                load = _load_of(run, stage)
                label = _label(cfg, stage)
                summary_rows.append({
                    "panel": title, "env": env, "run": os.path.relpath(d), "label": label, "status": summ["status"],
                    "steps": summ["step"], "frames": summ["step"] * FRAMES_PER_STEP, "updates": summ["updates"],
                    "wall_min": round(wall / 60, 2), "steps_per_s": round(summ["steps_per_s"], 1),
                    "episodes": summ["episodes"], "train_return_first10": round(first, 3),
                    "train_return_last10": round(last, 3),
                    "test_return": "" if ev is None else round(ev["mean"], 3),
                    "test_sem": "" if ev is None else round(ev["sem"], 3),
                    "test_episodes": "" if ev is None else ev["episodes"],
                    "random_return": round(base["random"]["mean"], 3), "random_sem": round(base["random"]["sem"], 3),
                    "untrained_return": round(base["untrained"]["mean"], 3),
                    "untrained_sem": round(base["untrained"]["sem"], 3), "baseline_episodes": base["episodes"],
                    "load_avg_mean": "" if load is None else round(load["mean"], 2),
                    "load_avg_max": "" if load is None else round(load["max"], 2)})
                x = (steps_a + offset) * FRAMES_PER_STEP / 1e6
                ax.plot(x, rets_a, alpha=0.25, lw=0.8)
                bx, by = _binned(x, rets_a, np.maximum(counts_a, 1))
                ax.plot(bx, by, lw=2, marker="o", ms=3, color=ax.lines[-1].get_color(), label=label)
                offset += summ["step"]
        ax.axhline(base["random"]["mean"], color="k", ls="--", lw=1, label="uniform random policy")
        ax.set_title(f"{title}\n{env}", fontsize=9)
        ax.set_xlabel("environment frames (millions, action repeat 4)")
        ax.set_ylabel("training episode return")
        ax.legend(fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "curves.png"), dpi=110)
    for name, rows in (("curves.csv", curve_rows), ("summary.csv", summary_rows)):
        with open(os.path.join(a.out, name), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    lines = ["| level | run | status | agent steps (frames) | wall min | steps/s | load avg | train return, first / "
             "last 10 % | test return (episodes) | random policy | untrained net |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary_rows:
        test = ("-" if r["test_return"] == "" else
                f"{r['test_return']:.2f} +- {r['test_sem']:.2f} ({r['test_episodes']})")
        lines.append(f"| {r['panel']} | {r['label']} | {r['status']} | {r['steps']:,} ({r['frames']:,}) | "
                     f"{r['wall_min']:.1f} | {r['steps_per_s']:.0f} | {r['load_avg_mean'] or '-'} | "
                     f"{r['train_return_first10']:.2f} / "
                     f"{r['train_return_last10']:.2f} | {test} | {r['random_return']:.2f} +- {r['random_sem']:.2f} | "
                     f"{r['untrained_return']:.2f} +- {r['untrained_sem']:.2f} |")
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("baselines", "train", "pipeline"):
        s = sub.add_parser(name)
        s.add_argument("config")
        s.add_argument("overrides", nargs="*")
        s.add_argument("--out", required=True)
        s.add_argument("--episodes", type=int, default=32)
        if name != "baselines":
            s.add_argument("--minutes", type=float, required=True, help="time limit of the (stage 2) run")
        if name == "pipeline":
            s.add_argument("--pretrain-minutes", type=float, required=True, help="time limit of stage 1")
    s = sub.add_parser("report")
    s.add_argument("--out", required=True)
    s.add_argument("--panel", nargs="+", action="append", required=True,
                   metavar="TITLE BASELINE_DIR RUN_DIR", help="a level: title, baselines dir, run dirs")
    a = p.parse_args(argv)
    if a.cmd == "report" and any(len(panel) < 3 for panel in a.panel):
        p.error("--panel needs TITLE BASELINE_DIR and at least one RUN_DIR")
    return {"baselines": cmd_baselines, "train": cmd_train, "pipeline": cmd_pipeline, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    raise SystemExit(main())
