"""Where a config's entropy bonus and logit penalty hold a choice of known stake: the probability of its right answer.

On a step whose right answer pays ``stake`` and the other actions nothing, the IMPALA loss's terms settle where
p * stake + c * min(H, entropy_floor * ln A) - lambda * 0.5 * sum_a (z_a - mean z)^2 is largest: c =
min(entropy_cost, entropy_cap * u) and lambda = logit_penalty * u, u the task's reward unit (its largest |reward|
after reward_clip), as the learner weighs them (``r2ac.agent.losses.held_answer``). A task whose rewards differ in
size gets its small ones answered softly: at quickstart's settings an answer worth u is held at p = 0.994 and one
worth u / 10 at 0.76 (three actions). This prints, for each stake, the gap, p(right) and the odds against each
wrong action, and writes them as CSV with ``--out``.

    python tools/held_answers.py configs/quickstart.yaml --actions 3 --unit 1 --stakes 0.03,0.1,0.3,1
    python tools/held_answers.py configs/quickstart.yaml learner.entropy_cost=0.01 --stakes 0.1
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional


def held_rows(cfg, actions: int, unit: float, stakes: List[float]) -> List[Dict]:
    """One row per stake: the weights the learner would use with reward unit ``unit`` and where they hold it."""
    from r2ac.agent.losses import held_answer

    if unit <= 0:
        raise ValueError(f"--unit is the task's largest |reward| and must be > 0, got {unit}")
    lc = cfg.learner
    u = min(unit, lc.reward_clip) if lc.reward_clip > 0 else unit
    c = min(lc.entropy_cost, lc.entropy_cap * u) if lc.entropy_cap > 0 else lc.entropy_cost
    lam = lc.logit_penalty * u
    rows = []
    for s in stakes:
        out = held_answer(s, c, lam, actions, lc.entropy_floor, lc.logit_margin)
        p = out["p"]
        rows.append({"stake": s, "stake_over_unit": round(s / u, 6), "entropy_weight": c, "logit_penalty": lam,
                     "gap": round(out["gap"], 4), "p_right": round(p, 6),
                     "odds_vs_each_wrong": round(p * (actions - 1) / (1 - p), 2)})
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    from r2ac.bench.common import print_markdown_and_csv
    from r2ac.config import load_config

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default="configs/quickstart.yaml", help="YAML config (default quickstart)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides, as for r2ac train")
    ap.add_argument("--actions", type=int, default=3, help="the choice's number of actions (default 3)")
    ap.add_argument("--unit", type=float, default=1.0, help="the task's largest |reward| (default 1)")
    ap.add_argument("--stakes", default="0.01,0.03,0.1,0.3,1", help="comma-separated stakes (default 0.01,...,1)")
    ap.add_argument("--out", help="CSV to write")
    a = ap.parse_args(argv)
    cfg = load_config(a.config, a.overrides)
    rows = held_rows(cfg, a.actions, a.unit, [float(s) for s in a.stakes.split(",")])
    print_markdown_and_csv(rows, list(rows[0]), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
