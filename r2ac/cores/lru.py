"""The linear recurrent unit (LRU) with online learning, as in Zucchet et al. 2023, with exact RTRL
inside every layer.

One LRU layer (App. A.1, Eqs. 8-11), N complex units, H = input features:

    h(t) = lambda * h(t-1) + gamma * (B x(t))          lambda = exp(-exp(nu_log) + i exp(theta_log)) in C^N
    y(t) = Re[C h(t)] + D * x(t)                        B in C^{N x H}, C in C^{H x N}, D in R^H
    gamma = exp(gamma_log)                              (learned, initialised to sqrt(1 - |lambda|^2))

The recurrent parameters are nu_log, theta_log, gamma_log and B (as B_re, B_im); C and D are read-outs
(plain backprop). The traces (Eqs. 12-14) are complex, h being holomorphic in lambda and B:

    e_lambda(t) = lambda e_lambda(t-1) + h(t-1);  e_gamma(t) = lambda e_gamma(t-1) + B x(t);
    e_B(t) = lambda e_B(t-1) + gamma x(t)^T       (row j of B only moves h_j)

and the carried sensitivities are those of the real parameters, stored as (re, im) pairs:
dh/dnu_log = -exp(nu_log) lambda e_lambda, dh/dtheta_log = i exp(theta_log) lambda e_lambda,
dh/dgamma_log = gamma e_gamma, dh/dB_re = e_B; dh/dB_im = i e_B is not stored (it would double the
largest tensor): its correction reuses e_B (see ``_LRULayer.carry``).

As for every core here, the learner uses identity 1 (``rtrl_carry`` + one autograd pass) and the segment
end uses identity 2: the decay is the complex reverse cumulative product of lambda * keep(t)
(``decay_weights``) and dh/dB is one batched matmul.

``layers > 1``: the stack of Zucchet et al. 2023 / S5, each block  z -> z + GLU(GELU(LRU(LayerNorm(z))))  with
GLU(v) = (W_a v + b_a) * sigmoid(W_b v + b_b), all at width H = input_size; no dropout (RL), no
encoder/decoder (the agent's stem and heads play those roles). Each layer carries its own exact traces.

What ``learning="rtrl"`` with ``layers > 1`` approximates (the paper's one approximation, Sec. 3.2):
the error reaching a layer comes from the layers above *at the same time step only*. Implemented by
cutting, in every block, the gradient path from the LRU's input u(t) through its recurrence to later
steps: the recurrence runs on B u(t) with u detached, and u(t) receives only the instantaneous
gamma B^T-path of h(t) (a zero-valued term with that gradient). Hence
- exact: the top block's LRU parameters (nu_log, theta_log, gamma_log, B), its C, D and GLU;
- spatial (approximate): every lower layer's error delta^l(t) = dL(t)/dh^l(t), so their recurrent
  parameters get sum_t delta^l(t) e^l(t) with exact traces e^l; the LayerNorms, the lower blocks'
  read-outs and GLUs, and the gradient passed to the core's input get the spatial gradient;
- the result does not depend on how the stream is cut into segments (it is the online rule).
With ``layers=1`` nothing is cut and RTRL is exact; ``learning="tbptt"`` never cuts.
"""

from __future__ import annotations

import math
from typing import List

import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from r2ac.cores.base import RecurrentCore
from r2ac.cores.rtrl import decay_weights, rtrl_carry
from r2ac.cores.rtu import as_complex, as_pair, check_ring, cmul_into, mul_neg_i, ring_init

#: the recurrent parameters of a layer whose sensitivities are stored, in order (B_im reuses dh_dB)
RECURRENT = ("nu_log", "theta_log", "gamma_log", "B_re")
SENSITIVITIES = ("dh_dnu_log", "dh_dtheta_log", "dh_dgamma_log", "dh_dB")


class _SpatialPath(torch.autograd.Function):
    """Zero-valued stand-in for u W^T: costs nothing in the forward pass, and its backward gives u the
    gradient g W (W is data). Adding it to h(t) gives u(t) the same-step path only."""

    @staticmethod
    def forward(ctx, u: Tensor, W: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(W)
        return u.new_zeros(u.shape[:-1] + (W.shape[0],))

    @staticmethod
    def backward(ctx, g: Tensor):  # type: ignore[override]
        (W,) = ctx.saved_tensors
        return g @ W, None


class _LRULayer(nn.Module):
    """One LRU layer (and, when ``block``, the LayerNorm before and GELU/GLU/residual after it)."""

    def __init__(self, H: int, N: int, block: bool):
        super().__init__()
        self.H, self.N, self.block = H, N, block
        self.nu_log = nn.Parameter(torch.empty(N))
        self.theta_log = nn.Parameter(torch.empty(N))
        self.gamma_log = nn.Parameter(torch.empty(N))
        self.B_re = nn.Parameter(torch.empty(N, H))
        self.B_im = nn.Parameter(torch.empty(N, H))
        self.C_re = nn.Parameter(torch.empty(H, N))
        self.C_im = nn.Parameter(torch.empty(H, N))
        self.D = nn.Parameter(torch.empty(H))
        if block:
            self.norm = nn.LayerNorm(H)
            self.glu = nn.Linear(H, 2 * H)  # W_a; W_b stacked

    def reset_parameters(self, r_min: float, r_max: float, max_phase: float) -> None:
        nu_log, theta_log = ring_init(self.N, r_min, r_max, max_phase)
        with torch.no_grad():
            self.nu_log.copy_(nu_log)
            self.theta_log.copy_(theta_log)
            r = torch.exp(-torch.exp(nu_log))
            self.gamma_log.copy_(0.5 * torch.log(1 - r * r))  # gamma = sqrt(1 - |lambda|^2)
            for w in (self.B_re, self.B_im):
                w.normal_(0.0, 1.0 / math.sqrt(2 * self.H))
            for w in (self.C_re, self.C_im):
                w.normal_(0.0, 1.0 / math.sqrt(self.N))
            self.D.normal_(0.0, 1.0)
        if self.block:
            self.norm.reset_parameters()
            self.glu.reset_parameters()

    def decay(self):
        """(lambda complex [N], gamma real [N])."""
        lam = torch.exp(torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))
        return lam, torch.exp(self.gamma_log)

    def carry(self, h0: Tensor, sens: List[Tensor]) -> Tensor:
        """Identity 1 on the carried state h0 [B, N, 2]. For B_im, dh/dB_im = i e_B: its correction is
        sum dL/dh . (i e_B) = sum (-i dL/dh) . e_B: the same tensor serves both, read once (``grad_maps``)."""
        return rtrl_carry(h0, [getattr(self, p) for p in RECURRENT] + [self.B_im], [*sens, sens[-1]],
                          grad_maps=[None] * len(RECURRENT) + [mul_neg_i])

    def recur(self, u: Tensor, h: Tensor, keep: Tensor, cut: bool, transport: bool):
        """Run the recurrence over the segment from complex h [B, N]. Returns (h(t) for all t, complex
        [T, B, N]; the last h; the masked previous states and B u for identity 2, or None)."""
        N = self.N
        lam, gamma = self.decay()
        Bw = torch.stack([self.B_re, self.B_im], 1).reshape(2 * N, self.H)  # rows (re, im) per unit
        proj = lambda inp, w: torch.view_as_complex(Fn.linear(inp, w).unflatten(-1, (N, 2)))  # noqa: E731
        if cut:  # recurrence sees u only as data; u gets the same-step path gamma B^T (value 0 added)
            Bu = proj(u.detach(), Bw)
            sp = torch.view_as_complex(_SpatialPath.apply(u, Bw.detach()).unflatten(-1, (N, 2)))
            spatial = gamma.detach() * sp
        else:
            Bu = proj(u, Bw)
            spatial = None
        gBu = gamma * Bu
        hs, hps = [], []
        keepc = keep[..., None].to(gBu.dtype)  # cast once, not at every step
        for gBu_t, keep_t in zip(gBu.unbind(0), keepc.unbind(0)):  # unbind: O(T) backward
            hp = h * keep_t
            h = lam * hp + gBu_t
            hs.append(h)
            if transport:
                hps.append(hp)
        Hs = torch.stack(hs)
        if spatial is not None:
            Hs = Hs + spatial
        extra = (torch.stack(hps).detach(), Bu.detach()) if transport else None
        return Hs, h, extra

    def readout(self, Hs: Tensor, u: Tensor) -> Tensor:
        """Re[C h(t)] + D * u(t)."""
        Cw = torch.stack([self.C_re, -self.C_im], -1).reshape(self.H, 2 * self.N)
        return torch.addcmul(Fn.linear(torch.view_as_real(Hs).flatten(-2), Cw), self.D, u)

    @torch.no_grad()
    def transport(self, carried, u: Tensor, keep: Tensor, hp: Tensor, Bu: Tensor):
        """Identity 2 for this layer (Eqs. 12-14 summed in closed form)."""
        lam, gamma = self.decay()
        a, a0 = decay_weights(lam * keep[..., None])  # complex [T, B, N], [B, N]
        ahp = (a * hp).sum(0)  # sum_s a(s) h(s-1): the lambda trace
        new = {
            "dh_dnu_log": as_pair(-torch.exp(self.nu_log) * lam * ahp),
            "dh_dtheta_log": as_pair(1j * torch.exp(self.theta_log) * lam * ahp),
            "dh_dgamma_log": as_pair(gamma * (a * Bu).sum(0)),
            "dh_dB": torch.einsum("tbnk,tbd->bnkd", torch.view_as_real(a * gamma), u),  # one batched matmul
        }
        if carried is not None:
            for v, s0 in zip(new.values(), carried):
                cmul_into(v, a0, s0)
        return new


class LRU(RecurrentCore):
    """The (online) LRU of Zucchet et al. 2023. ``hidden_size`` = N complex units per layer; ``output_size`` = H =
    ``input_size`` (y = Re[C h] + D x for one layer; the residual stream of the last block otherwise).

    Options:

    - ``layers``: 1 (default: one LRU layer, exact RTRL) or more (blocks LayerNorm -> LRU -> GELU -> GLU ->
      residual; with ``learning="rtrl"`` the lower layers learn from spatial errors, see the module doc).
    - ``r_min``, ``r_max``, ``max_phase``: lambda uniform (by area) in the ring [r_min, r_max] = [0.9,
      0.999] with phase in (0, max_phase], max_phase = 2 pi (Zucchet et al. 2023 / Orvieto et al.).

    State (per layer l, keys suffixed ``_l`` when ``layers > 1``): ``h`` [B, N, 2] (re, im); sensitivities
    ``dh_dnu_log``, ``dh_dtheta_log``, ``dh_dgamma_log`` [B, N, 2] and ``dh_dB`` [B, N, 2, H] (the complex
    trace e_B, which serves B_re and B_im).
    """

    name = "lru"
    supports_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt", layers: int = 1,
                 r_min: float = 0.9, r_max: float = 0.999, max_phase: float = 2 * math.pi):
        super().__init__(input_size, hidden_size, learning)
        if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
            raise ValueError(f"layers must be a positive int, got {layers!r}")
        check_ring(r_min, r_max, max_phase)
        self.num_layers = layers
        self.r_min, self.r_max, self.max_phase = float(r_min), float(r_max), float(max_phase)
        self.lru = nn.ModuleList(_LRULayer(input_size, hidden_size, block=layers > 1) for _ in range(layers))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for layer in self.lru:
            layer.reset_parameters(self.r_min, self.r_max, self.max_phase)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", layers={self.num_layers}"

    # -- contract ------------------------------------------------------------------------------
    @property
    def output_size(self) -> int:
        return self.input_size

    def _key(self, name: str, layer: int) -> str:
        return name if self.num_layers == 1 else f"{name}_{layer}"

    def hidden_spec(self):
        return {self._key("h", l): (self.hidden_size, 2) for l in range(self.num_layers)}

    def sensitivity_spec(self):
        N, H = self.hidden_size, self.input_size
        spec = {}
        for l in range(self.num_layers):
            spec.update({self._key(k, l): (N, 2) for k in SENSITIVITIES[:3]})
            spec[self._key("dh_dB", l)] = (N, 2, H)
        return spec

    def recurrent_parameters(self):
        return [getattr(layer, p) for layer in self.lru for p in RECURRENT + ("B_im",)]

    def _forward(self, x, state, keep, return_state, sensitivities):
        rtrl = self.learning == "rtrl"
        cut = rtrl and self.num_layers > 1 and torch.is_grad_enabled()
        transport = return_state and sensitivities
        nxt = {}
        z = x
        for l, layer in enumerate(self.lru):
            skeys = [self._key(k, l) for k in SENSITIVITIES]
            carried = [state[k] for k in skeys] if rtrl and skeys[0] in state else None
            h0 = state[self._key("h", l)]
            if carried is not None and torch.is_grad_enabled():
                h0 = layer.carry(h0, carried)  # identity 1
            u = layer.norm(z) if layer.block else z
            Hs, h, extra = layer.recur(u, as_complex(h0), keep, cut, transport)
            y = layer.readout(Hs, u)
            if layer.block:
                a, b = layer.glu(Fn.gelu(y)).chunk(2, -1)
                z = z + a * torch.sigmoid(b)
            else:
                z = y
            if return_state:
                nxt[self._key("h", l)] = as_pair(h.detach())
                if transport:
                    new = layer.transport(carried, u.detach(), keep, *extra)
                    nxt.update({self._key(k, l): v for k, v in new.items()})
        return z, (nxt if return_state else None)
