"""Columnar, constructive and columnar-constructive (CCN) networks of 1-unit LSTM columns with exact RTRL
(Javed, Shah, Sutton, White 2023; notes/ccn.md).

A column q is an LSTM cell with one hidden unit: it sees the input x(t) (m values) and its own h(t-1)
through one scalar per gate (gates i, f, o, g in that order):

    i = sigmoid(W_i.x + u_i h(t-1) + b_i)    f = sigmoid(W_f.x + u_f h(t-1) + b_f)
    o = sigmoid(W_o.x + u_o h(t-1) + b_o)    g = tanh   (W_g.x + u_g h(t-1) + b_g)
    c(t) = f c(t-1) + i g                    h(t) = o tanh(c(t))

Parameters are stored stacked over the gates: ``W`` [n, 4, m], ``u`` [n, 4], ``b`` [n, 4] (row q = column q).
The unit state is the pair (h, c): ``hc`` [B, n, 2]; its sensitivities are ``dhc_dW`` [B, n, 2, 4, m],
``dhc_du`` and ``dhc_db`` [B, n, 2, 4] (component axis = (h, c), then gate, then input), i.e. the traces
TH_p, TC_p of the notes for all twelve parameter kinds of every column.

RTRL. Column q's state depends on its own previous state only, so d(h, c)(t) / d(h, c)(t-1) is a 2 x 2
block J(t) per column. With G(t) = d(h, c)(t) / d(gate pre-activations)(t) [2 x 4]:

    dc/dpre = (g s_i, c(t-1) s_f, 0, i s_g)           s_q = q(1-q) (sigmoid gates), 1 - g^2 (g)
    dh/dpre = o (1 - tanh(c)^2) dc/dpre + (0, 0, tanh(c) s_o, 0)
    J = [[sum_q G_hq u_q, o (1 - tanh(c)^2) f],
         [sum_q G_cq u_q, f                  ]]  * keep(t)
    S_W(t) = J(t) S_W(t-1) + G(t) (x) x(t);   S_u: G(t) h(t-1);   S_b: G(t)

Identity 1 (learner): ``rtrl_carry`` on hc(t0). Identity 2 (segment end): with A(s) = J(T) ... J(s+1)
(a reverse product of 2 x 2 blocks, O(T n)), S(T) = A(t0) S(t0) + sum_s (A(s) G(s)) (x) x(s): one
batched matmul per weight tensor.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from r2ac.cores.base import RecurrentCore
from r2ac.cores.rtrl import rtrl_carry

GATES = ("i", "f", "o", "g")


# -- the column math, shared by Columnar and CCN ---------------------------------------------------

def _init_columns(W: Tensor, u: Tensor, b: Tensor, forget_bias: float) -> None:
    with torch.no_grad():
        bound = 1.0 / math.sqrt(W.shape[-1])
        W.uniform_(-bound, bound)
        u.uniform_(-1.0, 1.0)  # a column's recurrent fan-in is 1
        b.zero_()
        b[:, 1].fill_(forget_bias)


def _gate_major(W: Tensor, b: Tensor):
    """[n, 4, m], [n, 4] -> [4n, m], [4n] with rows ordered (gate, column), so that the pre-activations of
    one gate for all columns are contiguous."""
    n, _, m = W.shape
    return W.transpose(0, 1).reshape(4 * n, m), b.t().reshape(4 * n)


def _scan(pre: Tensor, u: Tensor, h: Tensor, c: Tensor, keep: Tensor, record: bool):
    """Run the columns over a segment.

    pre [T, B, 4, n]: W x + b per gate; u [n, 4]; h, c [B, n]; keep [T, B].
    Returns H [T, B, n], the final (h, c) (in the autograd graph) and, if ``record``, the detached
    per-step quantities the sensitivity transport needs.
    """
    T, B, _, n = pre.shape
    # [T, 4, B, n]: every gate's slice contiguous; unbind once, so that the backward stacks the per-step
    # gradients in one op (indexing pre[t] would build a [T, ...] gradient per step)
    pres = pre.transpose(1, 2).contiguous().unbind(0)
    # u broadcast once: the per-step gradient w.r.t. it is then a plain add (one reduction at the end)
    uB = u.t()[:, None, :].expand(4, B, n)
    hs = []
    rec: Dict[str, List[Tensor]] = {k: [] for k in ("hp", "cp", "i", "f", "o", "g", "c")} if record else {}
    for t in range(T):
        k = keep[t, :, None]
        hp, cp = h * k, c * k
        a = torch.addcmul(pres[t], uB, hp)  # [4, B, n]
        i, f, o = torch.sigmoid(a[:3]).unbind(0)
        g = torch.tanh(a[3])
        c = torch.addcmul(f * cp, i, g)
        h = o * torch.tanh(c)
        hs.append(h)
        if record:
            for name, v in (("hp", hp), ("cp", cp), ("i", i), ("f", f), ("o", o), ("g", g), ("c", c)):
                rec[name].append(v.detach())
    out = {k: torch.stack(v) for k, v in rec.items()} if record else None
    return torch.stack(hs), h, c, out


def _mat2(A: Tensor, S: Tensor) -> Tensor:
    """Per-unit 2 x 2 product: A [..., 2, 2], S [..., 2, *tail] (tail flattened by the caller to one
    axis) -> [..., 2, tail]: out[..., k, :] = sum_l A[..., k, l] S[..., l, :]."""
    return A[..., :, 0, None] * S[..., 0:1, :] + A[..., :, 1, None] * S[..., 1:2, :]


@torch.no_grad()
def _transport(carried: Optional[List[Tensor]], inp: Tensor, keep: Tensor, rec: Dict[str, Tensor],
               u: Tensor) -> List[Tensor]:
    """Identity 2 for a group of columns: the sensitivities at the segment end.

    inp [T, B, m] (the columns' input), keep [T, B], rec: per-step [T, B, n] tensors from ``_scan``,
    u [n, 4]; carried = [S_W [B, n, 2, 4, m], S_u [B, n, 2, 4], S_b [B, n, 2, 4]] or None.
    """
    hp, cp, i, f, o, g, c = (rec[k] for k in ("hp", "cp", "i", "f", "o", "g", "c"))
    T, B, n = hp.shape
    si, sf, so, sg = i * (1 - i), f * (1 - f), o * (1 - o), 1 - g * g
    tc = torch.tanh(c)
    oc = o * (1 - tc * tc)  # d h / d c(t)
    dc = torch.stack([g * si, cp * sf, torch.zeros_like(c), i * sg], -1)  # [T, B, n, 4]
    dh = oc[..., None] * dc
    dh[..., 2] += tc * so
    G = torch.stack([dh, dc], -2)  # [T, B, n, 2, 4]: d (h, c)(t) / d pre_q(t)
    Ju = (G * u[:, None, :]).sum(-1)  # [T, B, n, 2]: d (h, c)(t) / d h(t-1) (through all four gates)
    J = torch.stack([torch.stack([Ju[..., 0], oc * f], -1), torch.stack([Ju[..., 1], f], -1)], -2)
    J = J * keep[:, :, None, None, None]  # [T, B, n, 2, 2]
    # reverse product: A(T-1) = I, A(s-1) = A(s) J(s)
    A = torch.eye(2, dtype=J.dtype, device=J.device).expand(B, n, 2, 2)
    As = [None] * T
    for s in range(T - 1, -1, -1):
        As[s] = A
        A = _mat2(A, J[s])
    AG = _mat2(torch.stack(As), G)  # [T, B, n, 2, 4]
    new = [
        torch.einsum("tbnkq,tbm->bnkqm", AG, inp),
        (AG * hp[..., None, None]).sum(0),
        AG.sum(0),
    ]
    if carried is not None:
        for v, s0 in zip(new, carried):
            v.add_(_mat2(A, s0.reshape(B, n, 2, -1)).view_as(v))
    return new


# -- Columnar ------------------------------------------------------------------------------------

class Columnar(RecurrentCore):
    """``columnar``: ``hidden_size`` independent 1-unit LSTM columns (Javed et al. 2023, Sec. 3.1), exact RTRL at
    O(|theta|) per step. Output: the columns' h(t) [T, B, hidden_size]. Options: ``forget_bias`` (initial
    b_f of every column, default 1.0)."""

    name = "columnar"
    supports_rtrl = True
    exact_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt", forget_bias: float = 1.0):
        super().__init__(input_size, hidden_size, learning)
        n, m = hidden_size, input_size
        self.forget_bias = float(forget_bias)
        self.W = nn.Parameter(torch.empty(n, 4, m))
        self.u = nn.Parameter(torch.empty(n, 4))
        self.b = nn.Parameter(torch.empty(n, 4))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _init_columns(self.W, self.u, self.b, self.forget_bias)

    def hidden_spec(self):
        return {"hc": (self.hidden_size, 2)}

    def sensitivity_spec(self):
        n, m = self.hidden_size, self.input_size
        return {"dhc_dW": (n, 2, 4, m), "dhc_du": (n, 2, 4), "dhc_db": (n, 2, 4)}

    def recurrent_parameters(self):
        return [self.W, self.u, self.b]

    def _forward(self, x, state, keep, return_state, sensitivities):
        T, B, _ = x.shape
        n = self.hidden_size
        weight, bias = _gate_major(self.W, self.b)
        pre = Fn.linear(x, weight, bias).view(T, B, 4, n)
        hc = state["hc"]
        carried = ([state[k] for k in self.sensitivity_spec()]
                   if self.learning == "rtrl" and "dhc_dW" in state else None)
        if carried is not None and torch.is_grad_enabled():
            hc = rtrl_carry(hc, self.recurrent_parameters(), carried)  # identity 1
        transport = return_state and sensitivities
        H, h, c, rec = _scan(pre, self.u, hc[..., 0], hc[..., 1], keep, record=transport)
        if not return_state:
            return H, None
        nxt = {"hc": torch.stack([h, c], -1).detach()}
        if transport:
            new = _transport(carried, x.detach(), keep, rec, self.u.detach())
            nxt.update(zip(self.sensitivity_spec(), new))
        return H, nxt


# -- CCN / constructive ----------------------------------------------------------------------------

class _Stage(nn.Module):
    """The columns learned in one stage: inputs x plus the normalised features of all earlier stages."""

    def __init__(self, columns: int, inputs: int, forget_bias: float):
        super().__init__()
        self.W = nn.Parameter(torch.empty(columns, 4, inputs))
        self.u = nn.Parameter(torch.empty(columns, 4))
        self.b = nn.Parameter(torch.empty(columns, 4))
        _init_columns(self.W, self.u, self.b, forget_bias)


class CCN(RecurrentCore):
    """``ccn``: columnar-constructive network (Javed et al. 2023, Secs. 3.2-3.4). ``hidden_size`` features are learned
    in ``hidden_size / columns_per_stage`` stages of ``columns_per_stage`` independent columns; a stage's
    columns see x and the normalised features of all earlier stages (at the same step t). Only the current
    stage learns. Earlier stages are frozen by masking: their weights enter the forward pass detached, so
    their ``.grad`` stays None and optimizers skip them (use ``zero_grad(set_to_none=True)``, the default,
    so that momentum cannot move them); ``requires_grad`` stays True on every stage, so an optimizer built
    before training holds all of them. Later stages do not exist yet (features 0, state 0).
    Output: the normalised features [T, B, hidden_size].

    Options:
    - ``columns_per_stage`` (u; must divide hidden_size; default 4).
    - ``steps_per_stage``: agent steps (T x B per forward pass) learned in a stage before the next starts
      (default 1 000 000; ``None``: only ``advance_stage()`` moves on). Counted in *learning* forward
      passes (grad enabled and ``core.training``: the learner's; a learner that runs several epochs over a
      batch counts it each time), and acted on at the start of the next learning forward pass, so a
      gradient never mixes two stages. ``stage`` and ``stage_steps`` are buffers (checkpointed and shipped
      to actors with the weights).
    - ``eps``, ``beta``: online feature normalisation (Eq. 11): hn = (h - mu) / max(eps, sigma),
      mu(t) = beta mu(t-1) + (1 - beta) h(t), sigma^2(t) = beta sigma^2(t-1) + (1 - beta)(mu(t) - h)(mu(t-1) - h),
      mu(0) = 0, sigma^2(0) = 1. The statistics are module buffers (``feature_mean``, ``feature_var``),
      shared by all streams (with a batch, h(t) and the product above are averaged over it; B = 1 is Eq. 11),
      updated step by step in learning forward passes only and shipped to actors with the weights
      (actors use them as constants, like the weights). They are treated as constants by the gradient.
    - ``forget_bias``: initial b_f (default 1.0).

    RTRL: the sensitivities are those of the current stage's columns w.r.t. its W, u, b (exact, with earlier
    stages frozen); ``dhc_dW`` is stored at the widest input size (input_size + hidden_size - u) so the state
    layout never changes; ``sens_stage`` tags each sample's sensitivities with (stage + 1). Sensitivities
    tagged with another stage are dropped (set to 0) when the state is used: a stage's columns start from
    state 0 (they did not exist before), so 0 is their exact sensitivity at their first step.
    """

    name = "ccn"
    supports_rtrl = True
    exact_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt", columns_per_stage: int = 4,
                 steps_per_stage: Optional[int] = 1_000_000, eps: float = 0.01, beta: float = 0.99999,
                 forget_bias: float = 1.0):
        super().__init__(input_size, hidden_size, learning)
        if not isinstance(columns_per_stage, int) or columns_per_stage <= 0 or hidden_size % columns_per_stage:
            raise ValueError(
                f"columns_per_stage must be a positive int dividing hidden_size={hidden_size}, "
                f"got {columns_per_stage!r}"
            )
        if steps_per_stage is not None and (not isinstance(steps_per_stage, int) or steps_per_stage <= 0):
            raise ValueError(f"steps_per_stage must be a positive int or None, got {steps_per_stage!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        if not 0 < beta < 1:
            raise ValueError(f"beta must be in (0, 1), got {beta!r}")
        self.columns_per_stage = columns_per_stage
        self.steps_per_stage = steps_per_stage
        self.eps, self.beta = float(eps), float(beta)
        self.n_stages = hidden_size // columns_per_stage
        u = columns_per_stage
        self.stages = nn.ModuleList(_Stage(u, input_size + s * u, forget_bias) for s in range(self.n_stages))
        self.register_buffer("stage", torch.zeros((), dtype=torch.long))
        self.register_buffer("stage_steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("feature_mean", torch.zeros(hidden_size))
        self.register_buffer("feature_var", torch.ones(hidden_size))

    # -- stages ------------------------------------------------------------------------------------
    @property
    def current_stage(self) -> int:
        return int(self.stage)

    def advance_stage(self) -> int:
        """Freeze the current stage and start learning the next one; returns the new stage index."""
        s = int(self.stage)
        if s + 1 >= self.n_stages:
            raise RuntimeError(f"{self.name}: already at the last stage ({s}) of {self.n_stages}")
        self.stage.fill_(s + 1)
        self.stage_steps.zero_()
        return s + 1

    # -- contract --------------------------------------------------------------------------------
    def hidden_spec(self):
        return {"hc": (self.hidden_size, 2)}

    def sensitivity_spec(self):
        u, width = self.columns_per_stage, self.input_size + self.hidden_size - self.columns_per_stage
        return {"dhc_dW": (u, 2, 4, width), "dhc_du": (u, 2, 4), "dhc_db": (u, 2, 4), "sens_stage": (1,)}

    def _normalise(self, H: Tensor, s: int, update: bool, decay: Optional[Tensor]) -> Tensor:
        sl = slice(s * self.columns_per_stage, (s + 1) * self.columns_per_stage)
        mu0, var0 = self.feature_mean[sl], self.feature_var[sl]
        if not update:
            return (H - mu0) / var0.sqrt().clamp_min(self.eps)
        with torch.no_grad():
            # the linear recursions of Eq. 11 over the segment, vectorised: decay[t, s] = beta^(t-s) (s <= t)
            Hd = H.detach()
            T = H.shape[0]
            first = self.beta ** torch.arange(1, T + 1, dtype=H.dtype, device=H.device)[:, None]  # beta^(t+1)
            mu = first * mu0 + (1 - self.beta) * (decay @ Hd.mean(1))  # [T, u]
            mu_prev = torch.cat([mu0[None], mu[:-1]])
            r = ((mu[:, None] - Hd) * (mu_prev[:, None] - Hd)).mean(1)
            var = first * var0 + (1 - self.beta) * (decay @ r)
            mu0.copy_(mu[-1])
            var0.copy_(var[-1])
        return (H - mu[:, None]) / var.clamp_min(0).sqrt().clamp_min(self.eps)[:, None]

    def _forward(self, x, state, keep, return_state, sensitivities):
        learn = torch.is_grad_enabled() and self.training
        if (learn and self.steps_per_stage is not None and int(self.stage) + 1 < self.n_stages
                and int(self.stage_steps) >= self.steps_per_stage):
            self.advance_stage()
        stage = int(self.stage)
        T, B, m = x.shape
        u = self.columns_per_stage
        hc = state["hc"]
        carried = None
        if self.learning == "rtrl" and "dhc_dW" in state:
            ok = (state["sens_stage"] == stage + 1).to(x.dtype)  # [B, 1]
            width = m + stage * u
            carried = [state["dhc_dW"][..., :width] * ok[:, :, None, None, None],
                       state["dhc_du"] * ok[:, :, None, None], state["dhc_db"] * ok[:, :, None, None]]
        transport = return_state and sensitivities
        decay = None
        if learn:
            t = torch.arange(T, dtype=x.dtype, device=x.device)
            lag = t[:, None] - t[None, :]
            decay = torch.where(lag >= 0, self.beta ** lag.clamp_min(0), torch.zeros_like(lag))
        feats, hcs, new = [], [], None
        for s in range(stage + 1):
            st = self.stages[s]
            inp = x if s == 0 else torch.cat([x] + feats, -1)
            last = s == stage
            # frozen stages: their weights enter as constants (gradient masked; requires_grad untouched,
            # so an optimizer built at the start holds every stage)
            W, uu, b = (st.W, st.u, st.b) if last else (st.W.detach(), st.u.detach(), st.b.detach())
            weight, bias = _gate_major(W, b)
            pre = Fn.linear(inp, weight, bias).view(T, B, 4, u)
            hc0 = hc[:, s * u:(s + 1) * u]
            if last and carried is not None and torch.is_grad_enabled():
                hc0 = rtrl_carry(hc0, [st.W, st.u, st.b], carried)  # identity 1, current stage only
            H, h, c, rec = _scan(pre, uu, hc0[..., 0], hc0[..., 1], keep, record=last and transport)
            feats.append(self._normalise(H, s, learn, decay))
            hcs.append(torch.stack([h, c], -1))
            if last and transport:
                new = _transport(carried, inp.detach(), keep, rec, st.u.detach())
        if learn:
            self.stage_steps.add_(T * B)
        rest = self.hidden_size - (stage + 1) * u
        if rest:
            feats.append(x.new_zeros(T, B, rest))
        y = torch.cat(feats, -1)
        if not return_state:
            return y, None
        if rest:
            hcs.append(hc.new_zeros(B, rest, 2))  # stages not started yet stay at state 0
        nxt = {"hc": torch.cat(hcs, 1).detach()}
        if transport:
            width = self.sensitivity_spec()["dhc_dW"][-1]
            SW = new[0].new_zeros(B, u, 2, 4, width)
            SW[..., :new[0].shape[-1]] = new[0]
            nxt.update(dhc_dW=SW, dhc_du=new[1], dhc_db=new[2],
                       sens_stage=x.new_full((B, 1), float(stage + 1)))
        return y, nxt

    def extra_repr(self) -> str:
        return (super().extra_repr() + f", columns_per_stage={self.columns_per_stage}, "
                f"steps_per_stage={self.steps_per_stage}, eps={self.eps}, beta={self.beta}")


class Constructive(CCN):
    """``constructive``: a CCN with one column per stage (Javed et al. 2023, Sec. 3.2): features are learned one at a
    time, each seeing x and all earlier (frozen, normalised) features. Options as ``ccn`` without
    ``columns_per_stage``."""

    name = "constructive"

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt",
                 steps_per_stage: Optional[int] = 1_000_000, eps: float = 0.01, beta: float = 0.99999,
                 forget_bias: float = 1.0):
        super().__init__(input_size, hidden_size, learning, columns_per_stage=1, steps_per_stage=steps_per_stage,
                         eps=eps, beta=beta, forget_bias=forget_bias)
