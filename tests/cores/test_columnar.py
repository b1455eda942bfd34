"""Columnar / CCN / constructive cores: float64 exactness of RTRL against full-sequence BPTT, an independent
step-by-step implementation of the column traces of Javed et al. 2023 (notes/ccn.md), staging and normalisation."""

import pytest
import torch

import r2ac.cores as cores
from r2ac.cores.columnar import CCN, Columnar, Constructive

from coretools import assert_tbptt_segments_independent, rel_err as _rel_err, segment_grads as _segment_grads, sequence

T, B, D, N = 200, 3, 5, 4


pytestmark = pytest.mark.usefixtures("float64")


def _data(seed=0, T=T, B=B, D=D, N=N, p_reset=0.03):
    return sequence(seed, T, B, D, N, p_reset)


def _buffers(core):
    return {k: v.clone() for k, v in core.named_buffers()}






def _columnar(learning="rtrl", seed=0, **kw):
    torch.manual_seed(seed)
    core = Columnar(D, N, learning=learning, **kw)
    with torch.no_grad():  # larger recurrent weights than the default: make the recurrence matter
        core.u.uniform_(-2.0, 2.0)
    return core


# -- columnar --------------------------------------------------------------------------------------



def test_columnar_tbptt_is_truncated():
    x, reset, w = _data()
    full = _segment_grads(_columnar("rtrl"), x, reset, w, T)
    trunc = _segment_grads(_columnar("tbptt"), x, reset, w, 7)
    assert max(_rel_err(trunc[n], full[n]) for n in full) > 1e-2
    same = _segment_grads(_columnar("tbptt"), x, reset, w, T)
    for name in full:
        assert _rel_err(same[name], full[name]) < 1e-12


def _traces_stepwise(core, x, reset):
    """The column traces of Javed et al. 2023 (notes/ccn.md) for all twelve parameter kinds, step by step:

        dq/dp = s_q (u_q TH_p(t-1) + D_qp),  D_qp = x_j (W_qj), h(t-1) (u_q), 1 (b_q), 0 for other gates
        TC_p(t) = f TC_p(t-1) + c(t-1) df/dp + i dg/dp + g di/dp
        TH_p(t) = o (1 - tanh(c)^2) TC_p(t) + tanh(c) do/dp

    Traces are indexed [B, n, r, ...] for the parameter of gate r. Returns (h, c, traces) after every step.
    """
    W, u, b = (p.detach() for p in (core.W, core.u, core.b))  # [n, 4, m], [n, 4], [n, 4]
    Tn, Bn, m = x.shape
    n = W.shape[0]
    h = torch.zeros(Bn, n)
    c = torch.zeros(Bn, n)
    shapes = {"W": (Bn, n, 4, m), "u": (Bn, n, 4), "b": (Bn, n, 4)}
    TH = {k: torch.zeros(s) for k, s in shapes.items()}
    TC = {k: torch.zeros(s) for k, s in shapes.items()}
    out = []
    for t in range(Tn):
        for bb in range(Bn):
            if reset[t, bb]:
                h[bb], c[bb] = 0, 0
                for k in TH:
                    TH[k][bb], TC[k][bb] = 0, 0
        pre = torch.einsum("nqm,bm->bnq", W, x[t]) + u * h[:, :, None] + b  # [B, n, 4]
        i, f, o = (torch.sigmoid(pre[..., q]) for q in range(3))
        g = torch.tanh(pre[..., 3])
        slope = [i * (1 - i), f * (1 - f), o * (1 - o), 1 - g ** 2]
        direct = {"W": x[t][:, None, None, :].expand(Bn, n, 4, m), "u": h[:, :, None].expand(Bn, n, 4),
                  "b": torch.ones(Bn, n, 4)}
        c_new = f * c + i * g
        tc = torch.tanh(c_new)
        newTH, newTC = {}, {}
        for k in TH:
            extra = (1,) * (TH[k].dim() - 2)
            dq = []
            for q in range(4):
                onehot = torch.zeros(4)
                onehot[q] = 1.0
                Dq = direct[k] * onehot.view(4, *([1] * (len(extra) - 1)))  # only the parameters of gate q
                dq.append(slope[q].view(Bn, n, *extra) * (u[:, q].view(1, n, *extra) * TH[k] + Dq))
            di, df, do, dg = dq
            v = lambda a: a.view(Bn, n, *extra)  # noqa: E731
            newTC[k] = v(f) * TC[k] + v(c) * df + v(i) * dg + v(g) * di
            newTH[k] = v(o * (1 - tc ** 2)) * newTC[k] + v(tc) * do
        TH, TC = newTH, newTC
        c = c_new
        h = o * tc
        out.append((h.clone(), c.clone(), {k: torch.stack([TH[k], TC[k]], 2) for k in TH}))
    return out


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_columnar_carried_sensitivities_match_trace_recursion(seg):
    Tn = 100
    x, reset, _ = _data(seed=1, T=Tn)
    core = _columnar(seed=1)
    ref = _traces_stepwise(core, x, reset)
    state = core.initial_state(B)
    with torch.no_grad():
        for s in range(0, Tn, seg):
            _, state = core(x[s:s + seg], state, reset[s:s + seg])
            h, c, tr = ref[min(s + seg, Tn) - 1]
            assert torch.allclose(state["hc"][..., 0], h, rtol=1e-12, atol=1e-13)
            assert torch.allclose(state["hc"][..., 1], c, rtol=1e-12, atol=1e-13)
            for k in ("W", "u", "b"):
                assert torch.allclose(state["dhc_d" + k], tr[k], rtol=1e-9, atol=1e-11), k


def test_columnar_gradient_from_traces():
    """dL/dp = sum_t e(t) TH_p(t) (only h is read out) from the independent traces equals the core's."""
    Tn = 40
    x, reset, w = _data(seed=2, T=Tn)
    core = _columnar(seed=2)
    ref = _traces_stepwise(core, x, reset)
    got = _segment_grads(core, x, reset, w, 9)
    for k, p in (("W", core.W), ("u", core.u), ("b", core.b)):
        want = sum(torch.einsum("bn,bn...->n...", w[t], ref[t][2][k][:, :, 0]) for t in range(Tn))
        assert _rel_err(got[k], want) < 1e-10, k


def test_columnar_state_layout_and_reset():
    """Columnar-specific layout (the hidden-only actor path itself is a contract test in test_cores.py):
    one (h, c) pair per column, the W sensitivity per (h, c) x gate x input; a mid-sequence reset gives the
    outputs of a fresh start."""
    x, reset, _ = _data(T=25)
    core = _columnar()
    with torch.no_grad():
        _, full = core(x, core.initial_state(B), reset)
    assert set(core.hidden_keys) == {"hc"} and set(full) == set(core.state_spec())
    assert full["dhc_dW"].shape == (B, N, 2, 4, D)
    reset2 = torch.zeros(20, B, dtype=torch.bool)
    reset2[12, 0] = True
    with torch.no_grad():
        y, _ = core(x[:20], full, reset2)
        y_fresh, _ = core(x[12:20, :1], core.initial_state(1), torch.zeros(8, 1, dtype=torch.bool))
    assert torch.allclose(y[12:, :1], y_fresh, rtol=1e-13, atol=1e-15)


def test_columnar_registers_through_make_core(monkeypatch):
    for cls in (Columnar, CCN, Constructive):
        monkeypatch.setitem(cores.CORES, cls.name, cls)
    assert {"columnar", "ccn", "constructive"} <= set(cores.rtrl_cores())
    core = cores.make_core("ccn", D, 8, learning="rtrl", columns_per_stage=2, steps_per_stage=None)
    assert isinstance(core, CCN) and core.n_stages == 4
    assert "columns_per_stage" not in cores.core_options("constructive")
    with pytest.raises(ValueError, match="columns_per_stage"):
        CCN(D, 6, columns_per_stage=4)


# -- CCN / constructive ------------------------------------------------------------------------------

def _ccn(learning="rtrl", seed=0, stage=1, u=2, n=6, **kw):
    torch.manual_seed(seed)
    kw.setdefault("beta", 0.9)  # fast-moving statistics: the normalisation matters in the tests
    kw.setdefault("eps", 0.05)
    core = CCN(D, n, learning=learning, columns_per_stage=u, steps_per_stage=None, **kw)
    with torch.no_grad():
        for st in core.stages:
            st.u.uniform_(-2.0, 2.0)
    for _ in range(stage):
        core.advance_stage()
    return core


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_ccn_current_stage_rtrl_equals_full_bptt(seg):
    x, reset, _ = _data()
    core = _ccn(stage=1)
    w = torch.randn(T, B, 6)
    full = _segment_grads(core, x, reset, w, T)
    got = _segment_grads(core, x, reset, w, seg)
    assert set(full) == set(got) == {"stages.1.W", "stages.1.u", "stages.1.b"}  # stage 0 frozen, 2 not started
    for name in full:
        assert _rel_err(got[name], full[name]) < 1e-9, name
    trunc = _segment_grads(_ccn("tbptt", stage=1), x, reset, w, 7)
    assert max(_rel_err(trunc[n], full[n]) for n in full) > 1e-2


@pytest.mark.parametrize("seg", [1, 7])
def test_constructive_stage2_rtrl_equals_full_bptt(seg):
    x, reset, _ = _data(T=80)
    torch.manual_seed(0)
    core = Constructive(D, 3, learning="rtrl", steps_per_stage=None, beta=0.9, eps=0.05)
    core.advance_stage(), core.advance_stage()
    assert core.columns_per_stage == 1 and core.current_stage == 2
    w = torch.randn(80, B, 3)
    full = _segment_grads(core, x, reset, w, 80)
    got = _segment_grads(core, x, reset, w, seg)
    assert set(full) == {"stages.2.W", "stages.2.u", "stages.2.b"}
    assert core.stages[2].W.shape == (1, 4, D + 2)
    for name in full:
        assert _rel_err(got[name], full[name]) < 1e-9, name


def test_ccn_stage_change_drops_old_sensitivities_and_stays_exact():
    """Across a stage advance: the new stage's columns start at state 0 with sensitivity 0; its segmented
    RTRL gradient equals BPTT over the rest of the sequence from the advance point."""
    x, reset, _ = _data(T=120)
    core = _ccn(stage=0)
    w = torch.randn(120, B, 6)
    state = core.initial_state(B)
    with torch.no_grad():
        _, state = core(x[:40], state, reset[:40])
    assert (state["sens_stage"] == 1).all() and state["dhc_dW"].abs().sum() > 0
    assert state["hc"][:, 2:].abs().sum() == 0  # stages 1 and 2 have not started
    core.advance_stage()
    assert all(p.requires_grad for p in core.parameters())  # frozen by masking: optimizers hold every stage
    zero = {**state, **{k: torch.zeros_like(v) for k, v in state.items() if k.startswith("dhc")}}
    full = _segment_grads(core, x[40:], reset[40:], w[40:], 80, state=zero)
    got = _segment_grads(core, x[40:], reset[40:], w[40:], 7, state=dict(state))  # stale stage-0 sensitivities
    for name in full:
        assert _rel_err(got[name], full[name]) < 1e-9, name


def test_ccn_steps_per_stage_counts_learning_steps_only():
    torch.manual_seed(0)
    core = CCN(D, 4, learning="rtrl", columns_per_stage=2, steps_per_stage=2 * 10 * B)
    x, reset, w = _data(T=10)
    st = core.initial_state(B)
    with torch.no_grad():  # actors: no counting, no statistics update
        before = _buffers(core)
        core(x, st, reset)
    assert all(torch.equal(before[k], v) for k, v in core.named_buffers())
    core.eval()
    core(x, st, reset)[0].sum().backward()  # eval mode: no counting either
    assert int(core.stage_steps) == 0
    core.train()
    for expected_stage in (0, 0, 1):
        y, _ = core(x, st, reset)
        y.sum().backward()
        assert core.current_stage == expected_stage
    assert int(core.stage_steps) == 10 * B  # counting restarted with stage 1
    core.zero_grad(set_to_none=True)
    core(x, st, reset)[0].sum().backward()
    assert core.stages[0].W.grad is None and core.stages[1].W.grad is not None
    for _ in range(4):  # the last stage keeps learning
        core(x, st, reset)[0].sum().backward()
    assert core.current_stage == 1
    with pytest.raises(RuntimeError, match="last stage"):
        core.advance_stage()
    # the stage is part of the state_dict
    other = CCN(D, 4, learning="rtrl", columns_per_stage=2)
    other.load_state_dict(core.state_dict())
    other(x, other.initial_state(B), reset)[0].sum().backward()
    assert other.current_stage == 1 and other.stages[0].W.grad is None and other.stages[1].W.grad is not None


def test_ccn_normalisation_is_eq11():
    """B = 1: the buffers follow Eq. 11 step by step; outputs are (h - mu(t)) / max(eps, sigma(t))."""
    torch.manual_seed(0)
    core = CCN(D, 2, learning="tbptt", columns_per_stage=2, beta=0.8, eps=0.3)
    x, reset, _ = _data(T=30, B=1)
    y, _ = core(x, core.initial_state(1), reset)
    with torch.no_grad():
        ref_core = Columnar(D, 2)
        ref_core.load_state_dict({k.split(".", 2)[2]: v for k, v in core.state_dict().items()
                                  if k.startswith("stages.0")})
        h, _ = ref_core(x, ref_core.initial_state(1), reset)
    mu, var = torch.zeros(2), torch.ones(2)
    for t in range(30):
        mu_new = 0.8 * mu + 0.2 * h[t, 0]
        var = 0.8 * var + 0.2 * (mu_new - h[t, 0]) * (mu - h[t, 0])
        mu = mu_new
        assert torch.allclose(y[t, 0], (h[t, 0] - mu) / var.sqrt().clamp_min(0.3), atol=1e-12)
    assert torch.allclose(core.feature_mean, mu, atol=1e-12) and torch.allclose(core.feature_var, var, atol=1e-12)
    # without learning the statistics are constants
    with torch.no_grad():
        y2, _ = core(x, core.initial_state(1), reset)
    assert torch.allclose(y2, (h - mu) / var.sqrt().clamp_min(0.3), atol=1e-12)


@pytest.mark.parametrize("cls", [Columnar, CCN, Constructive])
def test_tbptt_segments_are_independent(cls):
    x, reset, _ = _data(T=40)
    torch.manual_seed(0)
    opts = {} if cls is Columnar else {"steps_per_stage": None, "beta": 0.9}
    if cls is CCN:
        opts["columns_per_stage"] = 2
    core = cls(D, N, learning="tbptt", **opts)
    if cls is not Columnar:
        core.advance_stage()
    assert_tbptt_segments_independent(core, x, reset, torch.randn(40, B, N), 20)


def test_ccn_optimizer_built_at_start_learns_later_stages_and_keeps_frozen_ones():
    torch.manual_seed(0)
    core = CCN(D, 4, learning="rtrl", columns_per_stage=2, steps_per_stage=None)
    opt = torch.optim.RMSprop([p for p in core.parameters() if p.requires_grad], lr=1e-2)
    x, reset, w = _data(T=10, N=4)
    for stage in (0, 1):
        before = {n: p.detach().clone() for n, p in core.named_parameters()}
        opt.zero_grad(set_to_none=True)
        y, _ = core(x, core.initial_state(B), reset)
        (y * w).sum().backward()
        opt.step()
        for n, p in core.named_parameters():
            assert torch.equal(p, before[n]) != n.startswith(f"stages.{stage}."), n
        if stage == 0:
            core.advance_stage()
