"""feLSTM trained by SnAp-1 (Menick et al., ICLR 2021), the approximate-RTRL baseline of Irie et al.
(ICLR 2024, Table 2, App. A.5).

feLSTM (``r2ac.cores.standard.FELSTMCore``, same parameters):

    f = sigmoid(F x + W_f c(t-1) + b_f),  z = tanh(Z x + W_z c(t-1) + b_z),  c = f c(t-1) + (1 - f) z
    y = sigmoid(O x + W_o c) * c

SnAp-1 keeps, for every parameter that acts on unit i directly (row i of F, Z, W_f, W_z, b_f, b_z), only
the sensitivity of c_i, and propagates it with the diagonal of the recurrent Jacobian:

    fh = (c(t-1) - z) f (1 - f),  zh = (1 - f)(1 - z^2),  d_i = f_i + W_f[i,i] fh_i + W_z[i,i] zh_i
    S_F(t) = d * S_F(t-1) + fh x^T        S_Z likewise with zh
    S_Wf(t) = d * S_Wf(t-1) + fh c(t-1)^T  S_Wz likewise with zh        (N x N per sample)
    S_bf(t) = d * S_bf(t-1) + fh           S_bz likewise
    dL/dtheta ~= sum_t e(t) . S(t),        e(t) = dL(t)/dc(t) through the output at step t only

(the masked influence-matrix recursion of Menick et al.: (D S)_i = D_ii S_i because S_j has no entry for
unit i's parameters when j != i). For W_f, W_z diagonal the feLSTM is the eLSTM and SnAp-1 is exact RTRL.

Learner: SnAp-1's gradient is the BPTT gradient of the same forward pass in which c(t-1) reaches the gates
of other units as a constant: pre_f = F x + W_f c_d(t-1) + diag(W_f) (c(t-1) - c_d(t-1)) with
c_d = c.detach() (same values; the gradient from pre_f to c(t-1) is diag(W_f)). That graph is unit-wise,
so identity 1 (``rtrl_carry`` on c(t0)) and identity 2 (closed-form transport, as for the eLSTM with
w_f = diag(W_f)) hold for it exactly: the segmented result is SnAp-1 for any segment length.
O and W_o (not in the recurrence) get their exact gradients. With ``learning="tbptt"`` this core is the
plain feLSTM with truncated BPTT.
"""

from __future__ import annotations

import torch
import torch.nn.functional as Fn

from r2ac.cores.rtrl import decay_weights, rtrl_carry
from r2ac.cores.standard import FELSTMCore


class FELSTMSnAp1(FELSTMCore):
    """``felstm_snap1``: the feLSTM whose ``learning="rtrl"`` is SnAp-1 (approximate: ``exact_rtrl`` False).
    Parameters and state_dict as ``felstm``. Options: ``forget_bias`` (initial b_f, default 1.0)."""

    name = "felstm_snap1"
    supports_rtrl = True
    exact_rtrl = False

    def sensitivity_spec(self):
        N, D = self.hidden_size, self.input_size
        return {"dc_dF": (N, D), "dc_dZ": (N, D), "dc_dW_f": (N, N), "dc_dW_z": (N, N),
                "dc_db_f": (N,), "dc_db_z": (N,)}

    def recurrent_parameters(self):
        """Views of the stacked parameters in the order of the sensitivities: F, Z, W_f, W_z, b_f, b_z."""
        N = self.hidden_size
        wi, wh, b = self.weight_ih, self.weight_hh, self.bias
        return [wi[:N], wi[N:2 * N], wh[:N], wh[N:], b[:N], b[N:]]

    def _forward(self, x, state, keep, return_state, sensitivities):
        if self.learning != "rtrl":
            return super()._forward(x, state, keep, return_state, sensitivities)
        N = self.hidden_size
        pfz, po = Fn.linear(x, self.weight_ih).split([2 * N, N], -1)
        pfz = (pfz + self.bias).unbind(0)  # not pfz[t] in the loop: its backward zero-fills [T, B, 2N] per step
        whT = self.weight_hh.t()
        diag = self.weight_hh.detach().view(2, N, N).diagonal(dim1=1, dim2=2)  # [2, N]: W_f[i,i], W_z[i,i]
        c = state["c"]
        carried = [state[k] for k in self.sensitivity_spec()] if "dc_dF" in state else None
        if carried is not None and torch.is_grad_enabled():
            c = rtrl_carry(c, self.recurrent_parameters(), carried)  # identity 1
        transport = return_state and sensitivities
        cs, cps, fs, zs = [], [], [], []
        for t in range(x.shape[0]):
            cp = c * keep[t, :, None]
            cd = cp.detach()
            pf, pz = torch.addmm(pfz[t], cd, whT).chunk(2, -1)  # the full recurrence, as constants
            delta = cp - cd  # 0 in value; carries d/dc(t-1) through the diagonal only
            f = torch.sigmoid(torch.addcmul(pf, diag[0], delta))
            z = torch.tanh(torch.addcmul(pz, diag[1], delta))
            c = torch.lerp(z, cp, f)
            cs.append(c)
            if transport:
                cps.append(cd)
                fs.append(f.detach())
                zs.append(z.detach())
        C = torch.stack(cs)
        y = torch.sigmoid(po + Fn.linear(C, self.W_o)) * C
        if not return_state:
            return y, None
        nxt = {"c": c.detach()}
        if transport:
            nxt.update(self._transport(carried, x.detach(), keep, torch.stack(cps), torch.stack(fs),
                                       torch.stack(zs), diag))
        return y, nxt

    @torch.no_grad()
    def _transport(self, carried, x, keep, cp, f, z, diag):
        """Identity 2 for the SnAp-1 recursion: one batched matmul per sensitivity matrix."""
        fh = (cp - z) * f * (1 - f)
        zh = (1 - f) * (1 - z * z)
        d = f + diag[0] * fh + diag[1] * zh
        a, a0 = decay_weights(d * keep[..., None])
        af, az = a * fh, a * zh
        new = {
            "dc_dF": torch.einsum("tbn,tbd->bnd", af, x),
            "dc_dZ": torch.einsum("tbn,tbd->bnd", az, x),
            "dc_dW_f": torch.einsum("tbn,tbm->bnm", af, cp),
            "dc_dW_z": torch.einsum("tbn,tbm->bnm", az, cp),
            "dc_db_f": af.sum(0),
            "dc_db_z": az.sum(0),
        }
        if carried is not None:
            for v, s0 in zip(new.values(), carried):
                v.add_(s0 * (a0[..., None] if v.dim() == 3 else a0))
        return new
