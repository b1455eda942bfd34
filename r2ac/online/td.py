"""Online TD(lambda) prediction with a recurrent core (Javed et al. 2023, Algorithm 1).

At every step the learner observes x(t) and the cumulant c(t) and predicts y(t) = w . h(t) + b with h(t)
the core's output. With y = y(t-1), y' = y(t) (both under the current weights theta):

    delta = c(t) + gamma y' - y
    z     = lambda gamma z + grad_theta y(t-1)
    theta = theta + alpha delta z          (via Adam on -delta z; beta1 = 0, beta2 = 0.9999, eps = 1e-8)

grad_theta y(t) for the recurrent parameters:

- RTRL cores (``learning="rtrl"``): one step of the core from the carried state (which holds the
  sensitivities) and ``autograd.grad(y(t))``: by identity 1 this is dy(t)/dtheta through the whole past
  (exact while the weights do not change; with learning, the carried sensitivities belong to older
  weights — the usual RTRL online approximation). Cost per step: one core step with transport.
- other cores (``learning="tbptt"``, truncation k): the core is re-run over the last k inputs from the
  detached state at t-k and y(t) backpropagated through them (truncated BPTT; k core steps per step).

Parameters whose gradient is None at a step (the frozen stages of CCN / constructive networks) get no
update and their eligibility is reset to 0.

The error measure is the papers' online return error: the prediction y(t), made before learning from
step t+1, against the true return G(t) = sum_k gamma^k c(t+k+1) computed offline (``run_stream``).
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import Tensor, nn

from r2ac.cores.base import RecurrentCore
from r2ac.tasks.trace import discounted_return


class TDLambda:
    """Online TD(lambda) with a linear head on a recurrent core (see the module doc).

    ``truncation``: required (>= 1) for cores with ``learning="tbptt"``, must be None for RTRL cores.
    ``lr``: Adam step size alpha. ``adam``: False uses plain SGD theta += lr * delta * z instead.
    The head starts with PyTorch's default Linear initialisation and bias 0 (``zero_head``: w = 0 too).
    """

    def __init__(self, core: RecurrentCore, gamma: float = 0.9, lam: float = 0.99, lr: float = 1e-3,
                 truncation: Optional[int] = None, betas=(0.0, 0.9999), eps: float = 1e-8, adam: bool = True,
                 zero_head: bool = False):
        if not 0 <= gamma < 1 or not 0 <= lam <= 1:
            raise ValueError(f"need 0 <= gamma < 1 and 0 <= lambda <= 1, got {gamma}, {lam}")
        self.rtrl = core.learning == "rtrl"
        if self.rtrl and truncation is not None:
            raise ValueError("an RTRL core needs no truncation (give truncation=None)")
        if not self.rtrl and (not isinstance(truncation, int) or truncation < 1):
            raise ValueError(f"a core with learning={core.learning!r} needs truncation >= 1, got {truncation!r}")
        self.core, self.gamma, self.lam, self.truncation = core, float(gamma), float(lam), truncation
        ref = next(core.parameters())
        self.dtype, self.device = ref.dtype, ref.device
        self.head = nn.Linear(core.output_size, 1).to(dtype=self.dtype, device=self.device)
        with torch.no_grad():
            self.head.bias.zero_()
            if zero_head:  # predict 0 at the start (no gradient reaches the core until w moves)
                self.head.weight.zero_()
        self.named = [("core." + n, p) for n, p in core.named_parameters()] + \
                     [("head." + n, p) for n, p in self.head.named_parameters()]
        self.params = [p for _, p in self.named]
        self.opt = (torch.optim.Adam(self.params, lr=lr, betas=betas, eps=eps, foreach=True) if adam
                    else torch.optim.SGD(self.params, lr=lr))
        self.z = [torch.zeros_like(p) for p in self.params]
        self.state = core.initial_state(1)
        self._reset1 = torch.zeros(1, 1, dtype=torch.bool, device=self.device)
        self._buf: List[Tensor] = []
        self._y: Optional[float] = None
        self._g = None
        self.steps = 0

    @property
    def eligibility(self) -> Dict[str, Tensor]:
        return {n: z for (n, _), z in zip(self.named, self.z)}

    def _features(self, x: Tensor) -> Tensor:
        if self.rtrl:
            h, self.state = self.core(x, self.state, self._reset1)
            return h[-1, 0]
        self._buf.append(x)
        if len(self._buf) > self.truncation:
            with torch.no_grad():  # move the window's start state one step on
                _, self.state = self.core(self._buf.pop(0), self.state, self._reset1)
        xs = torch.cat(self._buf, 0)
        reset = torch.zeros(xs.shape[0], 1, dtype=torch.bool, device=self.device)
        h, _ = self.core(xs, self.state, reset, return_state=False)
        return h[-1, 0]

    def predict(self, x) -> tuple:
        """One step of the core on x(t): (y(t) as a float, dy(t)/dtheta per parameter or None)."""
        x = torch.as_tensor(x, dtype=self.dtype, device=self.device).reshape(1, 1, -1)
        y = self.head(self._features(x)).squeeze()
        grads = torch.autograd.grad(y, self.params, allow_unused=True)
        return float(y.detach()), grads

    def step(self, x, c: float) -> float:
        """Observe x(t) and c(t), learn from the transition, return y(t) (made before learning from
        step t+1: the prediction the online error is measured on)."""
        y_new, g_new = self.predict(x)
        if self._y is not None:
            delta = float(c) + self.gamma * y_new - self._y
            live = [i for i, g in enumerate(self._g) if g is not None]
            if len(live) < len(self.params):  # frozen parameters: no update, eligibility back to 0
                for i, p in enumerate(self.params):
                    if self._g[i] is None:
                        self.z[i].zero_()
                        p.grad = None
            zs = [self.z[i] for i in live]
            torch._foreach_mul_(zs, self.lam * self.gamma)
            torch._foreach_add_(zs, [self._g[i] for i in live])
            for i, z in zip(live, zs):
                self.params[i].grad = z * (-delta)
            self.opt.step()
            self.core.project_()
        self._y, self._g = y_new, g_new
        self.steps += 1
        return y_new


def run_stream(learner: TDLambda, x: np.ndarray, cumulant: np.ndarray, gamma: Optional[float] = None,
               bins: int = 20, time_limit: Optional[float] = None) -> Dict:
    """Run the learner over a stream (x [T, D], cumulant [T]); return the online return errors:
    ``msre`` (mean over the stream of (y(t) - G(t))^2), ``msre_last`` (over the last 10 %), ``curve`` (the
    MSRE per bin of T / ``bins`` steps), ``predictions``, ``returns`` and ``seconds``."""
    gamma = learner.gamma if gamma is None else gamma
    T = len(cumulant)
    G = discounted_return(cumulant, gamma)
    ys = np.zeros(T)
    t0 = time.perf_counter()
    n = T
    for t in range(T):
        ys[t] = learner.step(x[t], cumulant[t])
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            n = t + 1
            break
    seconds = time.perf_counter() - t0
    ys, G = ys[:n - 1], G[:n - 1]  # the last prediction's return is cut by the stream's end
    err = (ys - G) ** 2
    edges = np.linspace(0, len(err), bins + 1).astype(int)
    curve = [float(err[a:b].mean()) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    tail = max(1, len(err) // 10)
    return {"msre": float(err.mean()), "msre_last": float(err[-tail:].mean()), "curve": curve,
            "predictions": ys, "returns": G, "steps": n, "seconds": seconds,
            "return_var": float(G.var()), "return_var_last": float(G[-tail:].var())}
