"""Does a key-to-door agent's value carry the key across the span? For runs of ``r2ac bench memory`` on
``keydoor`` / ``keydoor-vector`` (docs/results.md, "Key to door").

    python tools/keydoor_value.py RUN_DIR [RUN_DIR ...] [--episodes N] [--seed S] [--out CSV] [--every-checkpoint]

For each run its newest checkpoint plays ``--episodes`` fresh episodes side by side, the choice at the key
forced: half the episodes take the key, half leave it (the next colour). Along the way we record the
value (the baseline head) at every step and report

- ``p_take``: the policy's probability of naming the key's colour at the key frame (what it would sample);
- ``gap_t`` for t = 1 (the key-held frame), 2, the middle of the span and the door: the mean value of the
  episodes that hold the key minus that of those that do not, as a fraction of the exact gap
  ``gamma ** (span + 1 - t)`` (the door pays 1 at step ``span + 1``). 1 is a value that knows the key
  is held; 0 one that has forgotten it (or never knew).
- ``value_spread``: the largest value minus the smallest over every step of every episode played; 0 is a
  value that does not vary with anything it sees (a network whose hidden units are all inactive).

``--every-checkpoint`` plays each checkpoint a run kept (``checkpoint.interval_s``, ``checkpoint.keep``), oldest
first, a row each: how the value and the choice moved along training (e.g. around a fall after solving).

An actor-critic whose segments are shorter than the span learns the choice from values bootstrapped ``M``
steps on: where the gap is 0 after the first segment the choice's advantage holds nothing of the door.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from r2ac.api import PolicyState, load_checkpoint_for, policy_from_checkpoint
from r2ac.bench.common import labelled_runs, parse_played_runs, played_runs_parser, report_table
from r2ac.checkpoint import list_checkpoints, load_checkpoint
from r2ac.config import load_config
from r2ac.envs.recall import KeyDoorVecEnv

FIELDS = ("run", "step", "episodes", "span", "discount", "p_take", "gap_1", "gap_2", "gap_mid", "gap_door",
          "value_spread")


def value_gaps(values: np.ndarray, held: np.ndarray, span: int, discount: float) -> dict:
    """``values`` [T, n] along episodes of the fixed layout (step 0 = the key, ``span + 1`` = the door),
    ``held`` [n]: the gaps of the module docstring, as fractions of the exact ``discount ** (span + 1 - t)``."""
    if held.all() or not held.any():
        raise ValueError("value_gaps needs episodes that hold the key and episodes that do not")
    steps = {"gap_1": 1, "gap_2": min(2, span + 1), "gap_mid": (span + 2) // 2, "gap_door": span + 1}
    out = {}
    for name, t in steps.items():
        gap = values[t, held].mean() - values[t, ~held].mean()
        out[name] = float(gap / discount ** (span + 1 - t))
    return out


def play(policy, options: dict, episodes: int, discount: float, seed: int = 12345) -> dict:
    opts = {k: v for k, v in options.items() if k in ("span", "cues", "obs", "size", "distractors")}
    if options.get("cue_delay") or options.get("span_min") not in (None, options.get("span")):
        raise SystemExit("keydoor_value: fixed layouts only (no cue_delay, no span_min)")
    env = KeyDoorVecEnv(episodes, seed, **opts)
    obs = env.reset()
    key = env.cue.copy()
    take = np.arange(episodes) % 2 == 0
    forced = np.where(take, key, (key + 1) % env.cues)
    state = policy.initial_state(episodes)
    reward = done = None
    values = np.zeros((env.span + 2, episodes))
    p_take = float("nan")
    for t in range(env.span + 2):
        action, state, out = policy.act_with_outputs(obs, state, reward=reward, done=done)
        values[t] = out["baseline"].cpu().numpy()
        if t == 0:
            probs = out["policy_logits"].softmax(-1).cpu().numpy()
            p_take = float(probs[np.arange(episodes), key].mean())
            action = forced
            state = PolicyState(state.core, state.action.new_tensor(forced), state.first)
        obs, reward, done, _ = env.step(np.asarray(action))
    assert done.all(), "every episode ends at its door"
    return {"episodes": episodes, "span": env.span, "discount": discount, "p_take": p_take,
            **value_gaps(values, take, env.span, discount), "value_spread": float(values.max() - values.min())}


def main(argv: list[str] | None = None) -> int:
    switches = {"--every-checkpoint": "a row for each checkpoint a run kept"}
    a = parse_played_runs(played_runs_parser(__doc__, 512, switches), argv, "keydoor_value")
    if a.episodes < 2:
        raise SystemExit("keydoor_value: --episodes must be at least 2 (one takes the key, one leaves it)")
    rows = []
    for run, label in labelled_runs(a.runs):
        cfg = load_config(os.path.join(run, "config.yaml"))
        if cfg.env.id != "keydoor":
            raise SystemExit(f"keydoor_value: {run} is not a key-to-door run (env.id {cfg.env.id!r})")
        ckpts = ([load_checkpoint(path) for _, path in list_checkpoints(run)] if a.every_checkpoint
                 else [load_checkpoint_for(run)])
        if not ckpts:
            raise SystemExit(f"keydoor_value: {run} has no checkpoints")
        for ckpt in ckpts:
            policy = policy_from_checkpoint(ckpt, cfg)
            rows.append({"run": label, "step": policy.step,
                         **play(policy, dict(cfg.env.options), a.episodes, cfg.learner.discount, a.seed)})
    cells = [[f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k]) for k in FIELDS] for r in rows]
    report_table(FIELDS, cells, rows, FIELDS, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
