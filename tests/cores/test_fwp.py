"""Linear fast-weight programmer (Irie et al. 2024, App. A.2): float64 exactness of RTRL against full-sequence BPTT and
against an independent step-by-step implementation of Eqs. 41-43 and 51-52."""

import pytest
import torch

import r2ac.cores as cores
from r2ac.cores.fwp import FastWeights

from coretools import rel_err as _rel_err, segment_grads as _segment_grads, sequence

T, B, D, N, NK = 200, 3, 5, 4, 3


pytestmark = pytest.mark.usefixtures("float64")


def _data(seed=0, T=T, B=B, D=D, N=N, p_reset=0.03):
    return sequence(seed, T, B, D, N, p_reset)






def _fwp(learning="rtrl", seed=0, **kw):
    torch.manual_seed(seed)
    kw.setdefault("key_size", NK)
    return FastWeights(D, N, learning=learning, **kw)


# RTRL against full-sequence BPTT (default chunks of 128 and chunks of 16): tests/cores/test_cores.py
# (test_rtrl_gradient_equals_full_bptt).


def test_fwp_tbptt_is_truncated_and_one_segment_is_bptt():
    x, reset, w = _data()
    full = _segment_grads(_fwp("rtrl"), x, reset, w, T)
    trunc = _segment_grads(_fwp("tbptt"), x, reset, w, 7)
    assert max(_rel_err(trunc[n], full[n]) for n in ("K", "V")) > 1e-2
    same = _segment_grads(_fwp("tbptt"), x, reset, w, T)
    for name in full:
        assert _rel_err(same[name], full[name]) < 1e-12


def _paper_stepwise(core, x, reset, w):
    """Eqs. 41-43 step by step with the RTRL recursion of Eqs. 51-52:
    Khat(t) = Khat(t-1) + v x^T, Vhat(t) = Vhat(t-1) + k x^T, dL/dK += E^T Khat, dL/dV += E Vhat with
    E(t) = dL(t)/dW(t) = w(t) sigmoid(q(t))^T for the loss L(t) = <w(t), y(t)>. Returns the states and
    sensitivities after every step and the accumulated gradients."""
    K, V, Q = (p.detach() for p in (core.K, core.V, core.Q))
    Tn, Bn, _ = x.shape
    W = torch.zeros(Bn, N, NK)
    Khat, Vhat = torch.zeros(Bn, N, D), torch.zeros(Bn, NK, D)
    gK, gV = torch.zeros_like(K), torch.zeros_like(V)
    out = []
    for t in range(Tn):
        for b in range(Bn):
            if reset[t, b]:
                W[b], Khat[b], Vhat[b] = 0, 0, 0
        for b in range(Bn):
            k, v, q = K @ x[t, b], V @ x[t, b], Q @ x[t, b]
            W[b] = W[b] + torch.outer(v, k)              # Eq. 42
            Khat[b] = Khat[b] + torch.outer(v, x[t, b])  # Eq. 51 right
            Vhat[b] = Vhat[b] + torch.outer(k, x[t, b])  # Eq. 52 right
            E = torch.outer(w[t, b], torch.sigmoid(q))   # dL(t)/dW(t), from Eq. 43
            gK += E.T @ Khat[b]                          # Eq. 51 left
            gV += E @ Vhat[b]                            # Eq. 52 left
        out.append({"W": W.clone(), "dW_dK": Khat.clone(), "dW_dV": Vhat.clone()})
    return out, gK, gV


def test_fwp_matches_paper_recursion():
    Tn = 60
    x, reset, w = _data(seed=1, T=Tn)
    core = _fwp(seed=1, chunk_size=16)
    ref, gK, gV = _paper_stepwise(core, x, reset, w)
    for seg in (1, 7, 25):
        state = core.initial_state(B)
        with torch.no_grad():
            for s in range(0, Tn, seg):
                _, state = core(x[s:s + seg], state, reset[s:s + seg])
                r = ref[min(s + seg, Tn) - 1]
                for k in r:
                    assert torch.allclose(state[k], r[k], rtol=1e-12, atol=1e-12), (seg, k)
        got = _segment_grads(core, x, reset, w, seg)
        assert _rel_err(got["K"], gK) < 1e-10 and _rel_err(got["V"], gV) < 1e-10


def test_fwp_outputs_independent_of_chunking_and_stepping():
    x, reset, _ = _data(T=50)
    core = _fwp(chunk_size=50)
    st0 = core.initial_state(B)
    with torch.no_grad():
        y_ref, s_ref = core(x, st0, reset)
        for chunk in (1, 7, 13):
            core.chunk_size = chunk
            y, s = core(x, st0, reset)
            assert torch.allclose(y, y_ref, rtol=1e-12, atol=1e-12)
            assert all(torch.allclose(s[k], s_ref[k], rtol=1e-12, atol=1e-12) for k in s)
        hidden, ys = {"W": st0["W"]}, []
        for t in range(50):
            y, hidden = core(x[t:t + 1], hidden, reset[t:t + 1], sensitivities=False)
            ys.append(y)
    assert set(hidden) == {"W"}
    assert torch.allclose(torch.cat(ys), y_ref, rtol=1e-12, atol=1e-12)
    assert torch.allclose(hidden["W"], s_ref["W"], rtol=1e-12, atol=1e-12)


def test_fwp_reset_zeroes_fast_weights():
    x, _, _ = _data(T=20)
    core = _fwp()
    reset = torch.zeros(20, B, dtype=torch.bool)
    reset[12, 0] = True
    with torch.no_grad():
        _, st = core(x, core.initial_state(B), torch.zeros(20, B, dtype=torch.bool))
        y, _ = core(x, st, reset)
        y_fresh, _ = core(x[12:, :1], core.initial_state(1), torch.zeros(8, 1, dtype=torch.bool))
    assert torch.allclose(y[12:, :1], y_fresh, rtol=1e-13, atol=1e-14)


def test_fwp_state_shapes_and_registration(monkeypatch):
    monkeypatch.setitem(cores.CORES, FastWeights.name, FastWeights)
    core = cores.make_core("fwp", D, N, learning="rtrl", key_size=NK, chunk_size=8)
    assert core.state_spec() == {"W": (N, NK), "dW_dK": (N, D), "dW_dV": (NK, D)}
    assert "fwp" in cores.rtrl_cores() and core.exact_rtrl
    assert cores.make_core("fwp", D, N).hidden_spec() == {"W": (N, N)}
    with pytest.raises(ValueError, match="key_size"):
        FastWeights(D, N, key_size=0)
