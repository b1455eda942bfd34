"""Exactness and contract tests of the recurrent cores (float64, against full-sequence BPTT)."""

import io
import pickle

import pytest
import torch

from r2ac.cores import CORES, make_core, rtrl_cores

from coretools import (assert_carried_matches_stepwise, assert_tbptt_segments_independent, rel_err as _rel_err,
                       segment_grads as _segment_grads, sequence, state_shapes_over_T)

T, B, D, N = 200, 3, 5, 4


pytestmark = pytest.mark.usefixtures("float64")


def _data(seed=0, T=T, B=B, D=D, N=N, p_reset=0.03):
    return sequence(seed, T, B, D, N, p_reset)






def _elstm(learning, seed=0, **kw):
    torch.manual_seed(seed)
    return make_core("elstm", D, N, learning=learning, forget_bias_init=kw.pop("forget_bias_init", 2.0), **kw)




def _expanding_elstm(contractive, signed_keep=False):
    """An eLSTM whose recurrent weights make its dynamics chaotic (strong negative feedback through w_z):
    |ch| = |f + w_f fh + w_z zh| > 1 on average along a trajectory."""
    core = _elstm("rtrl", forget_bias_init=0.0, contractive=contractive, signed_keep=signed_keep)
    with torch.no_grad():
        core.w_f.fill_(6.0)
        core.w_z.fill_(-8.0)
    core.project_()  # what the learners call after every optimizer step
    return core


@pytest.mark.parametrize("signed_keep", [False, True])
def test_elstm_contractive_bounds_sensitivities(signed_keep):
    """model.core_options.contractive: with 2|w_f| + |w_z| > 1 the carried sensitivities can grow
    geometrically over an episode (the exact gradient explodes); projected back to <= 1, |ch| <= 1 and they
    grow at most linearly in the episode length. The same bound holds for the signed keep gate
    (``signed_keep``: (1 - r^2) / 2 <= 1 - |r|), whose |c| stays <= 1 too."""
    Tn = 400
    g = torch.Generator().manual_seed(3)
    x = 0.3 * torch.randn(Tn, B, D, generator=g)
    reset = torch.zeros(Tn, B, dtype=torch.bool)
    reset[0] = True
    peaks = {}
    for contractive in (False, True):
        core = _expanding_elstm(contractive, signed_keep)
        y, state = core(x, core.initial_state(B), reset)
        assert y.abs().max() <= 1
        peaks[contractive] = max(v.abs().max().item() for k, v in state.items() if k != "c")
        bound = 2 * core.w_f.abs() + core.w_z.abs()
        assert (bound <= 1 + 1e-12).all() == contractive
    assert peaks[False] > 1e30
    # |ch| <= 1 and |fh|, |zh| <= 1, |c| <= 1: each step adds at most max|x| (or 1) to a sensitivity
    assert peaks[True] <= Tn * max(x.abs().max().item(), 1.0)
    with pytest.raises(ValueError, match="contractive must be true or false"):
        _elstm("rtrl", contractive="yes")
    with pytest.raises(ValueError, match="signed_keep must be true or false"):
        _elstm("rtrl", signed_keep=1)


def test_elstm_signed_keep_one_unit_keeps_parity():
    """With signed_keep one unit can hold the parity of a count of flashes: the episode-start input writes
    (r = 0), a flash flips the sign (r = -1), every other step keeps (r = 1). The positive keep gate cannot
    flip a sign: with the same weights a flash erases to z instead."""
    Tn = 60
    x = torch.zeros(Tn, 1, D)
    x[0, 0, 0] = 1.0  # the episode-start flag
    flashes = [5, 9, 10, 23, 40, 41, 55]
    x[flashes, 0, 1] = 1.0
    reset = torch.zeros(Tn, 1, dtype=torch.bool)
    reset[0] = True
    for signed in (True, False):
        core = _elstm("rtrl", signed_keep=signed)
        with torch.no_grad():
            for w in core.parameters():
                w.zero_()
            core.b_f.fill_(30.0)                   # keep
            core.F[:, 0] = -30.0                   # start: sigmoid 1/2, r = 0, c = z
            core.F[:, 1] = -60.0                   # flash: sigmoid 0, r = -1 (signed)
            core.b_z.fill_(3.0)                    # z = tanh(3) > 0
        c = core(x, core.initial_state(1), reset)[0][:, 0, 0] * 2  # y = sigmoid(0) c
        counts = torch.cumsum(x[:, 0, 1], 0)
        odd = (counts % 2 == 1)
        if signed:
            assert torch.equal(c < 0, odd)
            assert torch.allclose(c.abs(), torch.tanh(torch.tensor(3.0)).expand(Tn))
        else:
            assert not (c < 0).any()


def test_elstm_signed_keep_chrono_keeps_retention_times():
    """The chrono initialisation draws the same retention times 1 / (1 - keep) for both keep gates."""
    torch.manual_seed(4)
    pos = make_core("elstm", D, 64, chrono_max=1000.0)
    torch.manual_seed(4)
    neg = make_core("elstm", D, 64, chrono_max=1000.0, signed_keep=True)
    t_pos = 1 / (1 - torch.sigmoid(pos.b_f))
    t_neg = 1 / (1 - (2 * torch.sigmoid(neg.b_f) - 1))
    assert torch.allclose(t_pos, t_neg, rtol=1e-9)
    assert t_neg.min() >= 2 - 1e-9 and t_neg.max() <= 1000 + 1e-6


def test_elstm_tbptt_is_truncated():
    x, reset, w = _data()
    full = _segment_grads(_elstm("rtrl"), x, reset, w, T)
    trunc = _segment_grads(_elstm("tbptt"), x, reset, w, 7)
    # the recurrent parameters lose the credit that crosses segment boundaries
    assert max(_rel_err(trunc[n], full[n]) for n in ("F", "Z", "w_f", "w_z", "b_f", "b_z")) > 1e-2
    # and a single full segment of TBPTT is BPTT
    same = _segment_grads(_elstm("tbptt"), x, reset, w, T)
    for name in full:
        assert _rel_err(same[name], full[name]) < 1e-12


def _paper_stepwise(core, x, reset):
    """Independent step-by-step RTRL of the paper (Eqs. 5-6, 12-14, 20-24), written from the equations:
    returns the sensitivities after every step."""
    p = {n: t.detach() for n, t in core.named_parameters()}
    Tn, Bn, _ = x.shape
    c = torch.zeros(Bn, N)
    S = {k: torch.zeros(Bn, N, D) for k in ("F", "Z")}
    S.update({k: torch.zeros(Bn, N) for k in ("w_f", "w_z", "b_f", "b_z")})
    out = []
    for t in range(Tn):
        for b in range(Bn):
            if reset[t, b]:
                c[b] = 0
                for k in S:
                    S[k][b] = 0
        f = torch.sigmoid(x[t] @ p["F"].T + p["w_f"] * c + p["b_f"])
        z = torch.tanh(x[t] @ p["Z"].T + p["w_z"] * c + p["b_z"])
        fh = (c - z) * f * (1 - f)                      # Eq. 12
        zh = (1 - f) * (1 - z ** 2)
        ch = f + p["w_f"] * fh + p["w_z"] * zh          # Eq. 13
        S["F"] = fh[:, :, None] * x[t][:, None, :] + ch[:, :, None] * S["F"]   # Eq. 14
        S["Z"] = zh[:, :, None] * x[t][:, None, :] + ch[:, :, None] * S["Z"]   # Eq. 20
        S["w_f"] = fh * c + ch * S["w_f"]               # Eqs. 21-24
        S["w_z"] = zh * c + ch * S["w_z"]
        S["b_f"] = fh + ch * S["b_f"]
        S["b_z"] = zh + ch * S["b_z"]
        c = f * c + (1 - f) * z                          # Eq. 6
        out.append({"c": c.clone(), **{k: v.clone() for k, v in S.items()}})
    return out


@pytest.mark.parametrize("seg", [1, 7, 50])
def test_elstm_carried_sensitivities_match_paper_recursion(seg):
    x, reset, _ = _data(seed=1, T=100)
    core = _elstm("rtrl", seed=1)
    ref = _paper_stepwise(core, x, reset)
    keys = ("F", "Z", "w_f", "w_z", "b_f", "b_z")
    assert_carried_matches_stepwise(core, x, reset, ref, seg, {k: (lambda st, k=k: st["dc_d" + k]) for k in keys})


def test_elstm_gradient_from_paper_sensitivities():
    """dL/dF = sum_t diag(e(t)) Fhat(t) (Eq. 14) with e(t) = dL(t)/dc(t) through the output only,
    computed from the independent recursion, equals the core's gradient."""
    x, reset, w = _data(seed=2, T=40)
    core = _elstm("rtrl", seed=2)
    ref = _paper_stepwise(core, x, reset)
    grads = _segment_grads(core, x, reset, w, 9)
    gF = torch.zeros(N, D)
    gwf = torch.zeros(N)
    p = {n: t.detach() for n, t in core.named_parameters()}
    for t in range(40):
        c = ref[t]["c"].clone().requires_grad_(True)
        o = torch.sigmoid(x[t] @ p["O"].T + c @ p["W_o"].T)
        (o * c * w[t]).sum().backward()
        gF += torch.einsum("bn,bnd->nd", c.grad, ref[t]["F"])
        gwf += (c.grad * ref[t]["w_f"]).sum(0)
    assert _rel_err(grads["F"], gF) < 1e-10
    assert _rel_err(grads["w_f"], gwf) < 1e-10


def test_state_size_independent_of_T():
    core = _elstm("rtrl")
    assert state_shapes_over_T(core, _data, B) == B * (N + 2 * N * D + 4 * N)


def test_no_grad_actor_path_and_return_state_false():
    x, reset, _ = _data(T=30)
    core = _elstm("rtrl")
    with torch.no_grad():
        y1, st = core(x, core.initial_state(B), reset)
        y2, none = core(x, core.initial_state(B), reset, return_state=False)
    assert none is None and torch.equal(y1, y2)
    assert set(st) == set(core.state_spec()) and not any(v.requires_grad for v in st.values())








@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_standard_cells_match_torch(name):
    torch.manual_seed(0)
    core = make_core(name, D, N)
    ref = (torch.nn.LSTM if name == "lstm" else torch.nn.GRU)(D, N)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(core.weight_ih)
        ref.weight_hh_l0.copy_(core.weight_hh)
        if name == "lstm":
            ref.bias_ih_l0.copy_(core.bias)
            ref.bias_hh_l0.zero_()
        else:
            ref.bias_ih_l0.copy_(core.bias_ih)
            ref.bias_hh_l0.copy_(core.bias_hh)
    x = torch.randn(30, B, D)
    y, _ = core(x, core.initial_state(B), torch.zeros(30, B, dtype=torch.bool))
    y_ref, _ = ref(x)
    assert torch.allclose(y, y_ref, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CORES))
def test_every_core_contract_and_tbptt_truncation(name):
    x, reset, _ = _data(T=40)
    core = make_core(name, D, N, learning="tbptt").eval()  # eval: no constructive-stage side effects
    w = torch.randn(40, B, core.output_size)
    # TBPTT gradient of a segment equals the gradient of that segment run alone from the detached state
    assert_tbptt_segments_independent(core, x, reset, w, 20)
    if not CORES[name].supports_rtrl:
        with pytest.raises(ValueError, match="elstm"):
            make_core(name, D, N, learning="rtrl")


def test_rtrl_cores_listed():
    assert "elstm" in rtrl_cores() and "elstm" in rtrl_cores(exact_only=True)
    assert "felstm_snap1" in rtrl_cores() and "felstm_snap1" not in rtrl_cores(exact_only=True)


# -- bad input -------------------------------------------------------------------------------

def _bad_call(core, **over):
    args = dict(x=torch.randn(4, B, D), state=core.initial_state(B), reset=torch.zeros(4, B, dtype=torch.bool))
    args.update(over)
    return core(args["x"], args["state"], args["reset"])


@pytest.mark.parametrize(
    "over, err, match",
    [
        (dict(x=torch.randn(B, D)), ValueError, r"x must have shape \[T, B, 5\]"),
        (dict(x=torch.randn(4, B, D + 1)), ValueError, "input_size=5"),
        (dict(x=torch.randn(4, B, D, dtype=torch.float32)), TypeError, "dtype"),
        (dict(x=torch.randn(4, B, D, device="meta", dtype=torch.float64)), ValueError, "meta"),
        (dict(reset=torch.zeros(4, B)), TypeError, "reset must have dtype torch.bool"),
        (dict(reset=torch.zeros(4, B + 1, dtype=torch.bool)), ValueError, r"reset must have shape"),
        (dict(x=torch.randint(0, 3, (4, B, D))), TypeError, "floating-point"),
    ],
)
def test_bad_input_errors(over, err, match):
    with pytest.raises(err, match=match):
        _bad_call(_elstm("rtrl"), **over)


def test_bad_state_errors():
    core = _elstm("rtrl")
    with pytest.raises(ValueError, match="another core"):
        _bad_call(core, state=make_core("lstm", D, N).initial_state(B))
    with pytest.raises(ValueError, match="batch size 2"):
        _bad_call(core, state=core.initial_state(2))
    with pytest.raises(ValueError, match="dc_dF"):
        _bad_call(core, state={**core.initial_state(B), "dc_dF": torch.zeros(B, N, D + 1)})
    with pytest.raises(TypeError, match="dict"):
        _bad_call(core, state=torch.zeros(B, N))


def test_make_core_errors():
    with pytest.raises(ValueError, match="available cores"):
        make_core("transformer", D, N)
    with pytest.raises(ValueError, match="options are"):
        make_core("elstm", D, N, forget_bias=1.0)
    with pytest.raises(ValueError, match="learning must be"):
        make_core("elstm", D, N, learning="bptt")
    with pytest.raises(ValueError, match=r"activation must be one of \['relu', 'tanh'\], got 'gelu'"):
        make_core("none", D, N, activation="gelu")


def test_feedforward_core_activation():
    """The feed-forward baseline (core ``none``) is phi(W x + b): relu by default, tanh on request
    (``model.core_options={activation: tanh}``; docs/results.md compares them on the watermaze); it carries
    nothing from one step to the next."""
    x, reset = _data()[:2]
    for options, phi in (({}, torch.relu), ({"activation": "tanh"}, torch.tanh), ({"activation": "relu"}, torch.relu)):
        torch.manual_seed(0)
        core = make_core("none", D, N, **options)
        y, state = core(x, core.initial_state(B), reset)
        assert state == {} and torch.equal(y, phi(core.linear(x)))
        # one step alone gives that step's output (to rounding: a BLAS may pick another kernel for one row)
        assert torch.allclose(core(x[5:6], {}, reset[5:6])[0], y[5:6], rtol=0, atol=1e-6)
    assert not torch.equal(torch.relu(core.linear(x)), torch.tanh(core.linear(x)))




# -- the contract, for every core of the registry (and option variants that change the state) --------

def _variants(rtrl_only=False):
    names = rtrl_cores() if rtrl_only else sorted(CORES)
    cases = [(n, {}) for n in names]
    cases += [("rtu", {"variant": "nonlinear"}), ("lru", {"layers": 2}), ("elstm", {"signed_keep": True})]
    return cases


def _ids(cases):
    return [n + "".join(f"-{k}={v}" for k, v in o.items()) for n, o in cases]


def _make(name, seed=0, learning=None, **options):
    torch.manual_seed(seed)
    learning = learning or ("rtrl" if CORES[name].supports_rtrl else "tbptt")
    return make_core(name, D, N, learning=learning, **options).eval()  # eval: no constructive-stage steps


# -- the exactness of RTRL, for every registered core ---------------------------------------------------
# Every registered core with exact RTRL enters with its defaults; these option variants change its RTRL
# (the nonlinear RTU and its activations, the fast weights' chunked in-segment attention).
EXACT_VARIANTS = [("rtu", {"variant": "nonlinear", "activation": a}) for a in ("relu", "tanh", "gelu", "sigmoid",
                                                                               "identity")]
EXACT_VARIANTS += [("fwp", {"chunk_size": 16})]
EXACT_VARIANTS += [("elstm", {"contractive": True}), ("elstm", {"signed_keep": True}),
                   ("elstm", {"signed_keep": True, "contractive": True})]
EXACT_VARIANTS += [("mix", {"parts": [["elstm", 2, {"contractive": True}], ["lru", 1],
                                      ["rtu", 1, {"variant": "nonlinear"}]]})]
EXACT = [(n, {}) for n in sorted(CORES) if CORES[n].supports_rtrl and CORES[n].exact_rtrl] + EXACT_VARIANTS
# The multi-layer LRU learns by the online rule of Zucchet et al. 2023 (exact inside a layer, spatial between
# layers): tests/cores/test_lru.py checks it against the paper's rule and its independence of segmentation.


def exact_case(name, options):
    """An exact-RTRL core (learning="rtrl"), the 200-step test sequence, the loss weights w and the gradient of
    one full BPTT pass over it (the same weights with learning="tbptt")."""
    core = _make(name, learning="rtrl", **options)
    bptt = _make(name, learning="tbptt", **options)
    bptt.load_state_dict(core.state_dict())
    x, reset, _ = _data()
    w = torch.randn(T, B, core.output_size, generator=torch.Generator().manual_seed(6))
    return core, x, reset, w, _segment_grads(bptt, x, reset, w, T)


@pytest.mark.parametrize("name, options", EXACT, ids=_ids(EXACT))
@pytest.mark.parametrize("seg", [1, 7, 50])
def test_rtrl_gradient_equals_full_bptt(name, options, seg):
    """Every exact-RTRL core: a 200-step sequence with episode resets, learned with RTRL in segments of 1, 7 or
    50 steps while carrying the state and its sensitivities, gives the gradient of one full-sequence BPTT pass
    (the same weights with learning="tbptt", one segment of 200 steps) to 1e-9 relative."""
    core, x, reset, w, full = exact_case(name, options)
    got = _segment_grads(core, x, reset, w, seg)
    assert full and set(got) == set(full)
    for pname in full:
        assert _rel_err(got[pname], full[pname]) < 1e-9, pname


def test_every_core_with_rtrl_is_exact_or_has_its_own_check():
    """A core whose RTRL is approximate is left out of the exactness test above: it needs a check of its own
    (felstm_snap1: tests/cores/test_snap.py, exact where its recurrence is diagonal). The cores without RTRL
    (learning="tbptt" only) refuse learning="rtrl" (test_every_core_contract_and_tbptt_truncation)."""
    approximate = sorted(n for n, c in CORES.items() if c.supports_rtrl and not c.exact_rtrl)
    assert approximate == ["felstm_snap1"]
    assert {n for n, _ in EXACT} == set(rtrl_cores()) - set(approximate)


RTRL = _variants(rtrl_only=True)


@pytest.mark.parametrize("name, options", RTRL, ids=_ids(RTRL))
def test_hidden_only_steps_then_rerun_equals_full(name, options):
    """Actors step with sensitivities=False and re-run the trajectory once at its end; a hidden-only
    state cannot continue RTRL; return_state=False gives the same outputs and no state."""
    core = _make(name, **options)
    x, reset, _ = _data(T=25)
    start = core.initial_state(B)
    with torch.no_grad():
        hidden, ys = start, []
        for t in range(25):
            y, hidden = core(x[t:t + 1], hidden, reset[t:t + 1], sensitivities=False)
            ys.append(y)
        assert set(hidden) == set(core.hidden_keys)
        y_full, full = core(x, start, reset)
        y_none, none = core(x, start, reset, return_state=False)
    assert none is None and torch.equal(y_none, y_full)
    assert torch.allclose(torch.cat(ys), y_full, rtol=1e-12, atol=1e-14)
    for k in core.hidden_keys:
        assert torch.allclose(hidden[k], full[k], rtol=1e-12, atol=1e-14), k
    assert set(full) == set(core.state_spec()) and not any(v.requires_grad for v in full.values())
    with pytest.raises(ValueError, match="sensitivities=False"):
        core(x, hidden, reset)


ALL = _variants()


@pytest.mark.parametrize("name, options", ALL, ids=_ids(ALL))
def test_reset_and_state_round_trips(name, options):
    """A reset makes a sample continue as from a fresh state; the state is real tensors of the core's
    dtype that survive torch.save (weights_only) and pickle, and stay valid for a copy of the core made
    by state_dict/load_state_dict."""
    core = _make(name, seed=3, **options)
    x, _, _ = _data(T=20)
    reset = torch.zeros(20, B, dtype=torch.bool)
    reset[12, 0] = True
    with torch.no_grad():
        y, st = core(x, core.initial_state(B), reset)
        y_fresh, _ = core(x[12:, :1], core.initial_state(1), torch.zeros(8, 1, dtype=torch.bool))
    assert torch.allclose(y[12:, :1], y_fresh, rtol=1e-13, atol=1e-15)
    assert all(v.dtype == torch.float64 and not v.is_complex() for v in st.values())
    other = _make(name, seed=4, **options)
    other.load_state_dict(core.state_dict())
    buf = io.BytesIO()
    torch.save(st, buf)
    st2 = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    st3 = pickle.loads(pickle.dumps(st))
    with torch.no_grad():
        ya, sa = core(x, st, reset)
        yb, sb = other(x, st2, reset)
        yc, _ = other(x, st3, reset)
    assert torch.equal(ya, yb) and torch.equal(ya, yc) and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_mix_is_its_parts_side_by_side():
    """model.core=mix: the output is the parts' outputs concatenated, each part run alone with its own
    weights and state; the state holds each part's keys under its index; bad parts are refused by name."""
    torch.manual_seed(0)
    mix = make_core("mix", D, 5, learning="rtrl", parts=[["elstm", 3, {"contractive": True}], ["rtu", 2]])
    assert [type(p).name for p in mix.parts] == ["elstm", "rtu"] and mix.parts[0].contractive
    assert mix.output_size == 3 + 2 * 2
    assert set(mix.state_spec()) == {"0_" + k for k in mix.parts[0].state_spec()} | {
        "1_" + k for k in mix.parts[1].state_spec()}
    assert len(mix.recurrent_parameters()) == len(mix.parts[0].recurrent_parameters()) + len(
        mix.parts[1].recurrent_parameters())
    x, reset, _ = _data(T=30)
    with torch.no_grad():
        y, st = mix(x, mix.initial_state(B), reset)
        for i, part in enumerate(mix.parts):
            yi, sti = part(x, part.initial_state(B), reset)
            lo = sum(p.output_size for p in mix.parts[:i])
            assert torch.equal(y[..., lo:lo + part.output_size], yi)
            assert all(torch.equal(st[f"{i}_{k}"], v) for k, v in sti.items())
    default = make_core("mix", D, 5)
    assert [(type(p).name, p.hidden_size) for p in default.parts] == [("elstm", 3), ("rtu", 2)]
    for parts, needle in (([["elstm", 3], ["rtu", 3]], "add up to 6"), ([["felstm_snap1", 5]], "approximate RTRL"),
                          ([["nope", 5]], "unknown part 'nope'"), ([["elstm", 0], ["rtu", 5]], "positive number"),
                          ([["mix", 5]], "another core"), ("elstm", "non-empty list")):
        with pytest.raises(ValueError, match=needle):
            make_core("mix", D, 5, learning="rtrl", parts=parts)
