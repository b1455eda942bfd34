"""Exactness and contract tests of the (online) LRU core (float64): one layer against full-sequence BPTT
and the paper's traces (Zucchet et al. 2023, Eqs. 12-17); several layers against an independent implementation of
the paper's online rule (exact traces per layer + spatial errors), and their alignment with BPTT."""

import math

import pytest
import torch
import torch.nn.functional as Fn

import r2ac.cores as cores
from r2ac.cores.lru import LRU

from coretools import rel_err as _rel_err, segment_grads as _segment_grads, sequence, state_shapes_over_T

T, B, H, N = 200, 3, 5, 4  # H = input features (and output features), N = complex units per layer
RECURRENT = ("nu_log", "theta_log", "gamma_log", "B_re", "B_im")


pytestmark = pytest.mark.usefixtures("float64")


def _data(seed=0, T=T, B=B, p_reset=0.03):
    return sequence(seed, T, B, H, H, p_reset)


def _lru(learning, seed=0, **kw):
    torch.manual_seed(seed)
    return LRU(H, N, learning=learning, **kw)






def _cos(a, b):
    return Fn.cosine_similarity(a.flatten(), b.flatten(), 0).item()


# -- one layer: exact -------------------------------------------------------------------------



def test_lru_tbptt_is_truncated():
    x, reset, w = _data()
    full = _segment_grads(_lru("rtrl"), x, reset, w, T)
    trunc = _segment_grads(_lru("tbptt"), x, reset, w, 7)
    assert max(_rel_err(trunc["lru.0." + n], full["lru.0." + n]) for n in RECURRENT) > 1e-2
    same = _segment_grads(_lru("tbptt"), x, reset, w, T)
    for name in full:
        assert _rel_err(same[name], full[name]) < 1e-12


def _lam_gamma_B(layer):
    p = {n: t.detach() for n, t in layer.named_parameters()}
    lam = torch.exp(torch.complex(-torch.exp(p["nu_log"]), torch.exp(p["theta_log"])))
    return lam, torch.exp(p["gamma_log"]), torch.complex(p["B_re"], p["B_im"]), p


def _paper_stepwise(layer, x, reset):
    """Independent step-by-step traces of Zucchet et al. 2023 (Eqs. 8, 12-14), complex: returns h and the traces
    e_lambda, e_gamma, e_B after every step."""
    lam, gamma, Bc, _ = _lam_gamma_B(layer)
    Tn, Bn, _ = x.shape
    h = torch.zeros(Bn, N, dtype=torch.complex128)
    e_lam, e_gam = torch.zeros_like(h), torch.zeros_like(h)
    e_B = torch.zeros(Bn, N, H, dtype=torch.complex128)
    out = []
    for t in range(Tn):
        m = (~reset[t]).to(torch.complex128)[:, None]
        h, e_lam, e_gam, e_B = h * m, e_lam * m, e_gam * m, e_B * m[..., None]
        Bx = x[t].to(torch.complex128) @ Bc.T
        e_lam = lam * e_lam + h                                    # Eq. 12 (h = h(t-1))
        e_gam = lam * e_gam + Bx                                   # Eq. 13
        e_B = lam[:, None] * e_B + (gamma[:, None] * x[t][:, None, :])  # Eq. 14
        h = lam * h + gamma * Bx                                   # Eq. 8
        out.append({"h": h, "lam": e_lam, "gam": e_gam, "B": e_B})
    return out


def _pair(z, dim=-1):
    return torch.stack([z.real, z.imag], dim)


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_lru_carried_sensitivities_match_paper_traces(seg):
    x, reset, _ = _data(seed=1, T=100)
    core = _lru("rtrl", seed=1)
    layer = core.lru[0]
    ref = _paper_stepwise(layer, x, reset)
    lam, gamma, _, p = _lam_gamma_B(layer)
    state = core.initial_state(B)
    with torch.no_grad():
        for s in range(0, 100, seg):
            _, state = core(x[s:s + seg], state, reset[s:s + seg])
            r = ref[min(s + seg, 100) - 1]
            assert torch.allclose(state["h"], _pair(r["h"]), rtol=1e-12, atol=1e-13)
            want = {
                "dh_dnu_log": _pair(-torch.exp(p["nu_log"]) * lam * r["lam"]),
                "dh_dtheta_log": _pair(1j * torch.exp(p["theta_log"]) * lam * r["lam"]),
                "dh_dgamma_log": _pair(gamma * r["gam"]),
                "dh_dB": _pair(r["B"], 2),
            }
            for k, v in want.items():
                assert torch.allclose(state[k], v, rtol=1e-10, atol=1e-12), k


def test_lru_gradient_from_paper_traces():
    """Eqs. 15-17 with delta(t) = dL(t)/dh(t) through the read-out, and the chain rule to the real
    parameters (nu_log, theta_log, gamma_log, Re B, Im B), equal the core's gradient."""
    x, reset, w = _data(seed=2, T=40)
    core = _lru("rtrl", seed=2)
    layer = core.lru[0]
    ref = _paper_stepwise(layer, x, reset)
    lam, gamma, _, p = _lam_gamma_B(layer)
    grads = _segment_grads(core, x, reset, w, 9)
    dlam = 0
    dgam = 0
    dB = 0
    for t in range(40):
        h = ref[t]["h"].clone().requires_grad_(True)
        y = h.real @ p["C_re"].T - h.imag @ p["C_im"].T + p["D"] * x[t]
        (y * w[t]).sum().backward()
        delta = h.grad.conj() / 2  # Wirtinger dL/dh from torch's convention dL/dRe + i dL/dIm
        dlam = dlam + (delta * ref[t]["lam"]).sum(0)                # Eq. 15
        dgam = dgam + 2 * (delta * ref[t]["gam"]).real.sum(0)       # Eq. 16
        dB = dB + (delta[..., None] * ref[t]["B"]).sum(0)           # Eq. 17
    want = {
        "nu_log": 2 * (dlam * -torch.exp(p["nu_log"]) * lam).real,
        "theta_log": 2 * (dlam * 1j * torch.exp(p["theta_log"]) * lam).real,
        "gamma_log": dgam * gamma,
        "B_re": 2 * dB.real,
        "B_im": 2 * (1j * dB).real,
    }
    for k, v in want.items():
        assert _rel_err(grads["lru.0." + k], v) < 1e-10, k


# -- several layers: the paper's online rule ----------------------------------------------------

def _online_rule_reference(core, x, reset, w):
    """The online learning rule of Zucchet et al. 2023 written step by step: per layer exact traces (Eqs. 12-14)
    from that layer's inputs; per step, errors delta^l(t) = dL(t)/dh^l(t) by spatial backprop through
    the layers above at step t only (h(t-1) held fixed); recurrent parameters get Eqs. 15-17, the other
    parameters the spatial gradient of L(t)."""
    Tn, Bn, _ = x.shape
    L = len(core.lru)
    consts = [_lam_gamma_B(layer) for layer in core.lru]
    nonrec = [(n, q) for n, q in core.named_parameters() if n.split(".")[-1] not in RECURRENT]
    grads = {n: torch.zeros_like(q) for n, q in core.named_parameters()}
    c128 = torch.complex128
    h = [torch.zeros(Bn, N, dtype=c128) for _ in range(L)]
    e_lam = [torch.zeros(Bn, N, dtype=c128) for _ in range(L)]
    e_gam = [torch.zeros(Bn, N, dtype=c128) for _ in range(L)]
    e_B = [torch.zeros(Bn, N, H, dtype=c128) for _ in range(L)]
    for t in range(Tn):
        m = (~reset[t]).to(c128)[:, None]
        z = x[t]
        h_new, us = [], []
        for l, layer in enumerate(core.lru):
            lam, gamma, Bc, _ = consts[l]
            h[l], e_lam[l], e_gam[l], e_B[l] = h[l] * m, e_lam[l] * m, e_gam[l] * m, e_B[l] * m[..., None]
            u = layer.norm(z)
            hl = lam * h[l] + gamma * (u.to(c128) @ Bc.T)  # h(t-1) is a constant here
            y = hl.real @ layer.C_re.T - hl.imag @ layer.C_im.T + layer.D * u
            a, b = layer.glu(Fn.gelu(y)).chunk(2, -1)
            z = z + a * torch.sigmoid(b)
            h_new.append(hl)
            us.append(u.detach())
        loss = (z * w[t]).sum()
        g = torch.autograd.grad(loss, h_new + [q for _, q in nonrec])
        for (n, _), gq in zip(nonrec, g[L:]):
            grads[n] += gq
        for l in range(L):
            lam, gamma, Bc, p = consts[l]
            Bu = us[l].to(c128) @ Bc.T
            e_lam[l] = lam * e_lam[l] + h[l]
            e_gam[l] = lam * e_gam[l] + Bu
            e_B[l] = lam[:, None] * e_B[l] + gamma[:, None] * us[l][:, None, :]
            h[l] = h_new[l].detach()
            two_delta = g[l].conj()  # 2 * Wirtinger error
            dlam = (two_delta * e_lam[l]).sum(0)
            dB = (two_delta[..., None] * e_B[l]).sum(0)
            pre = f"lru.{l}."
            grads[pre + "nu_log"] += (dlam * -torch.exp(p["nu_log"]) * lam).real
            grads[pre + "theta_log"] += (dlam * 1j * torch.exp(p["theta_log"]) * lam).real
            grads[pre + "gamma_log"] += (two_delta * e_gam[l]).real.sum(0) * gamma
            grads[pre + "B_re"] += dB.real
            grads[pre + "B_im"] += (1j * dB).real
    return grads


def test_multilayer_rtrl_is_the_papers_online_rule():
    x, reset, w = _data(seed=5, T=40)
    core = _lru("rtrl", seed=5, layers=3)
    ref = _online_rule_reference(core, x, reset, w)
    got = _segment_grads(core, x, reset, w, 7)
    for name in ref:
        assert _rel_err(got[name], ref[name]) < 1e-9, name


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_multilayer_rtrl_independent_of_segmentation(seg):
    x, reset, w = _data(seed=6)
    core = _lru("rtrl", seed=6, layers=2)
    whole = _segment_grads(core, x, reset, w, T)
    got = _segment_grads(core, x, reset, w, seg)
    for name in whole:
        assert _rel_err(got[name], whole[name]) < 1e-9, name


def test_multilayer_alignment_with_bptt(capsys):
    """The online (spatial) gradient vs full BPTT: the top block's LRU, read-out and GLU are exact, the
    lower layers aligned; with layers=1 everything is exact."""
    x, reset, w = _data(seed=7)
    L = 3
    online = _segment_grads(_lru("rtrl", seed=7, layers=L), x, reset, w, 7)
    bptt = _segment_grads(_lru("tbptt", seed=7, layers=L), x, reset, w, T)
    top = f"lru.{L - 1}."
    for n in RECURRENT + ("C_re", "C_im", "D", "glu.weight", "glu.bias"):
        assert _rel_err(online[top + n], bptt[top + n]) < 1e-9, n
    flat = lambda g: torch.cat([v.flatten() for v in g.values()])  # noqa: E731
    overall = _cos(flat(online), flat(bptt))
    per_layer = {
        l: _cos(torch.cat([online[f"lru.{l}.{n}"].flatten() for n in RECURRENT]),
                torch.cat([bptt[f"lru.{l}.{n}"].flatten() for n in RECURRENT]))
        for l in range(L)
    }
    with capsys.disabled():
        print(f"\n[lru layers={L}] cosine(online, BPTT): all parameters {overall:.4f}; recurrent parameters "
              + ", ".join(f"layer {l}: {c:.4f}" for l, c in per_layer.items()))
    assert overall > 0.5 and min(per_layer.values()) > 0.3
    assert per_layer[L - 1] > 1 - 1e-9
    one_online = _segment_grads(_lru("rtrl", seed=7), x, reset, w, 7)
    one_bptt = _segment_grads(_lru("tbptt", seed=7), x, reset, w, T)
    assert _cos(flat(one_online), flat(one_bptt)) > 1 - 1e-12


def test_multilayer_tbptt_single_segment_is_bptt_and_values_do_not_depend_on_learning():
    x, reset, w = _data(seed=8, T=30)
    a, b = _lru("rtrl", seed=8, layers=2), _lru("tbptt", seed=8, layers=2)
    ya, _ = a(x, a.initial_state(B), reset)
    yb, _ = b(x, b.initial_state(B), reset)
    assert torch.allclose(ya, yb, rtol=1e-13, atol=1e-14)
    assert set(a.state_spec()) == {f"{k}_{l}" for l in range(2)
                                   for k in ("h", "dh_dnu_log", "dh_dtheta_log", "dh_dgamma_log", "dh_dB")}


# -- contract ---------------------------------------------------------------------------------

@pytest.mark.parametrize("layers", [1, 2])
def test_lru_state_size_independent_of_T(layers):
    core = _lru("rtrl", layers=layers)
    assert state_shapes_over_T(core, _data, B) == layers * B * (2 * N * 4 + 2 * N * H)
    assert core.output_size == H






def test_lru_init():
    core = _lru("tbptt", r_min=0.4, r_max=0.7, max_phase=1.0)
    layer = core.lru[0]
    lam, gamma, _, _ = _lam_gamma_B(layer)
    assert ((lam.abs() >= 0.4 - 1e-12) & (lam.abs() <= 0.7 + 1e-12)).all()
    assert ((lam.angle() > 0) & (lam.angle() <= 1.0 + 1e-12)).all()
    assert torch.allclose(gamma, torch.sqrt(1 - lam.abs() ** 2))


def test_lru_bad_options_and_input():
    with pytest.raises(ValueError, match="layers"):
        LRU(H, N, layers=0)
    with pytest.raises(ValueError, match="r_min"):
        LRU(H, N, r_min=0.95, r_max=0.9)
    core = _lru("rtrl")
    with pytest.raises(ValueError, match="input_size=5"):
        core(torch.randn(2, B, H + 1), core.initial_state(B), torch.zeros(2, B, dtype=torch.bool))
    with pytest.raises(TypeError, match="reset must have dtype torch.bool"):
        core(torch.randn(2, B, H), core.initial_state(B), torch.zeros(2, B))


def test_lru_through_make_core(monkeypatch):
    monkeypatch.setitem(cores.CORES, "lru", LRU)
    assert "lru" in cores.rtrl_cores()
    assert {"layers", "r_min", "r_max", "max_phase"} <= set(cores.core_options("lru"))
    core = cores.make_core("lru", H, N, learning="rtrl", layers=2)
    assert isinstance(core, LRU) and core.num_layers == 2 and math.isclose(core.max_phase, 2 * math.pi)
