"""The element-wise LSTM (eLSTM) of Irie et al. (ICLR 2024, Sec. 3.1, App. A.1) with exact RTRL.

    f(t) = sigmoid(F x(t) + w_f * c(t-1) + b_f)          (Eq. 5 with the biases of Eq. 19)
    z(t) = tanh   (Z x(t) + w_z * c(t-1) + b_z)
    c(t) = f(t) * c(t-1) + (1 - f(t)) * z(t)              (Eq. 6)
    o(t) = sigmoid(O x(t) + W_o c(t));  h(t) = o(t) * c(t) (Eq. 7; W_o is N x N on c(t))

Only F, Z, w_f, w_z, b_f, b_z are in the recurrence; their sensitivities (Eqs. 12-14, 20-24) are

    fh = (c(t-1) - z) f (1 - f);  zh = (1 - f)(1 - z^2);  ch = f + w_f fh + w_z zh
    Fhat(t) = ch * Fhat(t-1) + outer(fh, x)      Zhat(t) = ch * Zhat(t-1) + outer(zh, x)
    w_f-hat(t) = ch * w_f-hat(t-1) + fh c(t-1)   (w_z likewise with zh; b_f, b_z without the c(t-1))

With ``signed_keep`` the keep gate takes values in (-1, 1), r = 2 f - 1, and the cell writes what it does
not keep, c(t) = r c(t-1) + (1 - |r|) z: at r = -1 a unit flips the sign of what it holds (a diagonal
recurrence with negative eigenvalues; Grazzi et al., ICLR 2025, show linear RNNs need them for parity).
Then fh = (c(t-1) - sign(r) z) (1 - r^2) / 2, zh = (1 - |r|)(1 - z^2), ch = r + w_f fh + w_z zh.

The learner never runs that recursion: identity 1 (``rtrl_carry``) gives the exact gradient from one
autograd pass; identity 2 (``decay_weights`` + one batched matmul) moves the sensitivities to the segment
end.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from r2ac.cores.base import RecurrentCore
from r2ac.cores.rtrl import decay_weights, rtrl_carry, transport_outer

#: the recurrent parameters in the order of their sensitivities
RECURRENT = ("F", "Z", "w_f", "w_z", "b_f", "b_z")


def chrono_bias(n: int, max_span: float, generator: torch.Generator | None = None) -> Tensor:
    """Chrono initialisation (Tallec & Ollivier, 2018) for the keep gate: retention times T_i drawn
    log-uniformly in [2, max_span], b_f = log(T_i - 1), so that 1 / (1 - sigmoid(b_f)) = T_i."""
    u = torch.rand(n, generator=generator)
    return u * math.log(max_span - 1.0)  # log(T_i - 1) with T_i - 1 log-uniform in [1, max_span - 1]


def signed_chrono_bias(bias: Tensor) -> Tensor:
    """The chrono bias for the signed keep gate r = 2 sigmoid(b) - 1: the same retention times T_i,
    1 / (1 - r) = T_i, from ``chrono_bias``'s b = log(T_i - 1): log(2 T_i - 1) = log(2 e^b + 1)."""
    return torch.log(2 * torch.exp(bias) + 1)


class ELSTM(RecurrentCore):
    """eLSTM core. Options:

    - ``forget_bias_init``: ``"chrono"`` (default; retention times log-uniform up to ``chrono_max``) or a
      number (every b_f set to it; the paper does not state its initialisation, 0 gives f ~ 0.5 and a
      memory that halves every step).
    - ``chrono_max``: the longest retention time of the chrono initialisation (default 1000 steps).
    - ``contractive``: keep ``2 |w_f| + |w_z| <= 1`` per unit (``project_``, after every optimizer step;
      default off). Then ``|ch| <= 1`` at every step (``|c(t-1) - z| <= 2``, ``1 - z^2 <= 1``), so the
      sensitivities, carried over a whole episode, grow at most linearly and cannot explode; the gradient
      stays exact for the constrained weights (a projection after the step, not a change of the gradient).
    - ``signed_keep``: the keep gate r = 2 f - 1 in (-1, 1) and c(t) = r c(t-1) + (1 - |r|) z (default off:
      r = f in (0, 1), the paper's eLSTM). A unit can flip the sign of what it holds, so one unit can keep
      the parity of a count. |c| <= 1 still, and the contractive bound above still gives |ch| <= 1
      ((1 - r^2) / 2 <= 1 - |r|). The chrono initialisation keeps its retention times (``signed_chrono_bias``).
    """

    name = "elstm"
    supports_rtrl = True

    def __init__(self, input_size: int, hidden_size: int, learning: str = "tbptt",
                 forget_bias_init: float | str = "chrono", chrono_max: float = 1000.0,
                 contractive: bool = False, signed_keep: bool = False):
        super().__init__(input_size, hidden_size, learning)
        if not isinstance(contractive, bool):
            raise ValueError(f"contractive must be true or false, got {contractive!r}")
        if not isinstance(signed_keep, bool):
            raise ValueError(f"signed_keep must be true or false, got {signed_keep!r}")
        N, D = hidden_size, input_size
        if not (forget_bias_init == "chrono" or isinstance(forget_bias_init, (int, float))):
            raise ValueError(f"forget_bias_init must be 'chrono' or a number, got {forget_bias_init!r}")
        if chrono_max <= 2:
            raise ValueError(f"chrono_max must be > 2 steps, got {chrono_max!r}")
        self.forget_bias_init = forget_bias_init
        self.chrono_max = float(chrono_max)
        self.contractive = contractive
        self.signed_keep = signed_keep
        self.F = nn.Parameter(torch.empty(N, D))
        self.Z = nn.Parameter(torch.empty(N, D))
        self.O = nn.Parameter(torch.empty(N, D))
        self.W_o = nn.Parameter(torch.empty(N, N))
        self.w_f = nn.Parameter(torch.empty(N))
        self.w_z = nn.Parameter(torch.empty(N))
        self.b_f = nn.Parameter(torch.empty(N))
        self.b_z = nn.Parameter(torch.empty(N))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        N, D = self.hidden_size, self.input_size
        for w in (self.F, self.Z, self.O):
            nn.init.uniform_(w, -1.0 / math.sqrt(D), 1.0 / math.sqrt(D))
        nn.init.uniform_(self.W_o, -1.0 / math.sqrt(N), 1.0 / math.sqrt(N))
        nn.init.uniform_(self.w_f, -1.0 / math.sqrt(N), 1.0 / math.sqrt(N))
        nn.init.uniform_(self.w_z, -1.0 / math.sqrt(N), 1.0 / math.sqrt(N))
        nn.init.zeros_(self.b_z)
        with torch.no_grad():
            if self.forget_bias_init == "chrono":
                b = chrono_bias(N, self.chrono_max)
                self.b_f.copy_(signed_chrono_bias(b) if self.signed_keep else b)
            else:
                self.b_f.fill_(float(self.forget_bias_init))
        self.project_()

    @torch.no_grad()
    def project_(self) -> None:
        """``contractive``: scale each unit's (w_f, w_z) down to ``2 |w_f| + |w_z| = 1`` where it exceeds 1."""
        if not self.contractive:
            return
        scale = (2 * self.w_f.abs() + self.w_z.abs()).clamp(min=1.0).reciprocal()
        self.w_f.mul_(scale)
        self.w_z.mul_(scale)

    def extra_repr(self) -> str:
        return (super().extra_repr() + (", contractive=True" if self.contractive else "")
                + (", signed_keep=True" if self.signed_keep else ""))

    # -- contract ------------------------------------------------------------------------------
    def hidden_spec(self):
        return {"c": (self.hidden_size,)}

    def sensitivity_spec(self):
        N, D = self.hidden_size, self.input_size
        return {"dc_dF": (N, D), "dc_dZ": (N, D), "dc_dw_f": (N,), "dc_dw_z": (N,), "dc_db_f": (N,), "dc_db_z": (N,)}

    def recurrent_parameters(self):
        return [getattr(self, n) for n in RECURRENT]

    def _forward(self, x, state, keep, return_state, sensitivities):
        N = self.hidden_size
        # All input projections of the segment in one matmul; the biases b_f, b_z are folded in.
        weight = torch.cat([self.F, self.Z, self.O], 0)
        bias = torch.cat([self.b_f, self.b_z, self.b_f.new_zeros(N)])
        pf, pz, po = Fn.linear(x, weight, bias).split(N, dim=-1)
        # unbind, not pf[t]: indexing in the loop makes backward zero-fill a [T, B, N] gradient per step
        pfs, pzs = pf.unbind(0), pz.unbind(0)
        c = state["c"]
        carried = [state[k] for k in self.sensitivity_spec()] if self.learning == "rtrl" and "dc_dF" in state else None
        if carried is not None and torch.is_grad_enabled():
            c = rtrl_carry(c, self.recurrent_parameters(), carried)  # identity 1
        transport = return_state and sensitivities
        cs, cps, fs, zs = [], [], [], []
        for t in range(x.shape[0]):
            cp = c * keep[t, :, None]
            f = torch.sigmoid(torch.addcmul(pfs[t], self.w_f, cp))
            z = torch.tanh(torch.addcmul(pzs[t], self.w_z, cp))
            if self.signed_keep:
                f = 2 * f - 1  # r in (-1, 1)
                c = f * cp + (1 - f.abs()) * z
            else:
                c = torch.lerp(z, cp, f)  # f * c(t-1) + (1 - f) * z
            cs.append(c)
            if transport:
                cps.append(cp)
                fs.append(f)
                zs.append(z)
        C = torch.stack(cs)
        y = torch.sigmoid(po + Fn.linear(C, self.W_o)) * C
        if not return_state:
            return y, None
        nxt = {"c": c.detach()}
        if transport:
            nxt.update(self._transport(carried, x, keep, torch.stack(cps), torch.stack(fs), torch.stack(zs)))
        return y, nxt

    @torch.no_grad()
    def _transport(self, carried, x, keep, cp, f, z):
        """Identity 2: the sensitivities at the segment end from those at its start, in one batched
        matmul per weight matrix (Eqs. 12-14, 20-24 summed in closed form)."""
        cp, f, z, x = cp.detach(), f.detach(), z.detach(), x.detach()
        if self.signed_keep:  # f holds r = 2 sigmoid - 1
            fh = (cp - torch.sign(f) * z) * (1 - f * f) / 2
            zh = (1 - f.abs()) * (1 - z * z)
        else:
            fh = (cp - z) * f * (1 - f)
            zh = (1 - f) * (1 - z * z)
        ch = f + self.w_f * fh + self.w_z * zh
        a, a0 = decay_weights(ch * keep[..., None])
        af, az = a * fh, a * zh
        s0 = dict(zip(self.sensitivity_spec(), carried)) if carried is not None else {}
        new = {
            "dc_dF": transport_outer(af, x, s0.get("dc_dF"), a0),
            "dc_dZ": transport_outer(az, x, s0.get("dc_dZ"), a0),
            "dc_dw_f": (af * cp).sum(0),
            "dc_dw_z": (az * cp).sum(0),
            "dc_db_f": af.sum(0),
            "dc_db_z": az.sum(0),
        }
        for k in ("dc_dw_f", "dc_dw_z", "dc_db_f", "dc_db_z"):
            if k in s0:
                new[k].addcmul_(s0[k], a0)
        return new
