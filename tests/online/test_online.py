"""The online learners: exactness of the supervised RTRL modes and of the TD(lambda) eligibility (float64,
against full autograd), online learning of a tiny copy task, and the benchmark command's smoke run."""

import copy
import csv

import numpy as np
import pytest
import torch

from r2ac.cores import CORES
from r2ac.online import SequenceLearner, TDLambda, build_model, fit, flops_per_step, run_stream, size_for_budget
from r2ac.online.common import CoreUnavailable, require_core
from r2ac.tasks import copy_b1, copy_patterns, trace_conditioning

torch.set_num_threads(1)


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _grads(core, batch, mode, k, **opts):
    model = build_model(core, batch, 6, mode, seed=0, **opts)
    return SequenceLearner(model, mode, k=k, update="sequence").gradient(batch)


# -- supervised ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("core,opts", [("elstm", {"forget_bias_init": 2.0}), ("columnar", {}), ("fwp", {})])
def test_rtrl_segment_gradient_equals_bptt(float64, core, opts):
    batch = copy_b1(3, 5, rng=0)  # variable lengths, padded
    full = _grads(core, batch, "bptt", 1, **opts)
    for mode, k in (("rtrl-segment", 3), ("rtrl-segment", 4), ("rtrl-online", 1), ("truncated", 100)):
        got = _grads(core, batch, mode, k, **opts)
        assert set(got) == set(full)
        for n in full:
            assert _rel(got[n], full[n]) < 1e-10, (mode, k, n)
    trunc = _grads(core, batch, "tbptt", 3, **opts)  # truncation loses the credit across segments
    assert max(_rel(trunc[n], full[n]) for n in full) > 1e-3


def test_bit_targets_and_encoder(float64):
    batch = copy_patterns(2, rng=0, n_patterns=3, bits=2, delay=1)
    full = _grads("elstm", batch, "bptt", 1, forget_bias_init=1.0)
    m = build_model("elstm", batch, 6, "rtrl-online", encoder_size=4, seed=0)
    assert m.encoder is not None and m.core.input_size == 4
    got = _grads("elstm", batch, "rtrl-segment", 2, forget_bias_init=1.0)
    for n in full:
        assert _rel(got[n], full[n]) < 1e-10


def test_learner_checks_the_core_mode():
    batch = copy_b1(2, 3, rng=0)
    with pytest.raises(ValueError, match="learning='rtrl'"):
        SequenceLearner(build_model("elstm", batch, 4, "bptt"), "rtrl-online")
    with pytest.raises(ValueError, match="learning='tbptt'"):
        SequenceLearner(build_model("elstm", batch, 4, "rtrl-online"), "tbptt", k=2)
    with pytest.raises(CoreUnavailable, match="not registered"):
        require_core("no-such-core")
    with pytest.raises(CoreUnavailable, match="no RTRL"):
        require_core("lstm", "rtrl")


def test_rtrl_online_learns_a_tiny_copy_task():
    """Copy task (Irie et al. 2024, App. B.1) with l = 3: fully online RTRL (an update after every step) reaches
    100 % symbol accuracy within a few seconds."""
    rng = np.random.default_rng(0)
    model = build_model("elstm", (3, 2), 32, "rtrl-online", seed=0)
    learner = SequenceLearner(model, "rtrl-online", lr=1e-2)
    ev = copy_b1(256, 3, rng=123)
    before = learner.evaluate(ev)["acc"]
    rows = fit(learner, lambda i: copy_b1(32, 3, rng), 180, ev, eval_every=90)
    assert before < 0.85
    assert rows[-1]["eval_acc"] > 0.99 and rows[-1]["eval_seq_acc"] > 0.97


# -- online TD(lambda) -----------------------------------------------------------------------------------

TD_CORES = [("elstm", {"forget_bias_init": 1.0}), ("columnar", {}), ("ccn", {"columns_per_stage": 2}),
            ("rtu", {}), ("lru", {}), ("fwp", {})]


@pytest.mark.parametrize("name,opts", TD_CORES)
def test_td_eligibility_is_exact(float64, name, opts):
    """With the weights held fixed (lr = 0), the eligibility after T steps equals
    sum_{s < T-1} (lambda gamma)^(T-2-s) dy(s)/dtheta, each dy(s)/dtheta by autograd through the whole
    stream from its start (one segment)."""
    if name not in CORES:
        pytest.skip(f"core {name!r} is not registered")
    T, D, N, gamma, lam = 25, 4, 4, 0.9, 0.8
    g = torch.Generator().manual_seed(1)
    x = torch.randn(T, D, generator=g)
    c = (torch.rand(T, generator=g) < 0.2).double()
    torch.manual_seed(0)
    core = CORES[name](D, N, learning="rtrl", **opts)
    core.eval()  # ccn: no running-statistics updates, so both passes see the same network
    learner = TDLambda(core, gamma=gamma, lam=lam, lr=0.0)
    ref_core, ref_head = copy.deepcopy(core), copy.deepcopy(learner.head)
    for t in range(T):
        learner.step(x[t], float(c[t]))
    H, _ = ref_core(x[:, None], ref_core.initial_state(1), torch.zeros(T, 1, dtype=torch.bool))
    y = ref_head(H[:, 0]).squeeze(-1)
    params = [p for _, p in ref_core.named_parameters()] + list(ref_head.parameters())
    want = [torch.zeros_like(p) for p in params]
    for s in range(T - 1):
        gs = torch.autograd.grad(y[s], params, retain_graph=True, allow_unused=True)
        for w, gp in zip(want, gs):
            if gp is not None:
                w.add_((lam * gamma) ** (T - 2 - s) * gp)
    got = list(learner.eligibility.values())
    assert len(got) == len(want)
    recurrent = 0
    for (n, _), z, w in zip(learner.named, got, want):
        assert torch.allclose(z, w, rtol=1e-10, atol=1e-12), n
        recurrent += n.startswith("core.") and bool(w.abs().max() > 0)
    assert recurrent >= 2  # the recurrent parameters did receive credit
    # the predictions are those of the fixed network
    ys = learner.predict(x[0])[0]
    assert np.isfinite(ys)


def test_td_tbptt_eligibility_with_a_long_window_is_exact(float64):
    T, D = 12, 3
    g = torch.Generator().manual_seed(2)
    x = torch.randn(T, D, generator=g)
    torch.manual_seed(0)
    core = CORES["lstm"](D, 3, learning="tbptt")
    a = TDLambda(core, lr=0.0, truncation=T)  # the window covers the whole stream: exact
    torch.manual_seed(0)
    b = TDLambda(CORES["elstm"](D, 3, learning="rtrl"), lr=0.0)
    short = TDLambda(copy.deepcopy(core), lr=0.0, truncation=2)
    short.head.load_state_dict(a.head.state_dict())
    for t in range(T):
        a.step(x[t], 0.0)
        short.step(x[t], 0.0)
        b.step(x[t], 0.0)
    H, _ = core(x[:, None], core.initial_state(1), torch.zeros(T, 1, dtype=torch.bool))
    y = a.head(H[:, 0]).squeeze(-1)
    params = list(core.parameters()) + list(a.head.parameters())
    want = [torch.zeros_like(p) for p in params]
    for s in range(T - 1):
        for w, gp in zip(want, torch.autograd.grad(y[s], params, retain_graph=True)):
            w.add_((0.99 * 0.9) ** (T - 2 - s) * gp)
    for z, w in zip(a.z, want):
        assert torch.allclose(z, w, rtol=1e-10, atol=1e-12)
    assert any(not torch.allclose(z, w, rtol=1e-3) for z, w in zip(short.z, want))  # truncation 2 differs
    with pytest.raises(ValueError):
        TDLambda(CORES["lstm"](D, 3), truncation=None)
    with pytest.raises(ValueError):
        TDLambda(CORES["elstm"](D, 3, learning="rtrl"), truncation=4)


def test_td_ccn_frozen_stages_do_not_move():
    torch.manual_seed(0)
    core = CORES["ccn"](5, 4, learning="rtrl", columns_per_stage=2, steps_per_stage=6)
    learner = TDLambda(core, lr=1e-2)
    x = np.random.default_rng(0).random((20, 5)).astype(np.float32)
    for t in range(7):  # the 7th forward pass starts stage 1
        learner.step(x[t], 1.0)
    assert core.current_stage == 1
    frozen = [p.detach().clone() for p in core.stages[0].parameters()]
    for t in range(7, 20):
        learner.step(x[t], float(t % 3 == 0))
    for p, q in zip(core.stages[0].parameters(), frozen):
        assert torch.equal(p, q)
    elig = learner.eligibility
    assert all(float(elig[f"core.stages.0.{n}"].abs().max()) == 0 for n in ("W", "u", "b"))
    assert float(elig["core.stages.1.W"].abs().max()) > 0


def test_td_learns_trace_conditioning_a_little():
    """A short trace-conditioning stream (ISI 4..6, ITI 8..12): online TD(lambda) with a columnar network
    predicts the return clearly better than the constant 0 by the end."""
    s = trace_conditioning(1000, rng=0, isi=(4, 6), iti=(8, 12), n_distractors=2)
    torch.manual_seed(0)
    learner = TDLambda(CORES["columnar"](s.x.shape[1], 4, learning="rtrl"), lr=1e-2)
    res = run_stream(learner, s.x, s.cumulant, bins=5)
    G = res["returns"]
    assert res["msre_last"] < 0.5 * float((G[-len(G) // 10:] ** 2).mean())


def test_budget_formulas_match_seed_003():
    # trace patterning of Javed et al. 2023 (12 inputs): LSTM 4 features k = 15, columnar 10, CCN 16 with 4 per stage
    assert flops_per_step("lstm", 12, 4, k=15) == 4352
    assert flops_per_step("columnar", 12, 10) == 3920
    assert flops_per_step("ccn", 12, 16, u=4) == 3360
    assert size_for_budget("ccn", 12, 4000, u=4) == 16
    assert size_for_budget("columnar", 12, 4000) == 10
    assert flops_per_step("elstm", 12, size_for_budget("elstm", 12, 4400)) <= 4400


# -- the benchmark command --------------------------------------------------------------------------------

def test_bench_tasks_smoke(tmp_path, capsys):
    from r2ac.bench.tasks import main

    assert main(["copy", "--quick", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "tasks_copy.csv")))
    assert [r["mode"] for r in rows] == ["rtrl-online", "rtrl-segment", "tbptt", "bptt"]
    assert main(["trace", "--quick", "--task", "patterning", "--cores", "columnar", "lstm", "no-such-core",
                 "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "tasks_trace.csv")))
    assert [r["core"] for r in rows] == ["oracle", "columnar", "lstm"]
    assert all(float(r["msre"]) >= 0 for r in rows)
    assert (tmp_path / "tasks_trace.png").stat().st_size > 1000
    assert "no-such-core' is not registered" in capsys.readouterr().out


def test_bench_tasks_parity_smoke_and_variants(tmp_path):
    from r2ac.bench.tasks import main, parse_variants

    assert main(["parity", "--quick", "--variants", "default", "signed:signed_keep=true", "--modes", "rtrl-segment",
                 "tbptt", "--amsgrad", "--lr", "0.01", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "tasks_parity.csv")))
    assert {(r["lr"], r["amsgrad"]) for r in rows} == {("0.01", "True")}
    model = build_model("elstm", (3, 2), 4, "bptt")
    assert SequenceLearner(model, "bptt", amsgrad=True).opt.defaults["amsgrad"]
    assert not SequenceLearner(model, "bptt").opt.defaults["amsgrad"]
    assert [(r["variant"], r["mode"]) for r in rows] == [("default", "rtrl-segment"), ("default", "tbptt"),
                                                         ("signed", "rtrl-segment"), ("signed", "tbptt")]
    assert all(0 <= float(r[f"acc_{n}"]) <= 1 for r in rows for n in (1, 2, 3))
    assert (tmp_path / "tasks_parity.png").stat().st_size > 1000
    assert parse_variants(["a", "b:signed_keep=true,chrono_max=1e4,forget_bias_init=chrono,x=3"]) == {
        "a": {}, "b": {"signed_keep": True, "chrono_max": 1e4, "forget_bias_init": "chrono", "x": 3}}
    with pytest.raises(ValueError, match="key=value"):
        parse_variants(["a:signed_keep"])
    with pytest.raises(ValueError, match="distinct"):
        parse_variants(["a", "a:x=1"])
