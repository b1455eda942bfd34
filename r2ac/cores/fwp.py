"""The one-layer linear fast-weight programmer of Irie et al. (ICLR 2024, App. A.2) with exact RTRL.

    k(t) = K x(t),  v(t) = V x(t),  q(t) = Q x(t)          (Eq. 41; no activation on the key)
    W(t) = W(t-1) + v(t) k(t)^T                           (Eq. 42; W is N x Nk per sample, 0 at an episode start)
    y(t) = W(t) sigmoid(q(t))                             (Eq. 43)

RTRL (Eqs. 44-52). Only K and V are in the recurrence (Q is trained by ordinary backprop). The 4-index
sensitivities are sparse and shared:

    dW[l, m] / dK[i, j] = delta(m, i) Khat[l, j],   Khat(t) = Khat(t-1) + v(t) x(t)^T     [N x D]
    dW[l, m] / dV[i, j] = delta(l, i) Vhat[m, j],   Vhat(t) = Vhat(t-1) + k(t) x(t)^T     [Nk x D]
    dL/dK = E^T Khat,  dL/dV = E Vhat,  E = dL/dW

so the carried sensitivities are ``dW_dK`` = Khat [B, N, D] and ``dW_dV`` = Vhat [B, Nk, D] (both reset with W).

Why not ``rtrl_carry``: its contraction needs the sensitivity as [B, unit, *comp, *param_tail]. Taking the
rows of W as units fits V (sens[b, i, m, j] = Vhat[b, m, j]) and the columns fit K, but the sensitivity is
then Khat / Vhat broadcast over the unit axis: the element-wise contraction would touch B N Nk D numbers
twice. Here identity 1 is done by a dedicated autograd Function on the read-out of the carried W(t0):
W(t0) enters the segment's outputs only through y0(t) = valid(t) W(t0) s(t) (valid: no reset since the
segment start), and E(t0) = sum_t g(t) s(t)^T (g = dL/dy0 masked) has rank <= T, so

    dL/dK += sum_b S_b^T (G_b Khat_b),   dL/dV += sum_b G_b^T (S_b Vhat_b)

(G_b, S_b: [T, N], [T, Nk]) — four matmuls of B T N D, never forming E.

Forward over a segment: the in-segment part is causal linear attention masked to the episode
(y_in(t) = sum_{s <= t, same episode} v(s) (k(s) . s(t))), computed in chunks of ``chunk_size`` steps with
the fast weight carried between chunks; the carried W(t0) adds y0. Identity 2 (segment end):
W(T) = a0 W(t0) + sum_s a(s) v(s) k(s)^T, Khat(T) = a0 Khat(t0) + sum_s a(s) v(s) x(s)^T, likewise Vhat, with
a(s) = 1 iff no reset after s: one batched matmul each.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from r2ac.cores.base import RecurrentCore
from r2ac.cores.rtrl import decay_weights


class _CarryReadout(torch.autograd.Function):
    """y0 = valid * (S @ W0^T), batch-first; backward also adds the RTRL correction to K and V (identity 1)."""

    @staticmethod
    def forward(ctx, W0: Tensor, s: Tensor, valid: Tensor, Khat: Tensor, Vhat: Tensor, K: Tensor, V: Tensor):  # type: ignore[override]
        ctx.save_for_backward(W0, s, valid, Khat, Vhat)
        return torch.bmm(s, W0.transpose(1, 2)) * valid

    @staticmethod
    def backward(ctx, grad_y: Tensor):  # type: ignore[override]
        W0, s, valid, Khat, Vhat = ctx.saved_tensors
        B, T, N = grad_y.shape
        G = grad_y * valid  # [B, T, N]
        grad_s = torch.bmm(G, W0) if ctx.needs_input_grad[1] else None
        grad_W0 = torch.bmm(G.transpose(1, 2), s) if ctx.needs_input_grad[0] else None
        gK = gV = None
        if ctx.needs_input_grad[5]:  # dL/dK = sum_b S_b^T (G_b Khat_b)
            gK = s.reshape(B * T, -1).t() @ torch.bmm(G, Khat).reshape(B * T, -1)
        if ctx.needs_input_grad[6]:  # dL/dV = sum_b G_b^T (S_b Vhat_b)
            gV = G.reshape(B * T, N).t() @ torch.bmm(s, Vhat).reshape(B * T, -1)
        return grad_W0, grad_s, None, None, None, gK, gV


def _in_segment(k: Tensor, v: Tensor, s: Tensor, ep: Tensor, chunk: int) -> Tensor:
    """sum_{s' <= t, same episode, inside the segment} v(s') (k(s') . s(t)); all batch-first [B, T, *],
    ep [B, T] the episode index inside the segment. Chunked causal linear attention."""
    B, T, _ = k.shape
    outs = []
    P = None  # the in-segment fast weight at the chunk start [B, N, Nk]
    for c0 in range(0, T, chunk):
        kc, vc, sc, ec = k[:, c0:c0 + chunk], v[:, c0:c0 + chunk], s[:, c0:c0 + chunk], ep[:, c0:c0 + chunk]
        L = kc.shape[1]
        causal = torch.ones(L, L, dtype=torch.bool, device=k.device).tril()
        mask = ((ec[:, :, None] == ec[:, None, :]) & causal).to(k.dtype)
        y = torch.bmm(torch.bmm(sc, kc.transpose(1, 2)) * mask, vc)
        if P is not None:
            alive = (ec == ep[:, c0 - 1:c0]).to(k.dtype)  # still in the episode the chunk started in
            y = y + torch.bmm(sc, P.transpose(1, 2)) * alive[..., None]
        outs.append(y)
        if c0 + chunk < T:
            last = (ec == ec[:, -1:]).to(k.dtype)  # steps of the chunk in the episode it ends in
            add = torch.bmm((vc * last[..., None]).transpose(1, 2), kc)
            if P is not None:
                P = P * (ec[:, -1] == ep[:, c0 - 1]).to(k.dtype)[:, None, None] + add
            else:
                P = add
    return torch.cat(outs, 1)


class FastWeights(RecurrentCore):
    """``fwp``: one-layer linear fast-weight programmer (App. A.2), exact RTRL for K and V.

    State: the fast weight ``W`` [B, N, Nk] (N = hidden_size, Nk = ``key_size``); sensitivities ``dW_dK``
    (Khat [B, N, D]) and ``dW_dV`` (Vhat [B, Nk, D]). Options: ``key_size`` (default hidden_size),
    ``chunk_size`` (steps per chunk of the in-segment linear attention, default 128; only speed/memory).
    W sums v k^T over the whole episode without decay (as in the paper), so y grows with episode length.
    """

    name = "fwp"
    supports_rtrl = True
    exact_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt",
                 key_size: Optional[int] = None, chunk_size: int = 128):
        super().__init__(input_size, hidden_size, learning)
        key_size = hidden_size if key_size is None else key_size
        if not isinstance(key_size, int) or key_size <= 0:
            raise ValueError(f"key_size must be a positive int, got {key_size!r}")
        if not isinstance(chunk_size, int) or chunk_size <= 0:
            raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
        self.key_size, self.chunk_size = key_size, chunk_size
        D = input_size
        self.K = nn.Parameter(torch.empty(key_size, D))
        self.V = nn.Parameter(torch.empty(hidden_size, D))
        self.Q = nn.Parameter(torch.empty(key_size, D))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.input_size)
        for p in (self.K, self.V, self.Q):
            nn.init.uniform_(p, -bound, bound)

    def hidden_spec(self):
        return {"W": (self.hidden_size, self.key_size)}

    def sensitivity_spec(self):
        return {"dW_dK": (self.hidden_size, self.input_size), "dW_dV": (self.key_size, self.input_size)}

    def recurrent_parameters(self):
        return [self.K, self.V]

    def _forward(self, x, state, keep, return_state, sensitivities):
        N, Nk = self.hidden_size, self.key_size
        k, v, q = Fn.linear(x, torch.cat([self.K, self.V, self.Q])).split([Nk, N, Nk], -1)  # [T, B, *]
        s = torch.sigmoid(q)
        kb, vb, sb = k.transpose(0, 1), v.transpose(0, 1), s.transpose(0, 1)  # [B, T, *]
        ep = torch.cumsum(1 - keep.t(), 1)  # [B, T]: episodes started inside the segment so far
        valid = (ep == 0).to(x.dtype)[..., None]  # the carried W still counts at step t
        W0 = state["W"]
        carried = ([state["dW_dK"], state["dW_dV"]]
                   if self.learning == "rtrl" and "dW_dK" in state else None)
        if carried is not None and torch.is_grad_enabled():
            y0 = _CarryReadout.apply(W0, sb, valid, carried[0].detach(), carried[1].detach(), self.K, self.V)
        else:
            y0 = torch.bmm(sb, W0.transpose(1, 2)) * valid
        y = (y0 + _in_segment(kb, vb, sb, ep, self.chunk_size)).transpose(0, 1).contiguous()
        if not return_state:
            return y, None
        with torch.no_grad():  # identity 2
            k, v, x_ = k.detach(), v.detach(), x.detach()
            a, a0 = decay_weights(keep)  # a[s] = 1 iff no reset after step s
            va = v * a[..., None]
            nxt = {"W": torch.einsum("tbn,tbk->bnk", va, k).add_(W0.detach() * a0[:, None, None])}
            if sensitivities:
                Khat = torch.einsum("tbn,tbd->bnd", va, x_)
                Vhat = torch.einsum("tbk,tbd->bkd", k * a[..., None], x_)
                if carried is not None:
                    Khat.add_(carried[0] * a0[:, None, None])
                    Vhat.add_(carried[1] * a0[:, None, None])
                nxt.update(dW_dK=Khat, dW_dV=Vhat)
        return y, nxt

    def extra_repr(self) -> str:
        return super().extra_repr() + f", key_size={self.key_size}, chunk_size={self.chunk_size}"
