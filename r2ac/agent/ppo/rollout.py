"""Rollout storage and collection of the PPO agent (Algorithm 1 of Elelimy et al. 2024): L steps of B
envs with, for every step, the core state before it including its RTRL sensitivities (the stored
traces); the optional re-run of a rollout with the current weights (``rerun_rollout``, the refresh); GAE
advantages with time-limit bootstrapping (``compute_advantages``).

Time limits: where an episode is cut by a time limit (``info["truncated"]``) and the env reports its final
observation (``info["final_observation"]``, the ``r2ac.envs.continuous`` kinds), the learner bootstraps
with gamma * V(final observation) folded into that step's reward; envs without it treat truncation as
termination.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from r2ac.agent.actor import episode_success
from r2ac.agent.inputs import core_input
from r2ac.agent.losses import gae_advantages
from r2ac.agent.ppo.net import PPONet, action_spec

__all__ = ["InputSpec", "Rollout", "RolloutCollector", "compute_advantages", "flat_observations", "network_input",
           "rerun_rollout", "resolve_normalization"]


# --------------------------------------------------------------------------------------------------
# The network input x_t (shared by the collector and r2ac.api's PPOPolicy)
# --------------------------------------------------------------------------------------------------

def resolve_normalization(setting: str, continuous: bool) -> bool:
    """``ppo.normalize_observations`` / ``ppo.normalize_rewards``: ``on``, ``off`` or ``auto`` (on for continuous
    actions)."""
    return {"on": True, "off": False}.get(setting, bool(continuous))


@dataclass(frozen=True)
class InputSpec:
    """What x_t holds besides the observation, and whether the observation is normalised (the ``model`` and
    ``ppo`` sections, resolved)."""

    normalize_observations: bool = False
    reward_input: bool = False
    prev_action_input: bool = False
    episode_start_input: bool = False
    episode_start_value: float = 1.0
    obs_clip: float = 10.0


def flat_observations(obs, ref: Tensor) -> Tensor:
    """Observations ``[B, ...]`` (numpy or tensor) -> ``[B, prod(...)]`` in ``ref``'s dtype and device; 8-bit
    pixels are scaled to [0, 1]."""
    x = torch.as_tensor(np.ascontiguousarray(obs))
    pixels = x.dtype == torch.uint8
    x = x.reshape(x.shape[0], -1).to(device=ref.device, dtype=ref.dtype)
    return x / 255.0 if pixels else x


def network_input(net: PPONet, spec: InputSpec, obs: Tensor, prev_reward: Tensor, prev_action: Tensor,
                  reset: Tensor, update_stats: bool = False) -> Tensor:
    """x_t = [normalised obs, previous reward, previous action, episode-start flag] (the previous ones zero at a
    reset; the flag, with ``episode_start_input``, ``episode_start_value`` there). ``update_stats``: merge ``obs``
    into the observation normaliser first (training rollouts only)."""
    if spec.normalize_observations:
        if update_stats:
            net.obs_rms.update(obs)
        obs = net.obs_rms.normalize(obs, spec.obs_clip)
    return core_input(obs, prev_reward, prev_action, reward_input=spec.reward_input,
                      prev_action_input=spec.prev_action_input, action_dim=net.action_dim,
                      discrete=net.action_kind == "discrete", keep=(~reset).to(obs.dtype),
                      first=reset if spec.episode_start_input else None, first_value=spec.episode_start_value)

# --------------------------------------------------------------------------------------------------
# Rollout storage and collection
# --------------------------------------------------------------------------------------------------

@dataclass
class Rollout:
    """L steps of B envs, time-major. Step t: input x[t] (reset[t]: an episode starts at t), action[t],
    reward[t] and done[t] (the episode ended with this transition), and the core state *before* step t
    (``states[k][t]``, with the RTRL sensitivities)."""

    x: Tensor                    # [L, B, D] network inputs
    reset: Tensor                # [L, B] bool
    states: Dict[str, Tensor]    # k -> [L, B, *spec]: core state (+ sensitivities) before step t
    action: Tensor               # [L, B] int64 | [L, B, A]
    log_prob: Tensor             # [L, B] log pi_old(a_t | history)
    value: Tensor                # [L, B] V(history up to t) (refreshed by rerun_rollout)
    reward: Tensor               # [L, B] (scaled when rewards are normalised)
    done: Tensor                 # [L, B] bool: the episode ended with step t (terminated or truncated)
    truncated: Tensor            # [L, B] bool: ... by a time limit, with its final observation known
    final_x: Tensor              # [L, B, D] input built from the final observation where truncated
    final_value: Tensor          # [L, B] V(final observation) where truncated, else 0
    next_x: Tensor               # [B, D] the input after the last step (bootstrap)
    next_reset: Tensor           # [B] bool
    final_state: Dict[str, Tensor]  # k -> [B, *spec]: core state after the last step
    bootstrap_value: Tensor      # [B]
    advantages: Optional[Tensor] = None
    returns: Optional[Tensor] = None
    episodes: List[Tuple[float, int]] = field(default_factory=list)
    successes: List[float] = field(default_factory=list)  # info["success"] of the ended episodes that report one

    @property
    def length(self) -> int:
        return self.x.shape[0]

    @property
    def num_envs(self) -> int:
        return self.x.shape[1]


class RolloutCollector:
    """Steps a VecEnv with the current policy for ``rollout_length`` steps per env and stores, for every
    step, the core state with its RTRL sensitivities (one core step per env step, sensitivities on).

    It carries the core state, the last observation and the reset flags between rollouts; after
    ``restart()`` (or on creation) every env starts a new episode from a zero state.
    """

    def __init__(self, net: PPONet, venv, cfg, *, generator: Optional[torch.Generator] = None,
                 reward_input: bool = False, prev_action_input: bool = False, obs_clip: float = 10.0,
                 reward_clip: float = 10.0, episode_start_input: bool = False, episode_start_value: float = 1.0):
        """``cfg``: the ``ppo`` config section (rollout_length, discount, normalize_observations and
        normalize_rewards: ``auto`` is on for continuous actions). ``reward_input``, ``prev_action_input``:
        the previous reward and action are part of the network input (``model`` section);
        ``episode_start_input``: so is a flag, ``episode_start_value`` on the first frame of an episode."""
        self.net, self.venv = net, venv
        self.L, self.B = int(cfg.rollout_length), int(venv.num_envs)
        self.discount = float(cfg.discount)
        self.generator = generator
        continuous = action_spec(venv)[0] == "continuous"
        self.normalize_observations = resolve_normalization(cfg.normalize_observations, continuous)
        self.normalize_rewards = resolve_normalization(cfg.normalize_rewards, continuous)
        self.inputs = InputSpec(normalize_observations=self.normalize_observations, reward_input=bool(reward_input),
                                prev_action_input=bool(prev_action_input),
                                episode_start_input=bool(episode_start_input),
                                episode_start_value=float(episode_start_value), obs_clip=float(obs_clip))
        self.reward_clip = float(reward_clip)
        kind, dim = action_spec(venv)
        if (kind, dim) != (net.action_kind, net.action_dim):
            raise ValueError(f"the env has {kind} actions of size {dim}, the network {net.action_kind} of "
                             f"size {net.action_dim}")
        self.obs_size = int(np.prod(venv.observation_shape))  # observations are flattened
        self.restart()

    @property
    def _ref(self) -> Tensor:
        return next(self.net.parameters())

    def restart(self) -> None:
        ref = self._ref
        self.state = self.net.initial_state(self.B, device=ref.device)
        self.obs = self._obs(self.venv.reset())
        self.reset = torch.ones(self.B, dtype=torch.bool, device=ref.device)
        self.prev_reward = torch.zeros(self.B, dtype=ref.dtype, device=ref.device)
        shape = (self.B,) if self.net.action_kind == "discrete" else (self.B, self.net.action_dim)
        self.prev_action = torch.zeros(shape, dtype=torch.int64 if self.net.action_kind == "discrete" else ref.dtype,
                                       device=ref.device)
        self.discounted_return = torch.zeros(self.B, dtype=torch.float64)

    def _obs(self, obs: np.ndarray) -> Tensor:
        return flat_observations(obs, self._ref)

    def make_input(self, obs: Tensor, prev_reward: Tensor, prev_action: Tensor, reset: Tensor,
                   update_stats: bool = True) -> Tensor:
        """x_t (:func:`network_input`); ``update_stats``: the observation normaliser takes ``obs`` in first."""
        return network_input(self.net, self.inputs, obs, prev_reward, prev_action, reset, update_stats)

    def _scale_rewards(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Divide by the running std of the discounted return (as Gymnasium's NormalizeReward)."""
        if not self.normalize_rewards:
            return reward
        self.discounted_return = self.discounted_return * self.discount + torch.as_tensor(reward, dtype=torch.float64)
        self.net.ret_rms.update(self.discounted_return.unsqueeze(-1))
        self.discounted_return[torch.as_tensor(done)] = 0.0
        scaled = reward / math.sqrt(float(self.net.ret_rms.var) + 1e-8)
        return np.clip(scaled, -self.reward_clip, self.reward_clip)

    @torch.no_grad()
    def collect(self) -> Rollout:
        net, L, B = self.net, self.L, self.B
        ref = self._ref
        dev, dt = ref.device, ref.dtype
        spec = net.core.state_spec(sensitivities=True)
        states = {k: torch.empty((L, B) + tuple(spec[k]), dtype=dt, device=dev) for k in self.state}
        D = net.input_size
        x_all = torch.empty((L, B, D), dtype=dt, device=dev)
        final_x = torch.zeros((L, B, D), dtype=dt, device=dev)
        final_value = torch.zeros((L, B), dtype=dt, device=dev)
        reset_all = torch.empty((L, B), dtype=torch.bool, device=dev)
        act_shape = (L, B) if net.action_kind == "discrete" else (L, B, net.action_dim)
        actions = torch.empty(act_shape, dtype=self.prev_action.dtype, device=dev)
        log_prob = torch.empty((L, B), dtype=dt, device=dev)
        value = torch.empty((L, B), dtype=dt, device=dev)
        reward = torch.empty((L, B), dtype=dt, device=dev)
        done_all = torch.empty((L, B), dtype=torch.bool, device=dev)
        trunc_all = torch.zeros((L, B), dtype=torch.bool, device=dev)
        episodes: List[Tuple[float, int]] = []
        successes: List[float] = []
        for t in range(L):
            for k, v in self.state.items():
                states[k][t] = v
            x = self.make_input(self.obs, self.prev_reward, self.prev_action, self.reset)
            x_all[t], reset_all[t] = x, self.reset
            out, self.state = net(x[None], self.state, self.reset[None])  # one step, traces on
            policy = out["policy"][0]
            a = net.sample(policy, self.generator)
            actions[t], log_prob[t], value[t] = a, net.log_prob(policy, a), out["value"][0]
            a_env = a.cpu().numpy() if net.action_kind == "discrete" else a.cpu().to(torch.float64).numpy()
            obs, r, done, info = self.venv.step(a_env)
            r = np.asarray(r, dtype=np.float64)
            done = np.asarray(done, dtype=bool)
            ended = ~np.isnan(info["episode_return"])
            for b in np.flatnonzero(ended):
                episodes.append((float(info["episode_return"][b]), int(info["episode_length"][b])))
            success = episode_success(info, ended, B)
            successes.extend(success[~torch.isnan(success)].tolist())
            reward[t] = torch.as_tensor(self._scale_rewards(r, done), device=dev)
            done_t = torch.as_tensor(done, device=dev)
            done_all[t] = done_t
            trunc = np.asarray(info.get("truncated", np.zeros(B, bool)), dtype=bool) & done
            if trunc.any() and "final_observation" in info:
                trunc_t = torch.as_tensor(trunc, device=dev)
                fx = self.make_input(self._obs(info["final_observation"]), torch.as_tensor(r, device=dev).to(dt),
                                     a, torch.zeros(B, dtype=torch.bool, device=dev), update_stats=False)
                fout, _ = net(fx[None], self.state, torch.zeros(1, B, dtype=torch.bool, device=dev),
                              return_state=False, sensitivities=False)
                final_x[t] = torch.where(trunc_t[:, None], fx, torch.zeros_like(fx))
                final_value[t] = torch.where(trunc_t, fout["value"][0], torch.zeros_like(fout["value"][0]))
                trunc_all[t] = trunc_t
            self.obs = self._obs(obs)
            self.reset = done_t
            self.prev_reward = torch.as_tensor(r, device=dev).to(dt)
            self.prev_action = a
        next_x = self.make_input(self.obs, self.prev_reward, self.prev_action, self.reset, update_stats=False)
        out, _ = net(next_x[None], self.state, self.reset[None], return_state=False, sensitivities=False)
        return Rollout(x=x_all, reset=reset_all, states=states, action=actions, log_prob=log_prob, value=value,
                       reward=reward, done=done_all, truncated=trunc_all, final_x=final_x, final_value=final_value,
                       next_x=next_x, next_reset=self.reset.clone(),
                       final_state={k: v.clone() for k, v in self.state.items()},
                       bootstrap_value=out["value"][0], episodes=episodes, successes=successes)


# --------------------------------------------------------------------------------------------------
# Re-running a rollout (the optional refresh of Algorithm 1)
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def rerun_rollout(net: PPONet, ro: Rollout) -> Dict:
    """Re-run the network over a stored rollout with the current weights, from the rollout's stored
    initial state (``ro.states[k][0]``), one step at a time with sensitivities on: returns the fresh
    ``states`` ([L, B, ...] before each step), ``value`` [L, B], ``final_value`` (V(final observation)
    where truncated), ``final_state`` and ``bootstrap_value``."""
    L, B = ro.x.shape[:2]
    state = {k: v[0].clone() for k, v in ro.states.items()}
    states = {k: torch.empty_like(v) for k, v in ro.states.items()}
    value = torch.empty_like(ro.value)
    final_value = torch.zeros_like(ro.final_value)
    no_reset = torch.zeros(1, B, dtype=torch.bool, device=ro.x.device)
    for t in range(L):
        for k, v in state.items():
            states[k][t] = v
        out, state = net(ro.x[t][None], state, ro.reset[t][None])
        value[t] = out["value"][0]
        if ro.truncated[t].any():
            fout, _ = net(ro.final_x[t][None], state, no_reset, return_state=False, sensitivities=False)
            final_value[t] = torch.where(ro.truncated[t], fout["value"][0], torch.zeros_like(fout["value"][0]))
    out, _ = net(ro.next_x[None], state, ro.next_reset[None], return_state=False, sensitivities=False)
    return {"states": states, "value": value, "final_value": final_value, "final_state": state,
            "bootstrap_value": out["value"][0]}


def compute_advantages(ro: Rollout, discount: float, gae_lambda: float) -> None:
    """GAE (``losses.gae_advantages``) with gamma * V(final observation) added to the reward of steps cut
    by a time limit; sets ``ro.advantages`` and ``ro.returns`` (= advantages + values)."""
    rewards = ro.reward + discount * ro.final_value * ro.truncated.to(ro.reward.dtype)
    ro.advantages = gae_advantages(rewards, ro.value, ro.done, ro.bootstrap_value, discount, gae_lambda)
    ro.returns = ro.advantages + ro.value
