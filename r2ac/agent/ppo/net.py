"""The PPO agent's network (Elelimy et al. 2024, "Real-time recurrent learning using trace units in
reinforcement learning", App. G, Fig. 20): observation -> a 64-unit feed-forward layer (tanh) -> the
recurrent core (any core of ``make_core``) -> two separate heads, actor and critic, each two 64-unit tanh
layers and a linear output. Actions: categorical (discrete) or a diagonal Gaussian with a
state-independent learned log-std (continuous; the env maps [-1, 1] onto its bounds, see
``r2ac.envs.continuous``). Plus the running normalisers of observations and returns, and what storing
the per-step core states costs (``trace_memory``).
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from r2ac.agent.distributions import (categorical_entropy, categorical_log_prob, categorical_sample,
                                     gaussian_entropy, gaussian_log_prob, gaussian_sample)
from r2ac.cores import make_core
from r2ac.cores.base import State

__all__ = ["PPONet", "RunningMeanStd", "action_spec", "trace_memory"]

# --------------------------------------------------------------------------------------------------
# Normalisers
# --------------------------------------------------------------------------------------------------

class RunningMeanStd(nn.Module):
    """Running mean and variance of a stream of vectors (float64 buffers, saved in the state dict),
    merged batch by batch with the parallel-variance formula (Chan et al. 1979)."""

    def __init__(self, size: int = 1, epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(float(epsilon), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        x = x.detach().to(self.mean.device, torch.float64).reshape(-1, self.mean.numel())
        n = x.shape[0]
        if n == 0:
            return
        b_mean, b_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = b_mean - self.mean
        m2 = self.var * self.count + b_var * n + delta.pow(2) * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: Tensor, clip: float = 10.0, eps: float = 1e-8) -> Tensor:
        y = (x.to(torch.float64) - self.mean.to(x.device)) / torch.sqrt(self.var.to(x.device) + eps)
        return y.clamp(-clip, clip).to(x.dtype)


# --------------------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------------------

def _layer(d_in: int, d_out: int, gain: float) -> nn.Linear:
    lin = nn.Linear(d_in, d_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


def _mlp(d_in: int, hidden: Sequence[int], d_out: Optional[int], out_gain: float) -> nn.Sequential:
    layers: List[nn.Module] = []
    for h in hidden:
        layers += [_layer(d_in, h, math.sqrt(2)), nn.Tanh()]
        d_in = h
    if d_out is not None:
        layers.append(_layer(d_in, d_out, out_gain))
    return nn.Sequential(*layers)


def action_spec(venv) -> Tuple[str, int]:
    """``("discrete", num_actions)`` or ``("continuous", action_dim)`` of a VecEnv."""
    kind = getattr(venv, "action_kind", "discrete")
    return (kind, int(venv.action_dim)) if kind == "continuous" else ("discrete", int(venv.num_actions))


class PPONet(nn.Module):
    """Encoder (tanh) -> recurrent core -> separate actor and critic heads (tanh MLPs).

    ``input_size``: features of the network input x_t (the normalised observation, plus the previous
    reward and action where enabled: the collector builds x_t). ``obs_size``: entries of x_t that are the
    observation (the normaliser's size). ``encoder=()`` feeds x_t to the core directly.

    Orthogonal initialisation (gain sqrt 2 for hidden layers, 0.01 for the policy output, 1 for the value
    output; zero biases); the core keeps its own initialisation.
    """

    def __init__(self, input_size: int, action_kind: str, action_dim: int, *, core: str = "rtu",
                 hidden_size: int = 64, learning: str = "rtrl", core_options: Optional[dict] = None,
                 encoder: Sequence[int] = (64,), head_hidden: Sequence[int] = (64, 64),
                 log_std_init: float = 0.0, obs_size: Optional[int] = None):
        super().__init__()
        if action_kind not in ("discrete", "continuous"):
            raise ValueError(f"action_kind must be 'discrete' or 'continuous', got {action_kind!r}")
        if action_dim < 1:
            raise ValueError(f"action_dim must be >= 1, got {action_dim}")
        self.input_size, self.action_kind, self.action_dim = int(input_size), action_kind, int(action_dim)
        self.encoder = _mlp(self.input_size, tuple(encoder), None, 1.0)
        d = tuple(encoder)[-1] if len(encoder) else self.input_size
        self.core = make_core(core, d, hidden_size, learning=learning, **(core_options or {}))
        y = self.core.output_size
        self.actor = _mlp(y, tuple(head_hidden), self.action_dim, 0.01)
        self.critic = _mlp(y, tuple(head_hidden), 1, 1.0)
        if action_kind == "continuous":
            self.log_std = nn.Parameter(torch.full((self.action_dim,), float(log_std_init)))
        self.obs_rms = RunningMeanStd(obs_size or self.input_size)
        self.ret_rms = RunningMeanStd(1)

    # -- state -----------------------------------------------------------------------------------
    def initial_state(self, batch_size: int, device=None, sensitivities: bool = True) -> State:
        return self.core.initial_state(batch_size, device=device, sensitivities=sensitivities)

    # -- forward ---------------------------------------------------------------------------------
    def forward(self, x: Tensor, state: State, reset: Tensor, return_state: bool = True,
                sensitivities: bool = True):
        """x [T, B, input_size], reset [T, B] bool (step t starts an episode). Returns
        ``({"policy": [T, B, A] logits or Gaussian means, "value": [T, B]}, next_state)``."""
        y, state = self.core(self.encoder(x), state, reset, return_state=return_state,
                             sensitivities=sensitivities)
        return {"policy": self.actor(y), "value": self.critic(y).squeeze(-1)}, state

    # -- the action distribution (r2ac.agent.distributions) ---------------------------------------
    def log_prob(self, policy: Tensor, action: Tensor) -> Tensor:
        if self.action_kind == "discrete":
            return categorical_log_prob(policy, action)
        return gaussian_log_prob(policy, self.log_std, action)

    def entropy(self, policy: Tensor) -> Tensor:
        if self.action_kind == "discrete":
            return categorical_entropy(policy)
        return gaussian_entropy(policy, self.log_std)

    @torch.no_grad()
    def sample(self, policy: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """Actions [*, ] (int64) or [*, A] (float, unclipped) drawn from pi(.|policy)."""
        if self.action_kind == "discrete":
            return categorical_sample(policy, generator)
        return gaussian_sample(policy, self.log_std, generator)


def trace_memory(net: PPONet, rollout_length: int, num_envs: int, bytes_per_float: int = 4) -> Dict[str, float]:
    """What storing the per-step core state costs: floats per step (hidden, sensitivities) and the total
    bytes of ``rollout_length * num_envs`` stored states."""
    hidden = sum(math.prod(s) for s in net.core.hidden_spec().values())
    spec = net.core.state_spec(sensitivities=True)
    sens = sum(math.prod(spec[k]) for k in net.core.sensitivity_keys)
    steps = int(rollout_length) * int(num_envs)
    return {"hidden_floats_per_step": float(hidden), "sensitivity_floats_per_step": float(sens),
            "bytes": float(steps * (hidden + sens) * bytes_per_float),
            "sensitivity_bytes": float(steps * sens * bytes_per_float)}
