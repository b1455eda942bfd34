"""feLSTM + SnAp-1: the core's (segmented) gradient equals a direct step-by-step SnAp-1 written from its
definition; with diagonal recurrent matrices SnAp-1 is exact RTRL and equals the eLSTM's gradient."""

import pytest
import torch

import r2ac.cores as cores
from r2ac.cores.elstm import ELSTM
from r2ac.cores.snap import FELSTMSnAp1
from r2ac.cores.standard import FELSTMCore

from coretools import rel_err as _rel_err, segment_grads as _segment_grads, sequence

T, B, D, N = 120, 3, 5, 4


pytestmark = pytest.mark.usefixtures("float64")


def _data(seed=0, T=T, B=B, D=D, N=N, p_reset=0.03):
    return sequence(seed, T, B, D, N, p_reset)






def _snap(learning="rtrl", seed=0, diagonal=False):
    torch.manual_seed(seed)
    core = FELSTMSnAp1(D, N, learning=learning)
    with torch.no_grad():
        core.weight_hh.mul_(2.0)  # a recurrence strong enough for the approximation to matter
        core.bias.uniform_(-1.0, 1.0)
        if diagonal:
            core.weight_hh.copy_(torch.cat([torch.diag(torch.diagonal(m)) for m in core.weight_hh.view(2, N, N)]))
    return core


def _snap1_stepwise(core, x, reset, w):
    """SnAp-1 from its definition (Menick et al. 2021): the influence matrix d c(t) / d theta restricted to
    the entries of unit i w.r.t. the parameters acting on unit i directly, propagated with the diagonal of
    the recurrent Jacobian; gradient sum_t e(t) . S(t), e(t) = dL(t)/dc(t) through the output at t only."""
    wi, wh, b, Wo = (p.detach() for p in (core.weight_ih, core.weight_hh, core.bias, core.W_o))
    F, Z, O = wi[:N], wi[N:2 * N], wi[2 * N:]
    Wf, Wz, bf, bz = wh[:N], wh[N:], b[:N], b[N:]
    Tn, Bn, _ = x.shape
    c = torch.zeros(Bn, N)
    S = {"F": torch.zeros(Bn, N, D), "Z": torch.zeros(Bn, N, D), "W_f": torch.zeros(Bn, N, N),
         "W_z": torch.zeros(Bn, N, N), "b_f": torch.zeros(Bn, N), "b_z": torch.zeros(Bn, N)}
    grads = {k: torch.zeros(v.shape[1:]) for k, v in S.items()}
    out = []
    for t in range(Tn):
        for bb in range(Bn):
            if reset[t, bb]:
                c[bb] = 0
                for k in S:
                    S[k][bb] = 0
        f = torch.sigmoid(x[t] @ F.T + c @ Wf.T + bf)
        z = torch.tanh(x[t] @ Z.T + c @ Wz.T + bz)
        fh = (c - z) * f * (1 - f)  # d c_i / d (f pre-activation)_i
        zh = (1 - f) * (1 - z ** 2)
        Jdiag = f + torch.diagonal(Wf) * fh + torch.diagonal(Wz) * zh  # diagonal of d c(t) / d c(t-1)
        S["F"] = Jdiag[..., None] * S["F"] + fh[..., None] * x[t][:, None, :]
        S["Z"] = Jdiag[..., None] * S["Z"] + zh[..., None] * x[t][:, None, :]
        S["W_f"] = Jdiag[..., None] * S["W_f"] + fh[..., None] * c[:, None, :]
        S["W_z"] = Jdiag[..., None] * S["W_z"] + zh[..., None] * c[:, None, :]
        S["b_f"] = Jdiag * S["b_f"] + fh
        S["b_z"] = Jdiag * S["b_z"] + zh
        c = f * c + (1 - f) * z
        cc = c.clone().requires_grad_(True)
        ((torch.sigmoid(x[t] @ O.T + cc @ Wo.T) * cc) * w[t]).sum().backward()
        for k in S:
            grads[k] += torch.einsum("bn,bn...->n...", cc.grad, S[k])
        out.append({"c": c.clone(), **{k: v.clone() for k, v in S.items()}})
    return out, grads


def _split(g):
    """The core's stacked gradients as F, Z, W_f, W_z, b_f, b_z."""
    wi, wh, b = g["weight_ih"], g["weight_hh"], g["bias"]
    return {"F": wi[:N], "Z": wi[N:2 * N], "W_f": wh[:N], "W_z": wh[N:], "b_f": b[:N], "b_z": b[N:]}


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_snap1_gradient_equals_stepwise_definition(seg):
    x, reset, w = _data()
    core = _snap()
    ref, want = _snap1_stepwise(core, x, reset, w)
    got = _segment_grads(core, x, reset, w, seg)
    for k, v in _split(got).items():
        assert _rel_err(v, want[k]) < 1e-9, k
    # O and W_o are outside the recurrence: their gradients are exact (as with full BPTT)
    bptt = _segment_grads(core, x, reset, w, T)
    assert _rel_err(got["W_o"], bptt["W_o"]) < 1e-9
    assert _rel_err(got["weight_ih"][2 * N:], bptt["weight_ih"][2 * N:]) < 1e-9


@pytest.mark.parametrize("seg", [1, 7])
def test_snap1_carried_sensitivities_equal_stepwise(seg):
    Tn = 60
    x, reset, w = _data(seed=1, T=Tn)
    core = _snap(seed=1)
    ref, _ = _snap1_stepwise(core, x, reset, w)
    state = core.initial_state(B)
    with torch.no_grad():
        for s in range(0, Tn, seg):
            _, state = core(x[s:s + seg], state, reset[s:s + seg])
            r = ref[min(s + seg, Tn) - 1]
            assert torch.allclose(state["c"], r["c"], rtol=1e-12, atol=1e-13)
            for k in ("F", "Z", "W_f", "W_z", "b_f", "b_z"):
                assert torch.allclose(state["dc_d" + k], r[k], rtol=1e-10, atol=1e-12), k


def test_snap1_is_approximate_for_full_recurrence():
    x, reset, w = _data()
    core = _snap()
    snap = _segment_grads(core, x, reset, w, 7)
    tb = _fwd_bptt(core, x, reset, w)
    assert _rel_err(snap["weight_hh"], tb["weight_hh"]) > 1e-3  # SnAp-1 is not the exact gradient here
    assert not FELSTMSnAp1.exact_rtrl


def _fwd_bptt(snap_core, x, reset, w):
    """Full-sequence BPTT of the same feLSTM (its ``felstm`` twin, one segment)."""
    twin = FELSTMCore(D, N, learning="tbptt")
    twin.load_state_dict(snap_core.state_dict())
    return _segment_grads(twin, x, reset, w, x.shape[0])


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_snap1_with_diagonal_recurrence_is_exact_and_equals_elstm(seg):
    x, reset, w = _data(seed=2)
    core = _snap(seed=2, diagonal=True)
    got = _segment_grads(core, x, reset, w, seg)
    # = full BPTT of the feLSTM, for every parameter (also the off-diagonal entries of W_f, W_z)
    full = _fwd_bptt(core, x, reset, w)
    for n in full:
        assert _rel_err(got[n], full[n]) < 1e-9, n
    # = the eLSTM's exact RTRL gradient on the same weights (w_f, w_z = the diagonals)
    el = ELSTM(D, N, learning="rtrl", forget_bias_init=0.0)
    g = _split({k: v.detach() for k, v in core.named_parameters()})
    with torch.no_grad():
        el.F.copy_(g["F"]), el.Z.copy_(g["Z"]), el.O.copy_(core.weight_ih[2 * N:]), el.W_o.copy_(core.W_o)
        el.w_f.copy_(torch.diagonal(g["W_f"])), el.w_z.copy_(torch.diagonal(g["W_z"]))
        el.b_f.copy_(g["b_f"]), el.b_z.copy_(g["b_z"])
    ge = _segment_grads(el, x, reset, w, seg)
    s = _split(got)
    for mine, theirs in (("F", "F"), ("Z", "Z"), ("b_f", "b_f"), ("b_z", "b_z")):
        assert _rel_err(s[mine], ge[theirs]) < 1e-9, mine
    assert _rel_err(torch.diagonal(s["W_f"]), ge["w_f"]) < 1e-9
    assert _rel_err(torch.diagonal(s["W_z"]), ge["w_z"]) < 1e-9
    assert _rel_err(got["weight_ih"][2 * N:], ge["O"]) < 1e-9 and _rel_err(got["W_o"], ge["W_o"]) < 1e-9


def test_snap1_tbptt_mode_is_felstm_and_registration(monkeypatch):
    x, reset, w = _data(T=30)
    core = _snap("tbptt")
    twin = FELSTMCore(D, N)
    twin.load_state_dict(core.state_dict())
    a, b = _segment_grads(core, x, reset, w, 7), _segment_grads(twin, x, reset, w, 7)
    assert all(torch.allclose(a[n], b[n], rtol=1e-12, atol=1e-14) for n in a)
    monkeypatch.setitem(cores.CORES, FELSTMSnAp1.name, FELSTMSnAp1)
    c = cores.make_core("felstm_snap1", D, N, learning="rtrl")
    assert "felstm_snap1" in cores.rtrl_cores() and c.exact_rtrl is False
    assert c.state_spec()["dc_dW_f"] == (N, N)
    with torch.no_grad():  # actors: hidden-only stepping and the re-run agree
        st = c.initial_state(B)
        y_full, full = c(x, st, reset)
        h, ys = {"c": st["c"]}, []
        for t in range(30):
            y, h = c(x[t:t + 1], h, reset[t:t + 1], sensitivities=False)
            ys.append(y)
    assert torch.allclose(torch.cat(ys), y_full, rtol=1e-12, atol=1e-14)
    assert torch.allclose(h["c"], full["c"], rtol=1e-12, atol=1e-14)
