"""The one trajectory format used everywhere (actor -> runtime -> learner).

A trajectory is a dict of time-major tensors of length M + 1 over a batch of B environments (the last
step is the first of the next trajectory, IMPALA's overlap):

    obs            [M+1, B, *obs_shape] uint8/float   (or ``features`` [M+1, B, F] float with a frozen stem)
    reward         [M+1, B] float32   reward received with frame t (raw; the learner clips)
    done           [M+1, B] bool      frame t starts a new episode (the episode before it ended)
    action         [M+1, B] int64     the action that led to frame t
    policy_logits  [M+1, B, A] float  behaviour logits of that action
    episode_return [M+1, B] float64   return of the episode that ended at t (NaN elsewhere)
    episode_length [M+1, B] int64
    truncation_value [M+1, B] float32 optional (learner.truncation_bootstrap, envs that report their final
                                      observations): V(final observation) of the episode that a time limit
                                      cut at frame t, under the acting weights (0 elsewhere); the learner
                                      folds discount * it into reward[t]
    episode_success [M+1, B] float64  optional: the env's ``info["success"]`` for the episode that ended at t
                                      (NaN elsewhere, and where the env reports none); logged as
                                      ``episode_success`` and judged by ``r2ac bench memory`` for ``gym:`` tasks
    initial_state  dict of [B, ...]   core state before frame 0 (hidden + RTRL sensitivities)
    version        [B] int64          version of the weights that acted (for the policy lag)
    segment        [B] int64          the actor's trajectory number (consecutive trajectories of an actor
                                      continue each other column by column; optional, used by
                                      ``learner.sensitivities=learner``)
    slot           [B] int64          set by the learner's session: which (actor, column) each column is
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

TIME_KEYS = ("reward", "done", "action", "policy_logits", "episode_return", "episode_length")
OPTIONAL_TIME_KEYS = ("truncation_value", "episode_success")  # [M+1, B], kept where every part of a batch has it
FINITE_OPTIONAL_KEYS = ("truncation_value",)  # those that must be finite (episode_success is NaN between ends)
COLUMN_KEYS = ("version", "segment", "slot")  # [B] per-column labels (segment and slot optional)
DTYPES = {"done": torch.bool, "action": torch.int64, "episode_length": torch.int64}


def observation_key(traj: Dict) -> str:
    return "features" if "features" in traj else "obs"


def num_columns(traj: Dict) -> int:
    return traj["reward"].shape[1]


def concat(trajs: List[Dict]) -> Dict:
    """Concatenate trajectories along the batch dimension (time dim 1, state dim 0)."""
    if len(trajs) == 1:
        return trajs[0]
    key = observation_key(trajs[0])
    out = {k: torch.cat([t[k] for t in trajs], 1) for k in (key,) + TIME_KEYS}
    out["initial_state"] = {k: torch.cat([t["initial_state"][k] for t in trajs], 0) for k in trajs[0]["initial_state"]}
    for k in OPTIONAL_TIME_KEYS:
        if all(k in t for t in trajs):
            out[k] = torch.cat([t[k] for t in trajs], 1)
    for k in COLUMN_KEYS:
        if all(k in t for t in trajs):
            out[k] = torch.cat([t[k] for t in trajs])
    return out


def columns(traj: Dict, start: int, stop: int) -> Dict:
    key = observation_key(traj)
    out = {k: traj[k][:, start:stop] for k in (key,) + TIME_KEYS}
    out["initial_state"] = {k: v[start:stop] for k, v in traj["initial_state"].items()}
    for k in OPTIONAL_TIME_KEYS:
        if k in traj:
            out[k] = traj[k][:, start:stop]
    for k in COLUMN_KEYS:
        if k in traj:
            out[k] = traj[k][start:stop]
    return out


class Batcher:
    """Assembles learner batches of exactly ``batch_size`` columns from trajectories of any width."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self._parts: List[Dict] = []
        self._have = 0

    def add(self, traj: Dict) -> List[Dict]:
        self._parts.append(traj)
        self._have += num_columns(traj)
        batches = []
        while self._have >= self.batch_size:
            take, need = [], self.batch_size
            while need:
                t = self._parts[0]
                n = num_columns(t)
                if n <= need:
                    take.append(self._parts.pop(0))
                    need -= n
                else:
                    take.append(columns(t, 0, need))
                    self._parts[0] = columns(t, need, n)
                    need = 0
            self._have -= self.batch_size
            batches.append(concat(take))
        return batches


def square_sum(t: Tensor) -> Optional[float]:
    """The sum of the squares of ``t``'s entries, or None when one of them is not finite. One pass without a
    mask: a NaN or inf makes the norm non-finite, so a finite norm settles it (the sensitivities are large:
    ``isfinite(t).all()`` on them cost as much as the learner's update, measured); a non-finite norm is
    checked element by element (finite entries whose norm overflows give inf, not None). The learner's
    ``sensitivity_rms`` comes from these sums, with no pass of its own over the sensitivities."""
    norm = float(torch.linalg.vector_norm(t))
    if math.isfinite(norm):
        return norm * norm
    return math.inf if bool(torch.isfinite(t).all()) else None


def validate(traj: Dict, *, unroll_length: int, num_actions: int, state_spec: Dict[str, tuple],
             obs_shape: Optional[tuple] = None, check_finite: bool = True,
             square_sums: Optional[Dict[str, float]] = None) -> Optional[str]:
    """Return why a trajectory must be rejected, or None when it is well-formed and finite. ``square_sums``
    (with ``check_finite``): filled with each ``initial_state`` entry's sum of squares (``square_sum``)."""
    try:
        key = observation_key(traj)
        T1 = unroll_length + 1
        B = traj["reward"].shape[1] if traj["reward"].dim() == 2 else -1
        if traj["reward"].shape != (T1, B):
            return f"reward has shape {tuple(traj['reward'].shape)}, expected ({T1}, B)"
        if obs_shape is not None and key == "obs" and tuple(traj["obs"].shape) != (T1, B) + tuple(obs_shape):
            return f"obs has shape {tuple(traj['obs'].shape)}, expected {(T1, B) + tuple(obs_shape)}"
        if key == "features" and (traj["features"].dim() != 3 or traj["features"].shape[:2] != (T1, B)):
            return f"features has shape {tuple(traj['features'].shape)}, expected ({T1}, {B}, F)"
        for k in TIME_KEYS:
            want = (T1, B, num_actions) if k == "policy_logits" else (T1, B)
            if tuple(traj[k].shape) != want:
                return f"{k} has shape {tuple(traj[k].shape)}, expected {want}"
            if k in DTYPES and traj[k].dtype != DTYPES[k]:
                return f"{k} has dtype {traj[k].dtype}, expected {DTYPES[k]}"
        for k in OPTIONAL_TIME_KEYS:
            if k in traj and tuple(traj[k].shape) != (T1, B):
                return f"{k} has shape {tuple(traj[k].shape)}, expected {(T1, B)}"
        if traj["action"].min() < 0 or traj["action"].max() >= num_actions:
            return f"action outside [0, {num_actions})"
        st = traj["initial_state"]
        if set(st) != set(state_spec):
            return f"initial_state has keys {sorted(st)}, expected {sorted(state_spec)}"
        for k, shape in state_spec.items():
            if tuple(st[k].shape) != (B,) + tuple(shape):
                return f"initial_state[{k!r}] has shape {tuple(st[k].shape)}, expected {(B,) + tuple(shape)}"
        if check_finite:
            for k in ("reward", "policy_logits") + ((key,) if key == "features" else ()) + tuple(
                    o for o in FINITE_OPTIONAL_KEYS if o in traj):
                if not torch.isfinite(traj[k]).all():
                    return f"{k} has non-finite values"
            for k, v in st.items():
                sq = square_sum(v)
                if sq is None:
                    return f"initial_state[{k!r}] has non-finite values"
                if square_sums is not None:
                    square_sums[k] = sq
    except (KeyError, AttributeError, TypeError, IndexError) as e:
        return f"malformed trajectory: {type(e).__name__}: {e}"
    return None


def to_device(batch: Dict, device) -> Dict:
    out = {}
    for k, v in batch.items():
        if isinstance(v, Tensor):
            out[k] = v.to(device, non_blocking=True)
        elif isinstance(v, dict):
            out[k] = {kk: vv.to(device, non_blocking=True) for kk, vv in v.items()}
        else:
            out[k] = v
    return out


def nbytes(traj: Dict) -> int:
    """Bytes of tensor payload in a trajectory (what is shipped between processes)."""
    total = 0
    for v in traj.values():
        if isinstance(v, Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, dict):
            total += sum(t.numel() * t.element_size() for t in v.values())
    return total
