"""The action distributions of the agents, one home for their formulas: log-probabilities of taken
actions, entropies and sampling. Used by the IMPALA actor, V-trace and the IMPALA/A2C losses
(categorical over logits), the PPO network (categorical, or a diagonal Gaussian with a state-independent
log-std) and ``r2ac.load(...).act``.

Categorical over logits l [..., A]:

    log pi(a) = l_a - log sum_b exp(l_b),      H = - sum_a pi(a) log pi(a)

Diagonal Gaussian with mean mu [..., A] and log-std s [A]:

    log pi(a) = sum_i ( -(a_i - mu_i)^2 / (2 exp(2 s_i)) - s_i - log(2 pi) / 2 )
    H         = sum_i ( 1/2 + log(2 pi) / 2 + s_i )
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["categorical_entropy", "categorical_log_prob", "categorical_sample", "gaussian_entropy",
           "gaussian_log_prob", "gaussian_sample"]

_LOG_2PI = math.log(2 * math.pi)


def categorical_log_prob(logits: Tensor, actions: Tensor) -> Tensor:
    """log pi(a_t | x_t) of the taken actions: logits [..., A] unnormalised, actions [...] integer indices.
    Returns [...] (differentiable with respect to ``logits``)."""
    if logits.dim() < 1 or tuple(logits.shape[:-1]) != tuple(actions.shape):
        raise ValueError(
            f"categorical_log_prob: logits shape {tuple(logits.shape)} must be actions shape "
            f"{tuple(actions.shape)} plus one trailing action dimension"
        )
    if actions.dtype.is_floating_point or actions.dtype == torch.bool:
        raise TypeError(f"categorical_log_prob: actions must be an integer tensor, got {actions.dtype}")
    log_pi = F.log_softmax(logits, dim=-1)
    return log_pi.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def categorical_entropy(logits: Tensor) -> Tensor:
    """Per-step entropy H(pi(.|x_t)) = - sum_a pi(a|x_t) log pi(a|x_t). [..., A] -> [...]."""
    log_pi = F.log_softmax(logits, dim=-1)
    return -(log_pi.exp() * log_pi).sum(dim=-1)


@torch.no_grad()
def categorical_kl(logits_p: Tensor, logits_q: Tensor) -> Tensor:
    """KL(p || q) of the categorical distributions given by logits [..., A], per leading index [...]."""
    log_p = torch.log_softmax(logits_p, dim=-1)
    log_q = torch.log_softmax(logits_q, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def categorical_sample(logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
    """Actions [...] (int64, on the logits' device) drawn from softmax(logits [..., A]) (in float32). With a
    ``generator``, the draw happens on the generator's device: a CPU generator gives the same actions whatever
    device the logits are on, and its state resumes on any machine."""
    probs = torch.softmax(logits.reshape(-1, logits.shape[-1]).float(), -1)
    if generator is not None:
        probs = probs.to(generator.device)
    return torch.multinomial(probs, 1, generator=generator).reshape(logits.shape[:-1]).to(logits.device)


def gaussian_log_prob(mean: Tensor, log_std: Tensor, actions: Tensor) -> Tensor:
    """log pi(a) of a diagonal Gaussian: mean [..., A], log_std [A], actions [..., A] -> [...]."""
    log_std = log_std.to(mean.dtype)
    z = (actions.to(mean.dtype) - mean) * torch.exp(-log_std)
    return (-0.5 * z * z - log_std - 0.5 * _LOG_2PI).sum(-1)


def gaussian_entropy(mean: Tensor, log_std: Tensor) -> Tensor:
    """Entropy of a diagonal Gaussian (it does not depend on the mean): [..., A] -> [...]."""
    per_dim = 0.5 + 0.5 * _LOG_2PI + log_std.to(mean.dtype)
    return per_dim.sum().expand(mean.shape[:-1])


@torch.no_grad()
def gaussian_sample(mean: Tensor, log_std: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
    """Actions [..., A] (unclipped) drawn from N(mean, exp(log_std)^2); with a ``generator``, the noise is drawn
    on its device (as in :func:`categorical_sample`)."""
    where = generator.device if generator is not None else mean.device
    noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=where).to(mean.device)
    return mean + torch.exp(log_std.to(mean.dtype)) * noise
