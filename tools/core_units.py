"""Which of a trained agent's core units still do anything? For trained runs of any task (docs/results.md,
"The feed-forward agent's units").

    python tools/core_units.py RUN_DIR [RUN_DIR ...] [--episodes N] [--seed S] [--out CSV] [--untrained]

For each run its newest checkpoint plays ``--episodes`` episodes of its own task (``env.options``) on fresh
envs with sampled actions (``r2ac eval``'s protocol), and we record the core's output y(t) (what the policy
and value heads read) at every step. Columns:

- ``units``: the core's output size;
- ``live``: the fraction of units whose output is not the same number at every step played. A unit that
  never changes tells the heads nothing (a ReLU unit whose input stays below 0 outputs 0 throughout);
- ``nonzero``: the mean fraction of units with a non-zero output per step (for ReLU units: active ones);
- ``all_zero``: the fraction of steps at which every unit outputs 0.

``--untrained`` plays a freshly initialised network of each run's config instead (torch seeded with the run's
``seed``): the same statistics before training.
"""

from __future__ import annotations

import numpy as np
import torch

from r2ac.bench.common import UNTRAINED, parse_played_runs, played_policies, played_runs_parser, report_table
from r2ac.evaluation import evaluate_policy

COLUMNS = ("run", "core", "episodes", "steps", "units", "live", "nonzero", "all_zero")


def unit_stats(y: np.ndarray) -> dict:
    """``y`` [steps, units], the core's outputs along the played steps: the columns of the module docstring."""
    if y.ndim != 2 or y.shape[0] < 1:
        raise ValueError(f"unit_stats needs outputs [steps, units] with at least one step, got shape {y.shape}")
    nonzero = y != 0
    return {"steps": int(y.shape[0]), "units": int(y.shape[1]),
            "live": float((y.max(0) > y.min(0)).mean()), "nonzero": float(nonzero.mean()),
            "all_zero": float((~nonzero.any(1)).mean())}


def played_outputs(policy, episodes: int, seed: int) -> np.ndarray:
    """The core outputs [steps, units] of ``policy`` (an ``r2ac.api.Policy``) over ``episodes`` test episodes."""
    outputs = []

    def keep(module, inputs, result):
        y = result[0] if isinstance(result, tuple) else result
        outputs.append(y.detach().reshape(-1, y.shape[-1]).float().cpu())

    hook = policy.net.core.register_forward_hook(keep)
    try:
        evaluate_policy(policy, policy.config, sets=1, episodes=episodes, seed=seed, greedy=False)
    finally:
        hook.remove()
    return torch.cat(outputs).numpy()


def main(argv: list[str] | None = None) -> int:
    a = parse_played_runs(played_runs_parser(__doc__, 32, UNTRAINED), argv, "core_units")
    rows = []
    for label, policy in played_policies(a):
        stats = unit_stats(played_outputs(policy, a.episodes, a.seed))
        core, activation = policy.config.model.core, getattr(policy.net.core, "activation", None)
        rows.append({"run": label, "core": f"{core} ({activation})" if activation else core,
                     "episodes": a.episodes, **stats})
    report_table(["run", "core", "units", "live", "non-zero per step", "steps with every unit 0"],
                 [[r["run"], r["core"], str(r["units"]), f"{r['live']:.3f}", f"{r['nonzero']:.3f}",
                   f"{r['all_zero']:.3f}"] for r in rows], rows, COLUMNS, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
