"""How much of what an eLSTM agent's units hold at an episode's first frame is still there at its end? For trained
runs of any task (docs/results.md, "Retention times up to 10^4 steps").

    python tools/retention.py RUN_DIR [RUN_DIR ...] [--episodes N] [--seed S] [--out CSV] [--untrained]

The eLSTM's cell is c(t) = f(t) c(t-1) + (1 - f(t)) z(t) (``r2ac.cores.elstm``): of what unit i held after the
first frame, the share f_i(1) f_i(2) ... f_i(L) is left after the episode's last frame L, whatever else was
written since. For each run its newest checkpoint plays ``--episodes`` episodes of its own task (``env.options``)
on fresh envs with sampled actions, and we record that product per unit and episode (the keep gate f computed
from the core's inputs and its cell, step by step, as the core computes it). Columns, each the median over the
episodes played:

- ``units``: the eLSTM's units; ``length``: the episodes' mean length;
- ``kept_half``, ``kept_tenth``, ``kept_hundredth``: the number of units that keep at least 1/2, 1/10, 1/100 of
  what they held after the first frame to the episode's end;
- ``best``: the largest share kept by any unit.

A task whose cue comes on the first frame and is asked for on the last one needs units among the kept ones that
hold the cue. ``--untrained`` plays a freshly initialised network of each run's config instead (torch seeded with
the run's ``seed``): the keep gates of the initialisation (``chrono_max``).
"""

from __future__ import annotations

import numpy as np
import torch

from r2ac.bench.common import UNTRAINED, parse_played_runs, played_policies, played_runs_parser, report_table

COLUMNS = ("run", "units", "episodes", "length", "kept_half", "kept_tenth", "kept_hundredth", "best")
SHARES = (("kept_half", 0.5), ("kept_tenth", 0.1), ("kept_hundredth", 0.01))


class KeepRecorder:
    """A forward hook on an eLSTM core acting one step at a time: the running sum, per env and unit, of log f over
    the steps of the env's current episode after its first frame (``log_kept``)."""

    def __init__(self, core, num_envs: int) -> None:
        if getattr(core, "name", None) != "elstm":
            name = getattr(core, "name", type(core).__name__)
            raise ValueError(f"retention reads an eLSTM's keep gates; this run's core is {name!r} (model.core=elstm)")
        self.core = core
        self.log_kept = torch.zeros(num_envs, core.hidden_size, dtype=torch.float64)

    def __call__(self, module, args, result) -> None:
        x, state, reset = args[:3]
        if x.shape[0] != 1:
            raise ValueError(f"retention records one step at a time, got {x.shape[0]} steps in one call")
        core = self.core
        with torch.no_grad():
            f = torch.sigmoid(x[0] @ core.F.T + core.w_f * state["c"] + core.b_f).to(torch.float64)
        go_on = ~reset[0].cpu()  # a first frame starts the count: what it writes is what is kept from then
        self.log_kept[go_on] += f.log().cpu()[go_on]
        self.log_kept[~go_on] = 0.0


def kept_shares(policy, episodes: int, seed: int) -> tuple:
    """Play ``episodes`` episodes of ``policy`` (an ``r2ac.api.Policy``) on fresh envs of its config seeded with
    ``seed``; returns (kept [episodes, units], the share of what each unit held after the episode's first frame
    that is left after its last, and the episodes' lengths)."""
    from r2ac.envs import make_config_env

    cfg = policy.config
    venv = make_config_env(cfg.env, cfg.eval.num_envs or cfg.env.num_envs, seed)
    recorder = KeepRecorder(policy.net.core, venv.num_envs)
    hook = policy.net.core.register_forward_hook(recorder)
    kept, lengths = [], []
    try:
        obs, state, reward, done = venv.reset(), policy.initial_state(venv.num_envs), None, None
        while len(kept) < episodes:
            action, state = policy.act(obs, state, reward=reward, done=done)
            obs, reward, done, info = venv.step(action)
            for e in np.flatnonzero(done):
                if len(kept) < episodes:
                    kept.append(recorder.log_kept[e].exp().numpy())
                    lengths.append(int(info["episode_length"][e]))
    finally:
        hook.remove()
        venv.close()
    return np.stack(kept), np.array(lengths)


def retention_stats(kept: np.ndarray, lengths: np.ndarray) -> dict:
    """The columns of the module docstring from ``kept_shares``' output."""
    if kept.ndim != 2 or kept.shape[0] < 1:
        raise ValueError(f"retention_stats needs shares [episodes, units] of at least one episode, got {kept.shape}")
    row = {"units": int(kept.shape[1]), "episodes": int(kept.shape[0]), "length": float(lengths.mean())}
    for name, share in SHARES:
        row[name] = float(np.median((kept >= share).sum(1)))
    row["best"] = float(np.median(kept.max(1)))
    return row


def main(argv: list[str] | None = None) -> int:
    a = parse_played_runs(played_runs_parser(__doc__, 200, UNTRAINED), argv, "retention")
    rows = []
    for label, policy in played_policies(a):
        rows.append({"run": label, **retention_stats(*kept_shares(policy, a.episodes, a.seed))})
    report_table(["run", "units", "episode length", "units keeping 1/2", "1/10", "1/100", "best unit keeps"],
                 [[r["run"], str(r["units"]), f"{r['length']:.0f}", f"{r['kept_half']:.0f}",
                   f"{r['kept_tenth']:.0f}", f"{r['kept_hundredth']:.0f}", f"{r['best']:.3f}"] for r in rows],
                 rows, COLUMNS, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
