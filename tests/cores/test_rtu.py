"""Exactness and contract tests of the RTU core (float64, against full-sequence BPTT and against the
paper's step-by-step trace recursion, Elelimy et al. 2024, Eqs. 23-27 with the dgamma/dnu_log term)."""

import math

import pytest
import torch

import r2ac.cores as cores
from r2ac.cores.rtrl import rtrl_carry
from r2ac.cores.rtu import RTU, mul_neg_i

from coretools import (assert_carried_matches_stepwise, rel_err as _rel_err, segment_grads as _segment_grads,
                       sequence, state_shapes_over_T)

T, B, D, N = 200, 3, 5, 4
VARIANTS = ["linear", "nonlinear"]


pytestmark = pytest.mark.usefixtures("float64")


def _data(seed=0, T=T, B=B, p_reset=0.03):
    return sequence(seed, T, B, D, 2 * N, p_reset)


def _rtu(learning, variant="linear", seed=0, **kw):
    torch.manual_seed(seed)
    return RTU(D, N, learning=learning, variant=variant, **kw)






# RTRL against full-sequence BPTT, both variants and every activation: tests/cores/test_cores.py
# (test_rtrl_gradient_equals_full_bptt).


@pytest.mark.parametrize("variant", VARIANTS)
def test_rtu_tbptt_is_truncated(variant):
    x, reset, w = _data()
    full = _segment_grads(_rtu("rtrl", variant), x, reset, w, T)
    trunc = _segment_grads(_rtu("tbptt", variant), x, reset, w, 7)
    assert max(_rel_err(trunc[n], full[n]) for n in full) > 1e-2
    same = _segment_grads(_rtu("tbptt", variant), x, reset, w, T)
    for name in full:
        assert _rel_err(same[name], full[name]) < 1e-12


_FPRIME = {"relu": lambda p: (p > 0).double(), "tanh": lambda p: 1 - torch.tanh(p) ** 2}
_F = {"relu": torch.relu, "tanh": torch.tanh}


def _paper_stepwise(core, x, reset):
    """Independent step-by-step RTRL of Elelimy et al. 2024 in real form (Eqs. 2/4, 23-27; dgamma/dnu_log kept):
    returns the state and the traces after every step."""
    p = {n: t.detach() for n, t in core.named_parameters()}
    f, fp = _F[core.activation], _FPRIME[core.activation]
    Tn, Bn, _ = x.shape
    e_nu, e_th = torch.exp(p["nu_log"]), torch.exp(p["theta_log"])
    r = torch.exp(-e_nu)
    theta = e_th
    g, phi, gamma = r * torch.cos(theta), r * torch.sin(theta), torch.sqrt(1 - r * r)
    dg = {"nu": -g * e_nu, "th": -phi * e_th}           # dg/dnu_log, dg/dtheta_log
    dphi = {"nu": -phi * e_nu, "th": g * e_th}
    dgamma = {"nu": e_nu * r * r / gamma, "th": torch.zeros(N)}  # the term Eq. 29 drops
    c1, c2 = torch.zeros(Bn, N), torch.zeros(Bn, N)
    S = {k: [torch.zeros(Bn, N), torch.zeros(Bn, N)] for k in ("nu", "th")}
    S.update({k: [torch.zeros(Bn, N, D), torch.zeros(Bn, N, D)] for k in ("W1", "W2")})
    out = []
    for t in range(Tn):
        m = (~reset[t]).double()[:, None]
        c1, c2 = c1 * m, c2 * m
        for k in S:
            S[k] = [s * (m if s.dim() == 2 else m[..., None]) for s in S[k]]
        u1, u2 = x[t] @ p["W1"].T, x[t] @ p["W2"].T
        pre1 = g * c1 - phi * c2 + gamma * u1
        pre2 = g * c2 + phi * c1 + gamma * u2
        if core.variant == "nonlinear":
            d1, d2 = fp(pre1), fp(pre2)
        else:
            d1, d2 = torch.ones_like(pre1), torch.ones_like(pre2)
        new = {}
        for k in ("nu", "th"):
            s1, s2 = S[k]
            new[k] = [d1 * (dg[k] * c1 + g * s1 - dphi[k] * c2 - phi * s2 + dgamma[k] * u1),
                      d2 * (dg[k] * c2 + g * s2 + dphi[k] * c1 + phi * s1 + dgamma[k] * u2)]
        gx = gamma[:, None] * x[t][:, None, :]
        gg, pp = g[:, None], phi[:, None]
        s1, s2 = S["W1"]
        new["W1"] = [d1[..., None] * (gg * s1 - pp * s2 + gx), d2[..., None] * (gg * s2 + pp * s1)]
        s1, s2 = S["W2"]
        new["W2"] = [d1[..., None] * (gg * s1 - pp * s2), d2[..., None] * (gg * s2 + pp * s1 + gx)]
        S = new
        c1, c2 = (f(pre1), f(pre2)) if core.variant == "nonlinear" else (pre1, pre2)
        out.append({"c": torch.stack([c1, c2], 2),
                    **{k: torch.stack(v, 2) for k, v in S.items()}})
    return out


_KEYS = {"nu": "dc_dnu_log", "th": "dc_dtheta_log", "W1": "dc_dW1", "W2": "dc_dW2"}


def _times_i(s):
    """i * s for s in pair layout [B, n, 2, *tail]."""
    return torch.stack([-s[:, :, 1], s[:, :, 0]], 2)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seg", [1, 7, 50])
def test_rtu_carried_sensitivities_match_paper_recursion(variant, seg):
    x, reset, _ = _data(seed=1, T=100)
    core = _rtu("rtrl", variant, seed=1)
    ref = _paper_stepwise(core, x, reset)

    def read(key):  # the linear variant stores no dc_dW2: it is i dc_dW1
        if key == "dc_dW2" and variant == "linear":
            return lambda st: _times_i(st["dc_dW1"])
        return lambda st: st[key]

    assert_carried_matches_stepwise(core, x, reset, ref, seg, {k: read(key) for k, key in _KEYS.items()})


@pytest.mark.parametrize("variant", VARIANTS)
def test_rtu_gradient_from_paper_sensitivities(variant):
    """dL/dp = sum_t delta1(t) dc1/dp(t) + delta2(t) dc2/dp(t) with delta through the output only
    (the paper's gradient), from the independent recursion, equals the core's gradient."""
    x, reset, w = _data(seed=2, T=40)
    core = _rtu("rtrl", variant, seed=2)
    ref = _paper_stepwise(core, x, reset)
    grads = _segment_grads(core, x, reset, w, 9)
    want = {k: 0.0 for k in _KEYS}
    for t in range(40):
        c = ref[t]["c"].clone().requires_grad_(True)
        h = c.transpose(1, 2).reshape(B, 2 * N)  # [c1; c2]
        ((h if variant == "nonlinear" else torch.relu(h)) * w[t]).sum().backward()
        for k in _KEYS:
            s = ref[t][k]
            delta = c.grad if s.dim() == 3 else c.grad[..., None]
            want[k] = want[k] + (delta * s).sum((0, 2))
    for k, key in _KEYS.items():
        assert _rel_err(grads[key[len("dc_d"):]], want[k]) < 1e-10, key


def test_rtu_state_size_independent_of_T():
    core = _rtu("rtrl", "nonlinear")
    assert state_shapes_over_T(core, _data, B) == B * (2 * N + 2 * 2 * N + 2 * 2 * N * D)
    assert core.output_size == 2 * N and core.initial_state(B)["c"].dtype == torch.float64


def test_rtu_linear_state_has_no_dc_dW2():
    lin, nonlin = _rtu("rtrl", "linear"), _rtu("rtrl", "nonlinear")
    x, reset, _ = _data(T=10)
    with torch.no_grad():
        _, st = lin(x, lin.initial_state(B), reset)
        _, hidden = lin(x, {"c": st["c"]}, reset, sensitivities=False)
    assert lin.sensitivity_keys == ("dc_dnu_log", "dc_dtheta_log", "dc_dW1")
    assert set(st) == set(lin.initial_state(B)) == {"c", *lin.sensitivity_keys} and set(hidden) == {"c"}
    assert "dc_dW2" in nonlin.sensitivity_keys
    nbytes = lambda state, keys: sum(state[k].numel() * state[k].element_size() for k in keys)  # noqa: E731
    st_nl = nonlin.initial_state(B)
    assert 2 * nbytes(st, ["dc_dW1"]) == nbytes(st_nl, ["dc_dW1", "dc_dW2"])
    assert nbytes(st, lin.sensitivity_keys) == 8 * B * (2 * 2 * N + 2 * N * D)
    with pytest.raises(ValueError, match="dc_dW2"):  # a nonlinear state is refused, and vice versa
        lin(x, st_nl, reset)
    with pytest.raises(ValueError, match="dc_dW2"):
        nonlin(x, st, reset)


def test_rtrl_carry_rotated_gradient_equals_explicit_i_sensitivity():
    """W2 contracting dc_dW1 with -i dL/dc (grad_maps, one shared tensor) gives what an explicit
    dc_dW2 = i dc_dW1 gives, and the pair-layout formula; the shared tensor is saved once."""
    g = torch.Generator().manual_seed(5)
    n, d = 6, 3
    s0, g_s = torch.randn(B, n, 2, generator=g), torch.randn(B, n, 2, generator=g)
    S_nu, S1 = torch.randn(B, n, 2, generator=g), torch.randn(B, n, 2, d, generator=g)

    def grads(sens, grad_maps=None):
        params = [torch.zeros(n, requires_grad=True), torch.zeros(n, d, requires_grad=True),
                  torch.zeros(n, d, requires_grad=True)]
        s = s0.clone().requires_grad_(True)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.data_ptr()) or t, lambda t: t):
            out = rtrl_carry(s, params, sens, grad_maps=grad_maps)
        (out * g_s).sum().backward()
        assert torch.equal(s.grad, g_s)
        return [p.grad for p in params], saved.count(S1.data_ptr())

    want, _ = grads([S_nu, S1, _times_i(S1)])
    got, n_saved = grads([S_nu, S1, S1], grad_maps=[None, None, mul_neg_i])
    for a, b in zip(got, want):
        assert _rel_err(a, b) < 1e-14
    gr, gi = g_s[..., 0, None], g_s[..., 1, None]
    assert _rel_err(got[2], (gi * S1[:, :, 0] - gr * S1[:, :, 1]).sum(0)) < 1e-14
    assert n_saved == 1
    with pytest.raises(ValueError, match="grad map"):
        rtrl_carry(s0, [torch.zeros(n)], [S_nu], grad_maps=[None, None])






def test_rtu_init_and_parametrisation():
    core = _rtu("tbptt", r_min=0.5, r_max=0.6, max_phase=0.3)
    r = torch.exp(-torch.exp(core.nu_log))
    assert ((r >= 0.5 - 1e-12) & (r <= 0.6 + 1e-12)).all()
    theta = torch.exp(core.theta_log)
    assert ((theta > 0) & (theta <= 0.3 + 1e-12)).all()
    lam, gamma = core.decay()
    assert torch.allclose(lam.abs(), r) and torch.allclose(gamma, torch.sqrt(1 - r ** 2))
    assert torch.allclose(lam.angle(), theta)


def test_rtu_decay_without_autograd_is_kept_until_a_parameter_changes():
    """An actor's no-grad steps reuse lambda and gamma; an optimizer step, a weight load or a dtype change
    gives new ones, equal to what autograd's path computes."""
    core = _rtu("rtrl")

    def fresh():
        with torch.enable_grad():
            lam, gamma = core.decay()
        return lam.detach(), gamma.detach()

    with torch.no_grad():
        first = core.decay()
        assert core.decay()[0] is first[0]  # kept
    opt = torch.optim.SGD(core.parameters(), lr=0.1)
    core.nu_log.grad, core.theta_log.grad = torch.ones(N), torch.ones(N)
    opt.step()
    with torch.no_grad():
        lam, gamma = core.decay()
    assert lam is not first[0] and torch.equal(lam, fresh()[0]) and torch.equal(gamma, fresh()[1])
    core.load_state_dict({k: v + 0.01 for k, v in core.state_dict().items()})
    with torch.no_grad():
        assert torch.equal(core.decay()[0], fresh()[0])
    core.float()
    with torch.no_grad():
        assert core.decay()[0].dtype == torch.complex64 and torch.equal(core.decay()[0], fresh()[0])
    with torch.enable_grad():
        assert core.decay()[0].requires_grad  # the learner's path is never cached


def test_rtu_bad_options_and_input():
    with pytest.raises(ValueError, match="variant"):
        RTU(D, N, variant="gated")
    with pytest.raises(ValueError, match="activation"):
        RTU(D, N, activation="swish")
    with pytest.raises(ValueError, match="r_min"):
        RTU(D, N, r_min=0.9, r_max=1.0)
    core = _rtu("rtrl")
    with pytest.raises(ValueError, match=r"x must have shape \[T, B, 5\]"):
        core(torch.randn(B, D), core.initial_state(B), torch.zeros(1, B, dtype=torch.bool))
    with pytest.raises(ValueError, match="dc_dW1"):
        core(torch.randn(2, B, D), {**core.initial_state(B), "dc_dW1": torch.zeros(B, N, 2, D + 1)},
             torch.zeros(2, B, dtype=torch.bool))


def test_rtu_through_make_core(monkeypatch):
    monkeypatch.setitem(cores.CORES, "rtu", RTU)
    assert "rtu" in cores.rtrl_cores()
    assert {"variant", "activation", "r_min", "r_max", "max_phase"} <= set(cores.core_options("rtu"))
    core = cores.make_core("rtu", D, N, learning="rtrl", variant="nonlinear", activation="tanh")
    assert isinstance(core, RTU) and core.variant == "nonlinear" and math.isclose(core.r_max, 0.999)
