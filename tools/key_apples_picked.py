"""The share of the apples a key-and-apples agent picked (examples/key_apples.py), from its run's metrics.csv.

Each log row has the mean return and the mean success (``episode_success``) of the episodes that ended since the
row before; the door pays ``door_reward`` on a success, so the apples' part of the return is return - door_reward x
success, and the apples shown per episode are ``apple_rate`` x (span - 2) on average. This prints, per run, the
share picked (apples' part / apple_reward / apples shown) and the success over the last ``--last`` log rows that
ended episodes, weighted by their episode counts; the env options are read from the run's config.yaml.

    python tools/key_apples_picked.py results/user_task/apples150/runs/* --out results/user_task/apples150/picked.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from typing import Dict, List, Optional


def picked(run_dir: str, last: int = 20) -> Dict:
    """{run, span, success, picked, episodes}: over the last ``last`` log rows that ended episodes."""
    from r2ac.config import load_config

    cfg = load_config(os.path.join(run_dir, "config.yaml"))
    if "key_apples" not in str(cfg.env.id):
        raise ValueError(f"{run_dir}: a run of {cfg.env.id}, not of examples/key_apples.py")
    opts = dict(cfg.env.options or {})
    span, rate = int(opts.get("span", 150)), float(opts.get("apple_rate", 0.3))
    apple, door = float(opts.get("apple_reward", 0.1)), float(opts.get("door_reward", 1.0))
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r.get("episode_success", "") not in ("", "nan")]
    if not rows:
        raise ValueError(f"{run_dir}: metrics.csv has no episode_success (no episode ended, or a run logged before "
                         "r2ac kept it)")
    counts = [float(b["episodes"]) - float(a["episodes"]) for a, b in zip([{"episodes": 0}] + rows, rows)]
    tail = list(zip(rows, counts))[-last:]
    n = sum(c for _, c in tail)
    success = sum(float(r["episode_success"]) * c for r, c in tail) / n
    ret = sum(float(r["episode_return"]) * c for r, c in tail) / n
    shown = rate * (span - 2)
    share = (ret - door * success) / apple / shown if shown > 0 and apple > 0 else float("nan")
    return {"run": os.path.basename(os.path.normpath(run_dir)), "span": span, "step": rows[-1]["step"],
            "success": round(success, 4), "picked": round(share, 4), "episodes": int(n)}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run directories of examples/key_apples.py")
    p.add_argument("--last", type=int, default=20, help="log rows that ended episodes to average over (default 20)")
    p.add_argument("--out", help="CSV to write")
    from r2ac.bench.common import print_markdown_and_csv

    a = p.parse_args(argv)
    rows = [picked(r, a.last) for r in a.runs]
    print_markdown_and_csv(rows, list(rows[0]), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
