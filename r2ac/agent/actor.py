"""The actor: steps a vector of envs with the behaviour policy and emits trajectories.

It carries, per env, the core state and (for RTRL) the sensitivities, detached and reset at episode
starts. Between trajectory boundaries it advances the hidden state only (``sensitivities=False``); at each
boundary it moves the sensitivities across the whole trajectory in closed form (identity 2: one re-run of
the core over the stored core inputs, one batched matmul per weight matrix). No transport inside: the
runtime calls ``rollout()`` and ``set_weights()``.

Time limits: with ``truncation_values`` (``learner.truncation_bootstrap``), where the env reports its final
observations (``venv.final_observations``: the POPGym, MuJoCo and ``gymc:`` kinds), trajectories carry
``truncation_value``: at a frame whose episode a time limit cut (``info["truncated"]``), V(final observation)
under the acting weights, from the core state that frame's episode ended in (one more step of the hidden
state, for the cut columns only); the learner folds it into the last reward.

Success: trajectories carry ``episode_success``, the env's ``info["success"]`` at the frame an episode ended
(NaN elsewhere, and where the env reports none: see :func:`episode_success`); the runtime logs its mean beside
the return, for tasks whose return is not their success rate (a reward on the way as well as at the goal).
"""

from __future__ import annotations

import os
from typing import Dict

import numpy as np
import torch

from r2ac.agent.distributions import categorical_sample
from r2ac.agent.nets import AgentNet


def episode_success(info: Dict, done, num_envs: int) -> torch.Tensor:
    """[B] float64: ``info["success"]`` where ``done`` (an episode ended at this step), NaN elsewhere and where
    the env's info has no ``success``."""
    out = torch.full((num_envs,), float("nan"), dtype=torch.float64)
    success = info.get("success")
    if success is not None:
        ended = torch.as_tensor(np.asarray(done, dtype=bool))
        values = torch.as_tensor(np.asarray(success, dtype=np.float64))
        out[ended] = values[ended]
    return out


class Actor:
    def __init__(self, net: AgentNet, venv, unroll_length: int, seed: int = 0, ship_features: bool = False,
                 desync: bool = False, truncation_values: bool = False):
        self.net = net.eval()
        self.venv = venv
        self.M = int(unroll_length)
        self.B = venv.num_envs
        self.ship_features = ship_features
        if ship_features and not net.stem_frozen:
            raise ValueError("ship_features needs a frozen stem (stem.freeze=true): the learner would not train it")
        self.generator = torch.Generator().manual_seed(seed)
        self.version = 0
        # trajectory numbers: a random start per actor, so numbers of different actor processes (a restarted
        # one included) never continue each other
        self.segment = int.from_bytes(os.urandom(5), "little") << 20
        self.desync = bool(desync)
        self._env_rng = np.random.default_rng(seed)
        self.state = net.initial_state(self.B, device="cpu")
        # learner.truncation_bootstrap, where the env reports final observations
        self.truncation_values = bool(truncation_values) and bool(getattr(venv, "final_observations", False))
        self._last = self._first_frame(self._reset_envs())
        self.dropped = 0  # partial trajectories dropped after env failures

    def _reset_envs(self) -> np.ndarray:
        """New episodes everywhere; with ``desync`` each env's first one starts at a random step (envs that
        cannot keep their reset)."""
        obs = self.venv.reset()
        if self.desync:
            moved = self.venv.desync(self._env_rng)
            obs = obs if moved is None else moved
        return obs

    def _first_frame(self, obs) -> Dict[str, torch.Tensor]:
        B, A = self.B, self.net.num_actions
        frame = {
            "obs": torch.from_numpy(np.ascontiguousarray(obs)),
            "reward": torch.zeros(B),
            "done": torch.ones(B, dtype=torch.bool),  # every env starts an episode
            "action": torch.zeros(B, dtype=torch.int64),
            "policy_logits": torch.zeros(B, A),
            "episode_return": torch.full((B,), float("nan"), dtype=torch.float64),
            "episode_length": torch.zeros(B, dtype=torch.int64),
            "episode_success": torch.full((B,), float("nan"), dtype=torch.float64),
        }
        frame["features"] = self.net.features(frame["obs"].unsqueeze(0))[0] if self.ship_features else None
        if self.truncation_values:
            frame["truncation_value"] = torch.zeros(B)
        return frame

    def _step_inputs(self, obs: torch.Tensor, reward, action, done, features=None) -> Dict[str, torch.Tensor]:
        """The network's inputs for one step of frames ``obs`` [B', *obs_shape] (``features`` where shipped)."""
        feats = features if features is not None else self.net.features(obs.unsqueeze(0))[0]
        inputs = {"features": feats.unsqueeze(0), "reward": reward.unsqueeze(0), "action": action.unsqueeze(0),
                  "done": done.unsqueeze(0)}
        if features is None:
            inputs["obs"] = obs.unsqueeze(0)  # the frames' 8-bit values: a faster median
        return inputs

    def _truncation_values(self, info, done, reward, action, hidden) -> torch.Tensor:
        """[B]: V(final observation) where a time limit cut the episode at this step, 0 elsewhere. The cut
        columns take one more step from ``hidden`` (the state their episode ended in) on their final frame,
        with the step's reward and action as its inputs, as if the episode had gone on."""
        values = torch.zeros(self.B)
        cut = np.flatnonzero(np.asarray(info.get("truncated", np.zeros(self.B, bool)), dtype=bool) & done)
        if cut.size == 0 or "final_observation" not in info:
            return values
        idx = torch.from_numpy(cut)
        obs = torch.from_numpy(np.ascontiguousarray(np.asarray(info["final_observation"])[cut]))
        inputs = self._step_inputs(obs, reward[idx], action[idx], torch.zeros(len(cut), dtype=torch.bool))
        out, _ = self.net(inputs, {k: v[idx] for k, v in hidden.items()}, sensitivities=False, return_state=False)
        values[idx] = out["baseline"][0].float()
        return values

    def restart(self) -> None:
        """Start over after an env failure: new episodes everywhere, fresh core state."""
        self.state = self.net.initial_state(self.B, device="cpu")
        self._last = self._first_frame(self._reset_envs())

    def set_weights(self, state_dict: Dict[str, torch.Tensor], version: int) -> None:
        self.net.load_state_dict(state_dict)
        self.version = int(version)

    @torch.no_grad()
    def rollout(self) -> Dict:
        """Act for M steps; return a trajectory of M + 1 frames (see ``r2ac.agent.trajectory``)."""
        net = self.net
        start_state = self.state
        frames = [self._last]
        xs = []
        hidden = start_state
        frame = self._last
        for _ in range(self.M):
            inputs = self._step_inputs(frame["obs"], frame["reward"], frame["action"], frame["done"],
                                       frame["features"])
            out, hidden = net(inputs, hidden, sensitivities=False)
            xs.append(out["core_input"])
            logits = out["policy_logits"][0]
            action = categorical_sample(logits, self.generator)
            obs, reward, done, info = self.venv.step(action.numpy())
            frame = {
                "obs": torch.from_numpy(np.ascontiguousarray(obs)),
                "reward": torch.as_tensor(reward, dtype=torch.float32),
                "done": torch.as_tensor(done, dtype=torch.bool),
                "action": action,
                "policy_logits": logits,
                "episode_return": torch.as_tensor(info["episode_return"], dtype=torch.float64),
                "episode_length": torch.as_tensor(info["episode_length"], dtype=torch.int64),
                "episode_success": episode_success(info, done, self.B),
                "features": net.features(torch.from_numpy(np.ascontiguousarray(obs)).unsqueeze(0))[0]
                if self.ship_features else None,
            }
            if self.truncation_values:
                frame["truncation_value"] = self._truncation_values(info, np.asarray(done, dtype=bool),
                                                                    frame["reward"], action, hidden)
            frames.append(frame)
        self._last = frame
        resets = torch.stack([f["done"] for f in frames[:-1]])
        if net.core.sensitivity_keys:
            # identity 2: the sensitivities (and hidden state) at the trajectory end in closed form
            _, self.state = net.core(torch.cat(xs), start_state, resets)
        else:
            self.state = hidden
        obs_key = "features" if self.ship_features else "obs"
        traj = {k: torch.stack([f[k] for f in frames]) for k in
                (obs_key, "reward", "done", "action", "policy_logits", "episode_return", "episode_length",
                 "episode_success")}
        if self.truncation_values:
            traj["truncation_value"] = torch.stack([f["truncation_value"] for f in frames])
        traj["initial_state"] = start_state
        traj["version"] = torch.full((self.B,), self.version, dtype=torch.int64)
        traj["segment"] = torch.full((self.B,), self.segment, dtype=torch.int64)
        self.segment += 1
        return traj

    def close(self) -> None:
        self.venv.close()

