"""A trained agent for use outside r2ac: ``r2ac.load(run_dir)`` returns a :class:`Policy`.

    import r2ac
    policy = r2ac.load("runs/quickstart")                 # newest checkpoint; checkpoint=STEP for another
    env = r2ac.envs.make_config_env(policy.config.env, 4, seed=0)
    obs, state = env.reset(), policy.initial_state(4)
    reward = done = None
    while True:
        action, state = policy.act(obs, state, reward=reward, done=done)
        obs, reward, done, info = env.step(action)

``act`` takes a batch ``[B, *observation_shape]`` (or one observation, then returns one action) and the
state the previous call returned. The network's inputs besides the observation are the reward received on
arriving at ``obs`` and whether ``obs`` starts a new episode (``done`` of the step that produced it, with
same-step autoreset): pass them as ``reward=`` and ``done=`` (agents trained with ``model.reward_input``
use the reward). The state carries the core's recurrent state and the previous action; a ``done`` row
starts that env's memory afresh.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional, Tuple

import numpy as np
import torch

from r2ac.agent.distributions import categorical_sample
from r2ac.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, load_latest_checkpoint
from r2ac.config import Config, config_from_dict, upgrade_resolved

__all__ = ["PPOPolicy", "Policy", "PolicyState", "initial_net", "load", "load_checkpoint_for", "run_dir_of_path"]


@dataclasses.dataclass
class PolicyState:
    """What :meth:`Policy.act` carries between calls (one row per env)."""

    core: Any                  # the recurrent core's state (no RTRL sensitivities: acting needs none)
    action: torch.Tensor       # [B] int64 (or [B, A] float: a PPO agent's Box actions), the previous action
    first: torch.Tensor        # [B] bool, rows whose next observation starts an episode


def run_dir_of_path(path: str) -> str:
    """The run directory of a run directory or of a checkpoint file in its ``checkpoints/``."""
    if os.path.isdir(path):
        return path
    return os.path.dirname(os.path.dirname(os.path.abspath(path)))


def load_checkpoint_for(path: str, checkpoint: Optional[int] = None) -> dict:
    """The checkpoint of a run directory (its newest, or the one at agent step ``checkpoint``) or a
    checkpoint file. Problems raise FileNotFoundError / CheckpointError with one line saying what to do."""
    if os.path.isfile(path):
        if checkpoint is not None:
            raise ValueError(f"{path} is a checkpoint file; --checkpoint picks one of a run directory's")
        return load_checkpoint(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such run directory or checkpoint file")
    if checkpoint is None:
        ckpt = load_latest_checkpoint(path)
        if ckpt is None:
            raise FileNotFoundError(f"{path} has no checkpoints (expected {path}/checkpoints/ckpt_*.pt)")
        return ckpt
    found = dict(list_checkpoints(path))
    if int(checkpoint) not in found:
        have = ", ".join(str(s) for s in sorted(found)) or "none"
        raise FileNotFoundError(f"{path} has no checkpoint at step {checkpoint} (checkpoints kept: {have}; "
                                "checkpoint.keep sets how many are kept)")
    return load_checkpoint(found[int(checkpoint)])


def _config_of(ckpt: dict, where: str) -> Config:
    if not isinstance(ckpt.get("config"), dict):
        raise CheckpointError(f"{where} holds no run config; it was not written by r2ac train")
    return config_from_dict(upgrade_resolved(ckpt["config"]))


class Policy:
    """A trained IMPALA/A2C agent: ``act(obs, state) -> (actions, state)`` on CPU (or ``device``); an
    ``algo: ppo`` agent is a :class:`PPOPolicy`."""

    def __init__(self, net, config: Config, *, step: int = 0, checkpoint: str = "", greedy: bool = False,
                 seed: int = 0, device: str = "cpu"):
        self.net = net.to(device).eval()
        self.config = config
        self.step = int(step)
        self.checkpoint = checkpoint
        self.greedy = bool(greedy)
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed))
        self.num_actions = int(net.num_actions if hasattr(net, "num_actions") else net.action_dim)
        self.observation_shape = tuple(net.observation_shape) if hasattr(net, "observation_shape") else None

    def initial_state(self, batch_size: int = 1) -> PolicyState:
        """The state before the first observation of ``batch_size`` envs."""
        core = self.net.initial_state(int(batch_size), device=self.device, sensitivities=False)
        return PolicyState(core, torch.zeros(batch_size, dtype=torch.int64, device=self.device),
                           torch.ones(batch_size, dtype=torch.bool, device=self.device))

    def _step_inputs(self, obs, state: Optional[PolicyState], reward, done, reward_dtype=np.float32):
        """``obs`` as a batch, whether it was one observation, the state (initial when None, checked against the
        batch), the rewards ``[B]`` and the episode-start flags ``[B]`` of this step."""
        x = torch.as_tensor(np.ascontiguousarray(obs))
        single = self.observation_shape is not None and tuple(x.shape) == self.observation_shape
        if single:
            x = x.unsqueeze(0)
        B = x.shape[0]
        if state is None:
            state = self.initial_state(B)
        if state.first.shape[0] != B:
            raise ValueError(f"the state holds {state.first.shape[0]} envs but obs has {B}; "
                             f"use policy.initial_state({B})")
        r = torch.zeros(B) if reward is None else torch.as_tensor(np.asarray(reward, dtype=reward_dtype)).reshape(B)
        first = state.first.clone()
        if done is not None:
            first |= torch.as_tensor(np.asarray(done, dtype=bool)).reshape(B).to(self.device)
        return x, single, state, r, first

    def act_with_logits(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
                        greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState, torch.Tensor]:
        """:meth:`act` that also returns the policy logits ``[B, num_actions]``."""
        action, new, out = self.act_with_outputs(obs, state, reward=reward, done=done, greedy=greedy)
        return action, new, out["policy_logits"]

    @torch.no_grad()
    def act_with_outputs(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
                         greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState, dict]:
        """:meth:`act` that also returns the network's outputs for ``obs``: ``policy_logits``
        ``[B, num_actions]``, ``baseline`` ``[B]`` (the value estimate) and ``core_output`` ``[B, N]`` (what the heads
        read), float32 (one observation: ``[1, ...]``)."""
        x, single, state, r, first = self._step_inputs(obs, state, reward, done)
        B = x.shape[0]
        x = x.to(self.device)
        feats = self.net.features(x.unsqueeze(0))[0]
        inputs = {"features": feats.unsqueeze(0), "reward": r.to(self.device).unsqueeze(0),
                  "action": state.action.unsqueeze(0), "done": first.unsqueeze(0)}
        out, core = self.net(inputs, state.core, sensitivities=False)
        out = {k: v[0].float() for k, v in out.items()}
        logits = out["policy_logits"]
        if self.greedy if greedy is None else greedy:
            action = logits.argmax(-1)
        else:
            action = categorical_sample(logits, self.generator)
        new = PolicyState(core, action, torch.zeros(B, dtype=torch.bool, device=self.device))
        a = action.cpu().numpy()
        return (a[0] if single else a), new, out

    def act(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
            greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState]:
        """Actions for ``obs`` (``[B, *observation_shape]``, or one observation) and the next state.
        ``reward``/``done``: what the env step that produced ``obs`` returned (None at the start)."""
        action, new, _ = self.act_with_logits(obs, state, reward=reward, done=done, greedy=greedy)
        return action, new

    def __repr__(self) -> str:
        c = self.config
        return (f"Policy({c.env.id}, {c.model.core}/{c.model.learning}, step={self.step}, "
                f"{'greedy' if self.greedy else 'sampled'} actions)")


class PPOPolicy(Policy):
    """A trained ``algo: ppo`` agent (``r2ac.agent.ppo``) behind :class:`Policy`'s interface. Its input is built
    as in training (:func:`r2ac.agent.ppo.rollout.network_input`: the observation normalised by the running
    statistics saved with the weights, which acting leaves as they are, and the previous reward and action
    where the run fed them). Discrete actions are int64 ``[B]``; Box actions float64 ``[B, A]`` in the
    network's units (the env maps [-1, 1] onto its bounds), greedy ones the Gaussian's mean."""

    def __init__(self, net, config: Config, *, inputs, **kwargs):
        super().__init__(net, config, **kwargs)
        self.inputs = inputs
        self.continuous = net.action_kind == "continuous"

    def initial_state(self, batch_size: int = 1) -> PolicyState:
        B = int(batch_size)
        core = self.net.initial_state(B, device=self.device, sensitivities=False)
        ref = next(self.net.parameters())
        action = (torch.zeros(B, self.net.action_dim, dtype=ref.dtype, device=self.device) if self.continuous
                  else torch.zeros(B, dtype=torch.int64, device=self.device))
        return PolicyState(core, action, torch.ones(B, dtype=torch.bool, device=self.device))

    @torch.no_grad()
    def act_with_outputs(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
                         greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState, dict]:
        """:meth:`act` that also returns the network's outputs for ``obs``: ``baseline`` ``[B]`` (the value) and
        ``policy_logits`` ``[B, num_actions]`` (discrete actions) or ``action_mean`` and ``action_std``
        ``[B, A]`` (Box actions)."""
        from r2ac.agent.ppo.rollout import flat_observations, network_input

        x, single, state, r, first = self._step_inputs(obs, state, reward, done, np.float64)
        B = x.shape[0]
        ref = next(self.net.parameters())
        xt = network_input(self.net, self.inputs, flat_observations(x, ref), r.to(self.device, ref.dtype),
                           state.action, first)
        out, core = self.net(xt[None], state.core, first[None], sensitivities=False)
        policy = out["policy"][0]
        outputs = {"baseline": out["value"][0].float()}
        if self.continuous:
            outputs.update(action_mean=policy.float(), action_std=self.net.log_std.exp().expand_as(policy).float())
        else:
            outputs["policy_logits"] = policy.float()
        if self.greedy if greedy is None else greedy:
            action = policy.clone() if self.continuous else policy.argmax(-1)
        else:
            action = self.net.sample(policy, self.generator)
        new = PolicyState(core, action, torch.zeros(B, dtype=torch.bool, device=self.device))
        a = action.cpu().to(torch.float64).numpy() if self.continuous else action.cpu().numpy()
        return (a[0] if single else a), new, outputs

    def act_with_logits(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
                        greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState, torch.Tensor]:
        """:meth:`act` that also returns the policy logits (discrete actions) or the Gaussian's means (Box)."""
        action, new, out = self.act_with_outputs(obs, state, reward=reward, done=done, greedy=greedy)
        return action, new, out["action_mean" if self.continuous else "policy_logits"]

    def __repr__(self) -> str:
        c = self.config
        return (f"PPOPolicy({c.env.id}, {c.model.core}/{c.model.learning}, step={self.step}, "
                f"{'greedy' if self.greedy else 'sampled'} actions)")


def ppo_policy_from_checkpoint(ckpt: dict, cfg: Config, *, greedy: bool = False, seed: int = 0,
                               device: str = "cpu") -> PPOPolicy:
    """A :class:`PPOPolicy` from a loaded checkpoint of an ``algo: ppo`` run (its env is built once for its
    shapes and action kind)."""
    from r2ac.agent.ppo import action_spec
    from r2ac.envs import make_config_env
    from r2ac.runtime.ppo import build_ppo_net, ppo_input_spec

    where = ckpt.get("path", "the checkpoint")
    venv = make_config_env(cfg.env, 1, cfg.seed)
    try:
        net = build_ppo_net(cfg, venv)
        observation_shape, kind = tuple(venv.observation_shape), action_spec(venv)[0]
    finally:
        venv.close()
    try:
        net.load_state_dict(ckpt["model"])
    except (KeyError, RuntimeError) as e:
        raise CheckpointError(f"{where}: its weights do not fit the PPO network of its config "
                              f"({str(e).splitlines()[0]})") from None
    net.observation_shape = observation_shape
    return PPOPolicy(net, cfg, inputs=ppo_input_spec(cfg, kind == "continuous"),
                     step=int(ckpt.get("counters", {}).get("step", 0)), checkpoint=str(where), greedy=greedy,
                     seed=seed, device=device)


def policy_from_checkpoint(ckpt: dict, cfg: Optional[Config] = None, *, greedy: bool = False, seed: int = 0,
                           device: str = "cpu", observation_shape=None, num_actions=None) -> Policy:
    """A :class:`Policy` from a loaded checkpoint (the env is built once to learn its shapes unless they
    are given)."""
    from r2ac.runtime import build_net

    where = ckpt.get("path", "the checkpoint")
    cfg = cfg or _config_of(ckpt, where)
    if cfg.algo == "ppo":
        return ppo_policy_from_checkpoint(ckpt, cfg, greedy=greedy, seed=seed, device=device)
    if observation_shape is None or num_actions is None:
        from r2ac.envs import make_config_env

        venv = make_config_env(cfg.env, 1, cfg.seed)
        observation_shape, num_actions = venv.observation_shape, venv.num_actions
        venv.close()
    net = build_net(cfg, observation_shape, num_actions, load_stem=False)
    try:
        net.load_state_dict(ckpt["model"])
    except (KeyError, RuntimeError) as e:
        raise CheckpointError(f"{where}: its weights do not fit the network of its config "
                              f"({str(e).splitlines()[0]})") from None
    net.observation_shape = tuple(observation_shape)
    return Policy(net, cfg, step=int(ckpt.get("counters", {}).get("step", 0)), checkpoint=str(where),
                  greedy=greedy, seed=seed, device=device)


def initial_net(cfg: Config, net):
    """The network a run of ``cfg`` started from, built like ``net``: a run seeds torch with ``cfg.seed`` and
    builds its network before anything else draws from torch's RNG (tests/bench/test_cue_memory.py checks it
    on a real run)."""
    import torch

    from r2ac.runtime import resolve_model

    torch.manual_seed(cfg.seed)
    return type(net).from_config(resolve_model(cfg), net.observation_shape, net.num_actions,
                                 reward_clip=cfg.learner.reward_clip)


def load(path: str, checkpoint: Optional[int] = None, *, greedy: bool = False, seed: int = 0,
         device: str = "cpu") -> Policy:
    """The trained policy of a run directory (its newest checkpoint, or the one at agent step
    ``checkpoint``) or of a checkpoint file."""
    return policy_from_checkpoint(load_checkpoint_for(os.fspath(path), checkpoint), greedy=greedy, seed=seed,
                                  device=device)
