"""Recurrent Trace Units (RTU) of Elelimy et al. 2024 (Eqs. 2, 4, 23-29) with exact RTRL.

Each of the n units holds two numbers (c1, c2) = the real and imaginary part of a complex number c:

    r = exp(-exp(nu_log)),  theta = exp(theta_log),  lambda = r e^{i theta} = g + i phi,
    gamma = sqrt(1 - r^2)                                   (input normalisation, not learned)
    linear    (Eq. 2):  c(t) = lambda c(t-1) + gamma (W1 x(t) + i W2 x(t));   h(t) = [f(c1); f(c2)]
    nonlinear (Eq. 4):  c(t) = f(lambda c(t-1) + gamma (W1 x(t) + i W2 x(t)))  (f on c1 and c2 apart);
                        h(t) = [c1; c2]

(in real form: c1 = g c1 - phi c2 + gamma W1 x, c2 = g c2 + phi c1 + gamma W2 x). The recurrent parameters
are nu_log, theta_log [n] and W1, W2 [n, d]; the output h has 2n features, c1 of every unit first.

Sensitivities (Eqs. 23-27, App. C; the dgamma/dnu_log term that the paper's Eq. 29 drops is kept):
with p(t) the pre-activation, D(t) = diag(f'(p1), f'(p2)) (the identity in the linear variant) and
R = [[g, -phi], [phi, g]],

    S_p(t) = D(t) [R S_p(t-1) + dR/dp c(t-1) + dgamma/dp (W1 x, W2 x)]        p in {nu_log, theta_log}
    S_W1(t) = D(t) [R S_W1(t-1) + (gamma x, 0)],   S_W2(t) = D(t) [R S_W2(t-1) + (0, gamma x)]
    dlambda/dnu_log = -exp(nu_log) lambda,  dlambda/dtheta_log = i exp(theta_log) lambda,
    dgamma/dnu_log = exp(nu_log) r^2 / gamma,  dgamma/dtheta_log = 0.

In the linear variant dc/dW2 = i dc/dW1 exactly (in complex form both follow S(t) = lambda keep(t) S(t-1)
+ input, with inputs gamma x and i gamma x, from 0 at an episode start), so its state carries dc_dW1 only:
half the sensitivity memory, the bytes an actor ships and the learner's batch. W2's correction in identity
1 contracts the same dc_dW1 with -i dL/dc (``rtrl_carry``'s ``grad_maps``). The nonlinear variant's f'
acts on c1 and c2 apart, which breaks the relation: it carries both.

The learner never runs that recursion: identity 1 (``rtrl_carry``) gives the exact gradient from one
autograd pass. Identity 2 moves the sensitivities to the segment end in closed form:

- linear: the per-step Jacobian is multiplication by the complex number lambda * keep(t), so the decay
  a(s, T) is a complex reverse cumulative product (``decay_weights``) and S_W1(T) = a(t0,T) S_W1(t0) +
  sum_s a(s,T) gamma x(s) is one batched matmul (S_W2 = i S_W1 is not formed).
- nonlinear: the Jacobian J(t) = D(t) R keep(t) is a general 2x2 block per unit; the products
  P(s, T) = J(T) ... J(s+1) are built by a loop of elementwise 2x2 products (O(T n), no N*D work), and
  the W sensitivities are one batched matmul of P(s,T) D(s) gamma with x.

Initialisation (the paper does not state one; ours follows the LRU): |lambda| = r uniform by area in the
ring [r_min, r_max] = [0.9, 0.999], theta uniform in (0, max_phase] with max_phase = pi (theta and
-theta give equivalent real networks, so (0, pi] covers every rotation speed), W1, W2 uniform in
+-1/sqrt(d). The paper does not state f either: ReLU by default (it names ReLU as an example).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Tuple

import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from r2ac.cores.base import RecurrentCore
from r2ac.cores.rtrl import decay_weights, rtrl_carry

#: the recurrent parameters in the order of their sensitivities (the linear variant stores no dc_dW2)
RECURRENT = ("nu_log", "theta_log", "W1", "W2")
SENSITIVITY_KEYS = tuple("dc_d" + p for p in RECURRENT)
LINEAR_SENSITIVITY_KEYS = SENSITIVITY_KEYS[:3]

#: activation f and its derivative f'(pre) given (pre, f(pre)); the derivative matches autograd's
ACTIVATIONS: Dict[str, Tuple[Callable[[Tensor], Tensor], Callable[[Tensor, Tensor], Tensor]]] = {
    "relu": (torch.relu, lambda pre, out: (pre > 0).to(pre.dtype)),
    "tanh": (torch.tanh, lambda pre, out: 1 - out * out),
    "sigmoid": (torch.sigmoid, lambda pre, out: out * (1 - out)),
    "gelu": (Fn.gelu, lambda pre, out: 0.5 * (1 + torch.erf(pre / math.sqrt(2)))
             + pre * torch.exp(-0.5 * pre * pre) / math.sqrt(2 * math.pi)),
    "identity": (lambda v: v, lambda pre, out: torch.ones_like(pre)),
}
VARIANTS = ("linear", "nonlinear")


def ring_init(n: int, r_min: float, r_max: float, max_phase: float,
              generator: torch.Generator | None = None) -> Tuple[Tensor, Tensor]:
    """(nu_log, theta_log) for lambda drawn uniformly (by area) in the ring r_min <= |lambda| <= r_max with
    phase in (0, max_phase] (Orvieto et al. 2023, as in Zucchet et al. 2023)."""
    u1 = torch.rand(n, generator=generator)
    u2 = torch.rand(n, generator=generator)
    r = torch.sqrt(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2).clamp_min(1e-6)  # r = 0 has no nu_log
    theta = max_phase * (1.0 - u2)  # in (0, max_phase]: theta_log = log(theta) stays finite
    return torch.log(-torch.log(r)), torch.log(theta)


def check_ring(r_min: float, r_max: float, max_phase: float) -> None:
    if not (0.0 <= r_min <= r_max < 1.0):
        raise ValueError(f"need 0 <= r_min <= r_max < 1, got r_min={r_min!r}, r_max={r_max!r}")
    if r_max == 0.0:
        raise ValueError("r_max must be > 0 (lambda = 0 has no nu_log)")
    if not max_phase > 0:
        raise ValueError(f"max_phase must be > 0, got {max_phase!r}")


def as_complex(pair: Tensor) -> Tensor:
    """[..., 2] real (re, im) -> [...] complex (a differentiable copy; works for any strides)."""
    return torch.complex(pair[..., 0], pair[..., 1])


def as_pair(z: Tensor) -> Tensor:
    """[...] complex -> [..., 2] real, a fresh contiguous tensor (safe to pickle and send)."""
    return torch.view_as_real(z).clone()


def cmul_into(out: Tensor, a: Tensor, s: Tensor) -> Tensor:
    """out += a * s for complex a [B, N] and s in pair layout [B, N, 2, *tail]."""
    extra = (None,) * (s.dim() - 3)
    ar, ai = a.real[(...,) + extra], a.imag[(...,) + extra]
    sr, si = s[:, :, 0], s[:, :, 1]
    out[:, :, 0].addcmul_(ar, sr).addcmul_(ai, si, value=-1)  # in place: no temporaries of s's size
    out[:, :, 1].addcmul_(ar, si).addcmul_(ai, sr)
    return out


def mul_neg_i(p: Tensor) -> Tensor:
    """-i * z for z in pair layout [..., 2], the adjoint of multiplication by i (a swap and a negation)."""
    return torch.stack([p[..., 1], -p[..., 0]], -1)


def _mm2(A: Tensor, Bm: Tensor) -> Tensor:
    """Elementwise-batched 2x2 matrix product A @ B over [..., 2, 2]."""
    return A[..., :, 0, None] * Bm[..., None, 0, :] + A[..., :, 1, None] * Bm[..., None, 1, :]


def _mv2(A: Tensor, v: Tensor) -> Tensor:
    """A @ v for A [..., 2, 2] and v [..., 2]."""
    return (A * v[..., None, :]).sum(-1)


class RTU(RecurrentCore):
    """Recurrent Trace Units (Elelimy et al. 2024). ``hidden_size`` = number of units n; ``output_size`` = 2n.

    Options:

    - ``variant``: ``"linear"`` (Eq. 2, f after the linear recurrence; default) or ``"nonlinear"``
      (Eq. 4, f inside the recurrence).
    - ``activation``: f, one of ``relu`` (default; the paper does not state which f it used), ``tanh``,
      ``sigmoid``, ``gelu``, ``identity``.
    - ``r_min``, ``r_max``, ``max_phase``: initialisation of lambda (ring [0.9, 0.999], phase (0, pi];
      not stated in the paper).

    State: ``c`` [B, n, 2] (c1, c2 of each unit); sensitivities ``dc_dnu_log``, ``dc_dtheta_log``
    [B, n, 2] and ``dc_dW1`` [B, n, 2, d], plus ``dc_dW2`` [B, n, 2, d] in the nonlinear variant only
    (linear: dc/dW2 = i dc/dW1).
    """

    name = "rtu"
    supports_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt", variant: str = "linear",
                 activation: str = "relu", r_min: float = 0.9, r_max: float = 0.999,
                 max_phase: float = math.pi):
        super().__init__(input_size, hidden_size, learning)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}")
        check_ring(r_min, r_max, max_phase)
        self.variant, self.activation = variant, activation
        self.r_min, self.r_max, self.max_phase = float(r_min), float(r_max), float(max_phase)
        n, d = hidden_size, input_size
        self.nu_log = nn.Parameter(torch.empty(n))
        self.theta_log = nn.Parameter(torch.empty(n))
        self.W1 = nn.Parameter(torch.empty(n, d))
        self.W2 = nn.Parameter(torch.empty(n, d))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.input_size)
        nn.init.uniform_(self.W1, -bound, bound)
        nn.init.uniform_(self.W2, -bound, bound)
        nu_log, theta_log = ring_init(self.hidden_size, self.r_min, self.r_max, self.max_phase)
        with torch.no_grad():
            self.nu_log.copy_(nu_log)
            self.theta_log.copy_(theta_log)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", variant={self.variant!r}, activation={self.activation!r}"

    # -- contract ------------------------------------------------------------------------------
    @property
    def output_size(self) -> int:
        return 2 * self.hidden_size

    def hidden_spec(self):
        return {"c": (self.hidden_size, 2)}

    def sensitivity_spec(self):
        n, d = self.hidden_size, self.input_size
        spec = {"dc_dnu_log": (n, 2), "dc_dtheta_log": (n, 2), "dc_dW1": (n, 2, d), "dc_dW2": (n, 2, d)}
        return spec if self.variant == "nonlinear" else {k: spec[k] for k in LINEAR_SENSITIVITY_KEYS}

    def recurrent_parameters(self):
        return [getattr(self, p) for p in RECURRENT]

    def decay(self) -> Tuple[Tensor, Tensor]:
        """(lambda complex [n], gamma real [n]) as differentiable functions of nu_log, theta_log. Without
        autograd (an actor's steps) the values are kept until either parameter changes in place (its version
        counter: an optimizer step, a weight load)."""
        if torch.is_grad_enabled():
            return self._decay()
        key = tuple((p._version, p.data_ptr(), id(p), p.dtype, p.device) for p in (self.nu_log, self.theta_log))
        cached = self.__dict__.get("_decay_cache")
        if cached is None or cached[0] != key:
            cached = (key, self._decay())
            self.__dict__["_decay_cache"] = cached
        return cached[1]

    def _decay(self) -> Tuple[Tensor, Tensor]:
        r = torch.exp(-torch.exp(self.nu_log))
        lam = torch.polar(r, torch.exp(self.theta_log))
        return lam, torch.sqrt(1 - r * r)

    def _carry(self, c: Tensor, carried) -> Tensor:
        """Identity 1 on c [B, n, 2]. Linear: W2 reuses dc_dW1, as sum dL/dc . (i S) = sum (-i dL/dc) . S."""
        if self.variant == "nonlinear":
            return rtrl_carry(c, self.recurrent_parameters(), carried)
        return rtrl_carry(c, self.recurrent_parameters(), [*carried, carried[-1]],
                          grad_maps=[None, None, None, mul_neg_i])

    def _forward(self, x, state, keep, return_state, sensitivities):
        n = self.hidden_size
        f, _ = ACTIVATIONS[self.activation]
        lam, gamma = self.decay()
        # both input projections of the segment in one matmul, as complex U = W1 x + i W2 x
        W = torch.stack([self.W1, self.W2], 1).reshape(2 * n, self.input_size)  # rows (W1_i, W2_i) per unit
        U = torch.view_as_complex(Fn.linear(x, W).unflatten(-1, (n, 2)))
        gU = gamma * U
        c = state["c"]
        rtrl_state = self.learning == "rtrl" and SENSITIVITY_KEYS[0] in state
        carried = [state[k] for k in self.sensitivity_spec()] if rtrl_state else None
        if carried is not None and torch.is_grad_enabled():
            c = self._carry(c, carried)  # identity 1
        c = as_complex(c)
        transport = return_state and sensitivities
        nonlinear = self.variant == "nonlinear"
        cs, cps, pres = [], [], []
        # unbind, not gU[t]: the backward of T selects would zero-fill a [T, B, n] gradient T times
        for gU_t, keep_t in zip(gU.unbind(0), keep[..., None].to(gU.dtype).unbind(0)):
            cp = c * keep_t
            pre = lam * cp + gU_t
            c = torch.view_as_complex(f(torch.view_as_real(pre))) if nonlinear else pre
            cs.append(c)
            if transport:
                cps.append(cp)
                pres.append(pre)
        C = torch.view_as_real(torch.stack(cs)).transpose(-1, -2).flatten(-2)  # [T, B, 2n]: c1 then c2
        y = C if nonlinear else f(C)
        if not return_state:
            return y, None
        nxt = {"c": as_pair(c.detach())}
        if transport:
            args = (carried, x.detach(), keep, torch.stack(cps).detach(), U.detach())
            if nonlinear:
                nxt.update(self._transport_nonlinear(*args, torch.stack(pres).detach()))
            else:
                nxt.update(self._transport_linear(*args))
        return y, nxt

    # -- identity 2 ----------------------------------------------------------------------------
    @torch.no_grad()
    def _increments(self, lam, gamma, cp, U):
        """The inhomogeneous terms of the nu_log and theta_log recursions (before D(t)), complex."""
        e_nu, e_th = torch.exp(self.nu_log), torch.exp(self.theta_log)
        r = torch.exp(-e_nu)
        dlam_nu, dlam_th = -e_nu * lam, 1j * e_th * lam
        dgamma_nu = e_nu * r * r / gamma
        return dlam_nu * cp + dgamma_nu * U, dlam_th * cp

    @torch.no_grad()
    def _transport_linear(self, carried, x, keep, cp, U):
        lam, gamma = self.decay()
        a, a0 = decay_weights(lam * keep[..., None])  # complex [T, B, n], [B, n]
        v_nu, v_th = self._increments(lam, gamma, cp, U)
        new = {
            "dc_dnu_log": as_pair((a * v_nu).sum(0)),
            "dc_dtheta_log": as_pair((a * v_th).sum(0)),
            "dc_dW1": torch.einsum("tbnk,tbd->bnkd", torch.view_as_real(a * gamma), x),  # one batched matmul
        }
        if carried is not None:
            for v, s0 in zip(new.values(), carried):
                cmul_into(v, a0, s0)
        return new

    @torch.no_grad()
    def _transport_nonlinear(self, carried, x, keep, cp, U, pre):
        lam, gamma = self.decay()
        f, fprime = ACTIVATIONS[self.activation]
        pre_r = torch.view_as_real(pre)
        Dg = fprime(pre_r, f(pre_r))  # [T, B, n, 2]: f'(p1), f'(p2)
        g, phi = lam.real, lam.imag
        R = torch.stack([torch.stack([g, -phi], -1), torch.stack([phi, g], -1)], -2)  # [n, 2, 2]
        J = Dg[..., :, None] * R * keep[..., None, None, None]  # J(t) = D(t) R keep(t)
        Tn = J.shape[0]
        P = torch.empty_like(J)  # P[s] = J[T-1] ... J[s+1]  (P[T-1] = I)
        P[-1] = torch.eye(2, dtype=J.dtype, device=J.device)
        for s in range(Tn - 2, -1, -1):
            P[s] = _mm2(P[s + 1], J[s + 1])
        P0 = _mm2(P[0], J[0])
        M = P * Dg[..., None, :]  # M[s] = P[s] D(s)
        v_nu, v_th = self._increments(lam, gamma, cp, U)
        gM = M * gamma[:, None, None]
        new = {
            "dc_dnu_log": _mv2(M, torch.view_as_real(v_nu)).sum(0),
            "dc_dtheta_log": _mv2(M, torch.view_as_real(v_th)).sum(0),
            "dc_dW1": torch.einsum("tbnk,tbd->bnkd", gM[..., :, 0], x),
            "dc_dW2": torch.einsum("tbnk,tbd->bnkd", gM[..., :, 1], x),
        }
        if carried is not None:
            for v, s0 in zip(new.values(), carried):
                extra = (None,) * (s0.dim() - 3)
                for k in range(2):
                    p0, p1 = P0[:, :, k, 0][(...,) + extra], P0[:, :, k, 1][(...,) + extra]
                    v[:, :, k].addcmul_(p0, s0[:, :, 0]).addcmul_(p1, s0[:, :, 1])
        return new
