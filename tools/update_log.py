"""What did single updates do? Reads the per-update log of runs trained with ``logger.update_log=true``
(``<run_dir>/updates.csv``, docs/runtime.md, "The per-update log"; docs/results.md, "Key to door's falls").

    python tools/update_log.py RUN_DIR [RUN_DIR ...] [--factor F] [--window N] [--gap G] [--lead L] [--out CSV]
    python tools/update_log.py RUN_DIR --updates A:B [--columns c1,c2,...] [--plot PNG]
    python tools/update_log.py RUN_DIR [RUN_DIR ...] --levels [--out CSV]

Without ``--updates``: the gradient spikes of each run, an update whose pre-clip gradient norm is more than
``--factor`` times the median of the ``--window`` updates before it; spikes at most ``--gap`` updates apart
are one event, listed by its first update, with its largest gradient norm (``peak``) and length. For each
event: its agent step, the gradient norm and its ratio to the median, the parameter with the largest
gradient, and what the values did, from ``drift_from`` (the first update of the run of updates before the
spike in which the batch's mean value moved the same way every update: a drift the value errors hardly
show) to the spike, and ``lead_corr``: over the ``--lead`` updates before the spike, the correlation of each
batch's signed mean value error (target minus value) with its mean value. Negative: the errors shrink as the
level rises toward its targets and grow as it falls away, a level pulled back. Positive: the errors grow with
the level, the targets running away from the values they train (bootstrapping's divergence).
``lead_corr_before`` is the same over the ``--window`` updates before those.

``--levels``: where each run's values went over the whole run: the range of the batch's mean value, the
lowest and highest single value, and with a target network (``learner.target_tau``) the median and largest
gap between the learner's mean value and the target's (``target_mean_value``).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from typing import Dict, List, Sequence

import numpy as np

from r2ac.bench.common import format_table, report_table, run_labels, write_csv

EVENT_COLUMNS = ("run", "update", "step", "grad_norm", "ratio", "top_param", "top_param_grad", "peak", "spikes",
                 "last_update", "drift_from",
                 "drift_updates", "mean_value_at_drift", "mean_value_at_spike", "value_min", "value_max",
                 "value_error_max", "lead_corr", "lead_corr_before")
WINDOW_COLUMNS = ("mean_value", "value_min", "value_max", "value_error_mean", "value_error_max", "grad_norm",
                  "carry_grad_norm", "segment_grad_norm")


def updates_path(path: str) -> str:
    """``updates.csv`` of a run directory (or the file itself); a clear error when it is missing."""
    f = os.path.join(path, "updates.csv") if os.path.isdir(path) else path
    if not os.path.isfile(f):
        raise FileNotFoundError(f"{f}: no per-update log; train the run with logger.update_log=true "
                                f"(docs/runtime.md, 'The per-update log')")
    return f


def read_updates(path: str) -> Dict[str, np.ndarray]:
    """The columns of a run's ``updates.csv`` as float arrays (an empty cell is NaN)."""
    with open(updates_path(path), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{updates_path(path)} has no rows: the run made no update")
    return {k: np.array([float(r[k]) if r.get(k) not in ("", None) else math.nan for r in rows])
            for k in rows[0]}


def spike_events(grad_norm: np.ndarray, factor: float, window: int, gap: int) -> List[List[int]]:
    """The events of a run, each the list of its spikes' indices: a spike is an update whose gradient norm is
    over ``factor`` times the median of the ``window`` updates before it (never among the first ``window``);
    a spike at most ``gap`` updates after the previous one belongs to its event."""
    events: List[List[int]] = []
    for i in range(window, len(grad_norm)):
        if grad_norm[i] > factor * float(np.median(grad_norm[i - window:i])):
            if events and i - events[-1][-1] <= gap:
                events[-1].append(i)
            else:
                events.append([i])
    return events


def drift_start(mean_value: np.ndarray, i: int) -> int:
    """The first index of the run of updates ending at ``i`` along which ``mean_value`` moved the same way at
    every update (``i`` itself when the update before it moved the other way)."""
    if i < 1:
        return i
    sign = np.sign(mean_value[i] - mean_value[i - 1])
    j = i - 1
    while j >= 1 and np.sign(mean_value[j] - mean_value[j - 1]) == sign and sign != 0:
        j -= 1
    return j


def lead_correlation(error_mean: np.ndarray, mean_value: np.ndarray, first: int, last: int) -> float:
    """The correlation over updates ``first`` to ``last`` - 1 (indices) of the batch's signed mean value error
    with its mean value (< 0: a level pulled back toward its targets; > 0: targets that run away with it); NaN
    with fewer than 3 updates or no spread."""
    first = max(first, 0)
    e, v = error_mean[first:last], mean_value[first:last]
    ok = np.isfinite(e) & np.isfinite(v)
    if ok.sum() < 3 or np.std(e[ok]) == 0 or np.std(v[ok]) == 0:
        return math.nan
    return float(np.corrcoef(e[ok], v[ok])[0, 1])


def describe_events(u: Dict[str, np.ndarray], factor: float, window: int, gap: int, lead: int = 60) -> List[Dict]:
    """The event rows of one run (``EVENT_COLUMNS`` but ``run``)."""
    g = u["grad_norm"]
    params = [k for k in u if k.startswith("grad_norm/")]
    out = []
    for spikes in spike_events(g, factor, window, gap):
        i = spikes[0]
        med = float(np.median(g[i - window:i]))
        d = drift_start(u["mean_value"], i - 1) if "mean_value" in u else i
        row = {"update": int(u["update"][i]), "step": int(u["step"][i]), "grad_norm": float(g[i]),
               "ratio": float(g[i] / med) if med > 0 else math.inf, "peak": float(g[spikes].max()),
               "spikes": len(spikes), "last_update": int(u["update"][spikes[-1]]), "drift_from": int(u["update"][d]),
               "drift_updates": int(i - d)}
        if params:
            top = max(params, key=lambda k: u[k][i])
            row.update(top_param=top[len("grad_norm/"):], top_param_grad=float(u[top][i]))
        if "mean_value" in u:
            row.update(mean_value_at_drift=float(u["mean_value"][d]), mean_value_at_spike=float(u["mean_value"][i]))
        for k in ("value_min", "value_max", "value_error_max"):
            if k in u:
                row[k] = float(u[k][i])
        if "value_error_mean" in u and "mean_value" in u:
            row["lead_corr"] = lead_correlation(u["value_error_mean"], u["mean_value"], i - lead, i)
            row["lead_corr_before"] = lead_correlation(u["value_error_mean"], u["mean_value"], i - lead - window,
                                                       i - lead)
        out.append(row)
    return out


LEVEL_COLUMNS = ("run", "updates", "mean_value_min", "mean_value_max", "value_min", "value_max", "target_gap_median",
                 "target_gap_max")


def value_levels(u: Dict[str, np.ndarray]) -> Dict:
    """``--levels``: the ranges a run's values took over all its updates (NaN where the log lacks a column)."""
    nan = np.full(len(next(iter(u.values()))), math.nan)

    def ends(col, fn):
        v = u.get(col, nan)
        return float(fn(v)) if np.isfinite(v).any() else math.nan

    gap = np.abs(u.get("mean_value", nan) - u.get("target_mean_value", nan))
    ok = np.isfinite(gap)
    return {"updates": len(nan), "mean_value_min": ends("mean_value", np.nanmin),
            "mean_value_max": ends("mean_value", np.nanmax), "value_min": ends("value_min", np.nanmin),
            "value_max": ends("value_max", np.nanmax),
            "target_gap_median": float(np.median(gap[ok])) if ok.any() else math.nan,
            "target_gap_max": float(gap[ok].max()) if ok.any() else math.nan}


def window_rows(u: Dict[str, np.ndarray], first: int, last: int, columns: Sequence[str]) -> List[Dict]:
    """Rows of updates ``first``..``last`` (by update number) with ``columns``; an unknown column is an error
    that lists the log's columns."""
    missing = [c for c in columns if c not in u]
    if missing:
        raise KeyError(f"no column {missing} in the per-update log; it has {sorted(u)}")
    idx = np.nonzero((u["update"] >= first) & (u["update"] <= last))[0]
    if not len(idx):
        raise ValueError(f"no update in {first}:{last}; the log has updates {int(u['update'][0])} to "
                         f"{int(u['update'][-1])}")
    return [{"update": int(u["update"][i]), "step": int(u["step"][i]), **{c: float(u[c][i]) for c in columns}}
            for i in idx]


def plot_window(rows: List[Dict], path: str, title: str) -> None:
    """PNG: the batch's value range and mean over the updates, and the gradient norm (log scale) below."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    x = [r["update"] for r in rows]
    fig = Figure(figsize=(9, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax, bx = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
    if all(k in rows[0] for k in ("value_min", "value_max")):
        ax.fill_between(x, [r["value_min"] for r in rows], [r["value_max"] for r in rows], alpha=0.25,
                        label="batch's V(x): min to max")
    if "mean_value" in rows[0]:
        ax.plot(x, [r["mean_value"] for r in rows], label="mean V(x)")
    ax.set_ylabel("value")
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    for k in ("grad_norm", "carry_grad_norm", "segment_grad_norm"):
        if k in rows[0]:
            bx.semilogy(x, [max(r[k], 1e-12) for r in rows], label=k)
    bx.set_xlabel("update")
    bx.set_ylabel("gradient norm (pre-clip)")
    if bx.get_legend_handles_labels()[0]:
        bx.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run directories trained with logger.update_log=true (or updates.csv files)")
    p.add_argument("--factor", type=float, default=20.0, help="a spike: grad_norm over this times the median before")
    p.add_argument("--window", type=int, default=500, help="updates in the median before each update")
    p.add_argument("--gap", type=int, default=100, help="spikes at most this many updates apart are one event")
    p.add_argument("--lead", type=int, default=60, help="updates before a spike in lead_corr")
    p.add_argument("--updates", default="", help="A:B: print updates A to B of one run instead of the events")
    p.add_argument("--columns", default="", help="columns for --updates, comma-separated (default: those of "
                   + ",".join(WINDOW_COLUMNS) + " the log has)")
    p.add_argument("--plot", default="", help="with --updates: write a PNG of the values and gradient norms")
    p.add_argument("--levels", action="store_true", help="instead of the events: the ranges each run's values took "
                                                         "(and the gap to a target network's)")
    p.add_argument("--out", default="", help="write the rows as CSV")
    a = p.parse_args(argv)
    if a.factor <= 1 or a.window < 1 or a.gap < 0 or a.lead < 3:
        p.error("--factor must be above 1, --window at least 1, --gap at least 0 and --lead at least 3")
    if a.updates:
        if len(a.runs) != 1:
            p.error("--updates reads one run; name one run directory")
        try:
            first, last = (int(v) for v in a.updates.split(":"))
        except ValueError:
            p.error(f"--updates {a.updates!r}: give two update numbers, A:B")
        u = read_updates(a.runs[0])
        columns = [c for c in a.columns.split(",") if c] or [c for c in WINDOW_COLUMNS if c in u]
        rows = window_rows(u, first, last, columns)
        print(format_table(rows, ["update", "step", *columns]))
        if a.out:
            write_csv(a.out, rows, ["update", "step", *columns])
        if a.plot:
            plot_window(rows, a.plot, f"{os.path.basename(os.path.abspath(a.runs[0]))}: updates {first}-{last}")
            print(f"wrote {a.plot}")
        return 0
    rows = []
    dirs = [run if os.path.isdir(run) else os.path.dirname(os.path.abspath(run)) for run in a.runs]

    def cell(r, c):
        v = r.get(c, "")
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    if a.levels:
        rows = [{"run": name, **value_levels(read_updates(run))} for run, name in zip(a.runs, run_labels(dirs))]
        report_table(LEVEL_COLUMNS, [[cell(r, c) for c in LEVEL_COLUMNS] for r in rows], rows, LEVEL_COLUMNS, a.out)
        return 0
    for run, name in zip(a.runs, run_labels(dirs)):
        rows += [{"run": name, **r} for r in describe_events(read_updates(run), a.factor, a.window, a.gap, a.lead)]

    report_table(EVENT_COLUMNS, [[cell(r, c) for c in EVENT_COLUMNS] for r in rows], rows, EVENT_COLUMNS, a.out)
    if not rows:
        print(f"no update above {a.factor:g}x the median of the {a.window} before it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
