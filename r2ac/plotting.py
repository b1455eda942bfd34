"""``r2ac plot RUN...``: learning curves over seeds with confidence bands, and aggregate final scores.

Runs are grouped into one curve when they differ only in the seed: by their config (the resolved config of
``config.yaml`` without ``seed``, ``name``, ``run_dir`` and the logging, checkpoint and evaluation settings),
or, for the runs of a sweep directory (``r2ac sweep``), by their grid point. A group's curve is the
interquartile mean (IQM) over its runs of each run's (EMA-smoothed) metric, interpolated onto common x
values where every run of the group has data, with a 95 % stratified bootstrap confidence band; a one-run
group is its run's curve, a run of one or two rows shows its points as markers.

The final score of a run is the mean of the raw metric over the last ``final_fraction`` of its x range
(``final="train"``) or its last evaluation in ``eval.csv`` (``final="eval"``). Per group, rliable
(Agarwal et al., 2021) gives the IQM and the mean of the final scores with 95 % stratified bootstrap
confidence intervals: a PNG (curves | final IQM with CIs) and a CSV of the aggregates.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from r2ac.fileio import atomic_write, atomic_write_text
from r2ac.logger import _AXIS_WORDS, _ema, read_metrics

GROUP_EXCLUDE = ("seed", "name", "run_dir", "logger", "checkpoint", "eval")
AGG_COLUMNS = ("group", "runs", "final", "final_x", "iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high",
               "scores", "run_dirs")
_X_WORDS = {**_AXIS_WORDS, "wall_time": "wall time since the first logged row (s)"}


@dataclass
class Run:
    run_dir: str
    x: np.ndarray
    y: np.ndarray
    raw_y: np.ndarray
    cfg: Any = None  # r2ac.config.Config, or None where config.yaml is missing or no longer loads
    sweep: Optional[str] = None  # the sweep directory it came from
    label: Optional[str] = None  # its grid point there
    group: str = ""
    final: float = float("nan")
    final_x: float = float("nan")


@dataclass
class Group:
    key: str
    label: str
    runs: List[Run] = field(default_factory=list)


# ------------------------------------------------------------------ finding and reading runs


def _sweep_runs(sweep_dir: str) -> List[Tuple[str, Optional[str], Optional[str]]]:
    with open(os.path.join(sweep_dir, "sweep.json"), encoding="utf-8") as fh:
        desc = json.load(fh)
    out = []
    for r in desc.get("runs", []):
        d = os.path.join(sweep_dir, r["run_dir"])
        if os.path.exists(os.path.join(d, "metrics.csv")):  # a run that failed at its start has none
            out.append((d, sweep_dir, r.get("label") or "all seeds"))
    return out


def find_runs(paths: Sequence[str]) -> List[Tuple[str, Optional[str], Optional[str]]]:
    """``(run_dir, sweep_dir or None, grid label or None)`` for every run a path names: a run directory (or
    its metrics.csv), a sweep directory (its runs), or any directory holding either below it."""
    found: List[Tuple[str, Optional[str], Optional[str]]] = []
    for p in paths:
        p = os.path.normpath(p)
        if os.path.isfile(p) and os.path.basename(p) == "metrics.csv":
            p = os.path.dirname(p) or "."
        if not os.path.exists(p):
            raise FileNotFoundError(f"{p}: no such run or sweep directory")
        if os.path.exists(os.path.join(p, "sweep.json")):
            found += _sweep_runs(p)
        elif os.path.exists(os.path.join(p, "metrics.csv")):
            found.append((p, None, None))
        elif os.path.isdir(p):
            before = len(found)
            for root, dirs, files in os.walk(p):
                dirs.sort()
                if "sweep.json" in files:
                    found += _sweep_runs(root)
                    dirs[:] = []
                elif "metrics.csv" in files:
                    found.append((root, None, None))
                    dirs[:] = []
            if len(found) == before:
                raise FileNotFoundError(f"{p}: no runs (directories with a metrics.csv) in it")
        else:
            raise FileNotFoundError(f"{p}: not a run directory (no metrics.csv)")
    seen, out = set(), []
    for item in found:
        key = os.path.realpath(item[0])
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _config_of(run_dir: str):
    from r2ac.config import load_config

    path = os.path.join(run_dir, "config.yaml")
    if not os.path.exists(path):
        return None
    try:
        return load_config(path)
    except Exception:  # a config of an older r2ac: the run is still plotted, alone in its group
        return None


def read_run(run_dir: str, x: str, y: str, smooth: float) -> Run:
    """The finite ``(x, y)`` of a run's metrics.csv (x in env frames, agent steps or wall seconds)."""
    path = os.path.join(run_dir, "metrics.csv")
    header, rows = read_metrics(path)
    if y not in header:
        raise ValueError(f"{path} has no column {y!r}; columns: {', '.join(header[2:])}")
    cfg = _config_of(run_dir)
    scale = 1.0
    if x == "env_frames":
        if cfg is not None:
            from r2ac.runtime import frames_per_step

            scale = float(frames_per_step(cfg))
    xs, ys = [], []
    t0 = None
    for r in rows:
        try:
            xv = float(r["wall_time" if x == "wall_time" else "step"])
            yv = float(r[y]) if r.get(y, "") != "" else float("nan")
        except ValueError:
            continue
        if x == "wall_time":
            t0 = xv if t0 is None else t0
            xv -= t0
        if math.isfinite(xv) and math.isfinite(yv):
            xs.append(xv * scale)
            ys.append(yv)
    if not xs:
        raise ValueError(f"{path}: no finite values of {y!r}")
    raw = np.asarray(ys, dtype=np.float64)
    smoothed = np.asarray(_ema(ys, smooth), dtype=np.float64) if smooth > 0 else raw
    return Run(run_dir, np.asarray(xs, dtype=np.float64), smoothed, raw, cfg)


def _eval_final(run_dir: str) -> Tuple[float, float]:
    path = os.path.join(run_dir, "eval.csv")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{run_dir} has no eval.csv (--final eval needs an evaluation: `r2ac eval "
                                f"{run_dir}` or eval.at_end=true)")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("mean", "") != ""]
    if not rows:
        raise ValueError(f"{path} holds no evaluation")
    last = max(rows, key=lambda r: (int(float(r["step"])), rows.index(r)))
    return float(last["mean"]), float(last.get("env_frames") or last["step"])


# ------------------------------------------------------------------ grouping


def _flat(d: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(_flat(v, key))
        else:
            out[key] = v
    return out


def _grouping_dict(cfg) -> Dict[str, Any]:
    from r2ac.config import config_to_dict

    d = config_to_dict(cfg)
    for k in GROUP_EXCLUDE:
        d.pop(k, None)
    return _flat(d)


def group_runs(runs: List[Run]) -> List[Group]:
    """Runs that differ only in their seed (or share a sweep's grid point) form one group, labelled by what
    tells the groups apart."""
    from r2ac.config import config_hash

    groups: Dict[str, Group] = {}
    sweeps = {r.sweep for r in runs if r.sweep}
    for r in runs:
        if r.sweep:
            key = f"sweep:{os.path.realpath(r.sweep)}:{r.label}"
            label = (f"{os.path.basename(r.sweep)}: " if len(sweeps) > 1 else "") + str(r.label)
        elif r.cfg is not None:
            key, label = "config:" + config_hash(r.cfg, exclude=GROUP_EXCLUDE), ""
        else:
            key, label = "dir:" + os.path.realpath(r.run_dir), os.path.basename(os.path.normpath(r.run_dir))
        g = groups.setdefault(key, Group(key, label))
        g.runs.append(r)
        r.group = key
    unlabelled = [g for g in groups.values() if not g.label]
    if len(unlabelled) == 1 and len(groups) == 1:
        g = unlabelled[0]
        g.label = _base_name(g.runs[0].cfg.name)
    elif unlabelled:  # the config keys whose values differ between the groups
        flats = {g.key: _grouping_dict(g.runs[0].cfg) for g in unlabelled}
        keys = sorted({k for f in flats.values() for k in f})
        differ = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str)
                                          for f in flats.values()}) > 1]
        for g in unlabelled:
            f = flats[g.key]
            parts = [f"{k}={_short(f.get(k))}" for k in differ[:4]]
            g.label = ", ".join(parts) + (" ..." if len(differ) > 4 else "") or _base_name(g.runs[0].cfg.name)
    return list(groups.values())


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= 24 else text[:21] + "..."


def _base_name(name: str) -> str:
    """A run's name without a trailing ``/seed<k>`` or ``_seed<k>``."""
    import re

    return re.sub(r"[/_-]seed\d+$", "", name) or name


# ------------------------------------------------------------------ statistics (rliable)


def _rliable():
    try:
        from rliable import library as rly, metrics
    except ImportError as e:
        raise ImportError(f"r2ac plot needs rliable for its statistics ({e}); pip install rliable") from None
    return rly, metrics


def _interval_estimates(scores: np.ndarray, func, reps: int, seed: int):
    """rliable's stratified bootstrap (percentile 95 % CIs) of ``func`` over the runs of ``scores``
    (runs, tasks, ...), reproducible given ``seed``."""
    import warnings

    rly, _ = _rliable()
    # rliable's StratifiedBootstrap draws its resamples from numpy's global generator (np.random.choice), not
    # from the random_state it hands to arch: seed that one for these draws and put it back afterwards
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch's note that rliable's RandomState argument is deprecated
            warnings.filterwarnings("ignore", message="random_state is deprecated")
            point, ci = rly.get_interval_estimates({"g": scores}, func, reps=reps,
                                                   random_state=np.random.RandomState(seed))
    finally:
        np.random.set_state(saved)
    return point["g"], ci["g"]


def _trimmed(scores: np.ndarray) -> np.ndarray:
    """IQM over runs (axis 0) of a (runs, tasks, points) array: the 25 % trimmed mean per point."""
    from scipy.stats import trim_mean

    return trim_mean(scores[:, 0, :], proportiontocut=0.25, axis=0)


def curve_band(matrix: np.ndarray, reps: int, seed: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM over runs (rows of ``matrix``) at each point, with the 95 % stratified bootstrap CI (rliable)."""
    point, ci = _interval_estimates(matrix[:, None, :], _trimmed, reps, seed)
    return point, ci[0], ci[1]


def final_aggregates(scores: Sequence[float], reps: int, seed: int) -> Dict[str, float]:
    """IQM and mean of final scores (one per run) with 95 % stratified bootstrap CIs (rliable)."""
    _, metrics = _rliable()
    arr = np.asarray(scores, dtype=np.float64)[:, None]  # (runs, one task)

    def both(s: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(s), metrics.aggregate_mean(s)])

    (iqm, mean), (lo, hi) = _interval_estimates(arr, both, reps, seed)
    return {"iqm": float(iqm), "iqm_low": float(lo[0]), "iqm_high": float(hi[0]), "mean": float(mean),
            "mean_low": float(lo[1]), "mean_high": float(hi[1])}


# ------------------------------------------------------------------ the command


def _default_out(found: List[Tuple[str, Optional[str], Optional[str]]], paths: Sequence[str]) -> str:
    sweeps = {s for _, s, _ in found}
    if len(sweeps) == 1 and None not in sweeps:
        return os.path.join(next(iter(sweeps)), "plot.png")
    if len(found) == 1:
        return os.path.join(found[0][0], "plot.png")
    dirs = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") for p in paths]
    return os.path.join(os.path.commonpath(dirs), "plot.png")


def _title(groups: List[Group], y: str) -> str:
    cfgs = [r.cfg for g in groups for r in g.runs if r.cfg is not None]
    if not cfgs:
        return _AXIS_WORDS.get(y, y)
    c = cfgs[0]
    envs = sorted({x.env.id for x in cfgs})
    if len(groups) == 1:
        return (f"{groups[0].label}: {c.env.id}, {c.model.core}/{c.model.learning}, "
                f"M={c.learner.unroll_length if c.algo != 'ppo' else c.ppo.rollout_length}")
    return f"{', '.join(envs)}: {len(groups)} configurations"


def plot_runs(paths: Sequence[str], *, out: Optional[str] = None, x: str = "env_frames",
              y: str = "episode_return", smooth: float = 0.6, final: str = "train", final_fraction: float = 0.1,
              reps: int = 2000, seed: int = 0) -> Dict[str, Any]:
    """Plot runs (see the module doc); returns the PNG and CSV paths, the groups' aggregates and a text table."""
    if not 0.0 <= smooth < 1.0:
        raise ValueError(f"--smooth must be in [0, 1) (an EMA weight), got {smooth}")
    if not 0.0 < final_fraction <= 1.0:
        raise ValueError(f"--final-fraction must be in (0, 1], got {final_fraction}")
    if reps < 1:
        raise ValueError(f"--reps must be >= 1, got {reps}")
    if x not in ("env_frames", "step", "wall_time"):
        raise ValueError(f"x must be env_frames, step or wall_time, not {x!r}")
    _rliable()  # fail early and in one line without it
    found = find_runs(paths)
    runs = []
    for run_dir, sweep, label in found:
        r = read_run(run_dir, x, y, smooth)
        r.sweep, r.label = sweep, label
        runs.append(r)
    if x == "env_frames" and any(r.cfg is None for r in runs):
        x_word = "agent steps (env frames where the config says)"
    else:
        x_word = _X_WORDS.get(x, x)
    for r in runs:
        if final == "eval":
            r.final, r.final_x = _eval_final(r.run_dir)
        else:
            lo = r.x[-1] - final_fraction * (r.x[-1] - r.x[0])
            tail = r.x >= lo
            r.final, r.final_x = float(np.mean(r.raw_y[tail])), float(r.x[-1])
    groups = group_runs(runs)

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    colors = [f"C{i % 10}" for i in range(len(groups))]
    aggregates = []
    for gi, (g, color) in enumerate(zip(groups, colors)):
        n = len(g.runs)
        label = f"{g.label} ({n} run{'s' * (n != 1)})"
        if n == 1 or min(len(r.x) for r in g.runs) < 2:
            for k, r in enumerate(g.runs):  # a run alone (or runs of a single row): its own points
                ax.plot(r.x, r.y, color=color, linewidth=1.5, marker="o" if len(r.x) < 3 else None,
                        label=label if k == 0 else None, alpha=1.0 if n == 1 else 0.6)
        else:
            lo_x, hi_x = max(r.x[0] for r in g.runs), min(r.x[-1] for r in g.runs)
            if hi_x > lo_x:
                grid = np.linspace(lo_x, hi_x, 100)
                matrix = np.stack([np.interp(grid, r.x, r.y) for r in g.runs])
                mid, band_lo, band_hi = curve_band(matrix, reps, seed)
                ax.plot(grid, mid, color=color, linewidth=1.8, label=label)
                ax.fill_between(grid, band_lo, band_hi, color=color, alpha=0.2, linewidth=0)
            else:  # runs that share no x range: each on its own
                for k, r in enumerate(g.runs):
                    ax.plot(r.x, r.y, color=color, linewidth=1.2, label=label if k == 0 else None)
        agg = final_aggregates([r.final for r in g.runs], reps, seed)
        aggregates.append({"group": g.label, "runs": n, "final": final,
                           "final_x": float(np.mean([r.final_x for r in g.runs])), **agg,
                           "scores": [round(r.final, 6) for r in g.runs], "run_dirs": [r.run_dir for r in g.runs]})
        bx.errorbar([agg["iqm"]], [gi], xerr=[[agg["iqm"] - agg["iqm_low"]], [agg["iqm_high"] - agg["iqm"]]],
                    fmt="o", color=color, capsize=4, markersize=7)
        bx.scatter([r.final for r in g.runs], [gi + 0.2] * n, color=color, s=30, alpha=0.7, marker="x",
                   label="one run's final score" if gi == 0 else None)
    y_word = _AXIS_WORDS.get(y, y)
    ax.set_xlabel(x_word)
    ax.set_ylabel(y_word + (f" (EMA {smooth:g})" if smooth > 0 else ""))
    ax.set_title(_title(groups, y), fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    where = (f"last {final_fraction:.0%} of training" if final == "train" else "last evaluation")
    bx.set_yticks(range(len(groups)), [g.label for g in groups], fontsize="small")
    bx.set_ylim(-0.6, len(groups) - 0.4)
    bx.invert_yaxis()
    bx.set_xlabel(f"final {y_word if final == 'train' else 'evaluation return'} ({where})")
    bx.set_title("IQM over runs, 95% stratified bootstrap CI (rliable)", fontsize="medium")
    bx.legend(loc="best", fontsize="small")
    bx.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()

    png = os.fspath(out) if out else _default_out(found, paths)
    if not png.lower().endswith(".png"):
        png += ".png"
    atomic_write(png, lambda fh: fig.savefig(fh, format="png"))
    csv_path = png[:-4] + "_aggregates.csv"
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(AGG_COLUMNS)
    for a in aggregates:
        w.writerow([json.dumps(a[c]) if c in ("scores", "run_dirs") else
                    (f"{a[c]:.6g}" if isinstance(a[c], float) else a[c]) for c in AGG_COLUMNS])
    atomic_write_text(csv_path, buf.getvalue())
    return {"png": png, "csv": csv_path, "aggregates": aggregates, "table": format_aggregates(aggregates, y_word),
            "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel()}


def format_aggregates(aggregates: List[Dict[str, Any]], y_word: str) -> str:
    w = max([len("group")] + [len(a["group"]) for a in aggregates])
    lines = [f"final {y_word}: IQM and mean over runs with 95% stratified bootstrap CIs (rliable)",
             f"{'group':<{w}}  runs  {'IQM [95% CI]':<28}  mean [95% CI]"]
    for a in aggregates:
        iqm = f"{a['iqm']:.3f} [{a['iqm_low']:.3f}, {a['iqm_high']:.3f}]"
        mean = f"{a['mean']:.3f} [{a['mean_low']:.3f}, {a['mean_high']:.3f}]"
        lines.append(f"{a['group']:<{w}}  {a['runs']:<4}  {iqm:<28}  {mean}")
    return "\n".join(lines)
