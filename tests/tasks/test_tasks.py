"""The task generators: shapes, determinism, targets, the ListOps evaluator, trace stream statistics."""

from itertools import combinations

import numpy as np
import pytest
import torch

from r2ac.tasks import (TOKENS, VOCAB, copy_b1, copy_patterns, discounted_return, evaluate, flash_parity,
                        generate_expression, listops_batch, oracle_predictions, trace_conditioning, trace_patterning)
from r2ac.tasks.listops import apply_op

torch.set_num_threads(1)


# -- copy tasks ---------------------------------------------------------------------------------------------

def test_copy_b1_layout_and_targets():
    b = copy_b1(64, 6, rng=0)
    assert b.x.shape == (12, 64, 3) and b.y.shape == (12, 64) and b.mask.shape == (12, 64)
    assert b.kind == "class" and b.n_classes == 2
    L = b.lengths // 2
    assert L.min() >= 1 and L.max() <= 6 and len(set(L.tolist())) > 3  # lengths 2..2l are used
    for j in range(64):
        n = int(L[j])
        sym = b.x[:n, j, :2].argmax(-1)
        assert (b.x[:n, j].sum(-1) == 1).all() and (b.x[:n, j, 2] == 0).all()
        assert (b.x[n:2 * n, j, 2] == 1).all() and (b.x[n:2 * n, j, :2] == 0).all()
        assert (b.x[2 * n:, j] == 0).all()  # padding
        assert b.mask[:, j].tolist() == [False] * n + [True] * n + [False] * (12 - 2 * n)
        assert (b.y[n:2 * n, j] == sym).all()  # target at step n + i = symbol i


def test_copy_b1_determinism_and_fixed_length():
    a, b, c = copy_b1(8, 5, rng=3), copy_b1(8, 5, rng=3), copy_b1(8, 5, rng=4)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.x, c.x)
    full = copy_b1(8, 5, rng=0, min_length=5)
    assert (full.lengths == 10).all()
    with pytest.raises(ValueError):
        copy_b1(2, 3, min_length=4)


def test_flash_parity_layout_and_targets():
    """Start flag at step 0, 1..max_count flashes among steps 0..span-1, the query at step span with the
    count's parity as its one target; every count comes up; count= fixes it; seeded."""
    b = flash_parity(3000, span=20, max_count=4, rng=0)
    assert b.x.shape == (21, 3000, 3) and b.kind == "class" and b.n_classes == 2
    assert (b.x[0, :, 0] == 1).all() and (b.x[1:, :, 0] == 0).all()
    assert (b.x[20, :, 2] == 1).all() and (b.x[:20, :, 2] == 0).all() and (b.x[20, :, 1] == 0).all()
    counts = b.x[:, :, 1].sum(0).astype(int)
    assert set(counts) == {1, 2, 3, 4} and np.bincount(counts)[1:].min() > 600
    assert (b.mask[20]).all() and not b.mask[:20].any() and np.array_equal(b.y[20], counts % 2)
    assert set(np.flatnonzero(b.x[:, :, 1].sum(1))) == set(range(20))  # every frame of the span can flash
    fixed = flash_parity(50, span=20, max_count=4, rng=1, count=3)
    assert (fixed.x[:, :, 1].sum(0) == 3).all() and (fixed.y[20] == 1).all()
    assert np.array_equal(flash_parity(8, 20, 4, rng=5).x, flash_parity(8, 20, 4, rng=5).x)
    with pytest.raises(ValueError, match="max_count"):
        flash_parity(4, span=3, max_count=4)
    with pytest.raises(ValueError, match="count must be"):
        flash_parity(4, span=10, count=0)


def test_copy_patterns_layout():
    b = copy_patterns(5, rng=1, n_patterns=20, bits=7, delay=7)
    assert b.x.shape == (47, 5, 8) and b.y.shape == (47, 5, 7) and b.kind == "bits"
    assert (b.x[:20, :, 7] == 0).all() and (b.x[20:27] == 0).all()
    assert (b.x[27:, :, 7] == 1).all() and (b.x[27:, :, :7] == 0).all()
    assert np.array_equal(b.y[27:], b.x[:20, :, :7])  # recall the stored patterns in order
    assert b.mask[27:].all() and not b.mask[:27].any()
    assert np.array_equal(copy_patterns(5, rng=1).x, b.x)


# -- ListOps ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expr,value", [
    ("7", 7),
    ("[MAX 2 9 [MIN 4 7 ] 0 ]", 9),
    ("[MIN 3 [MAX 1 2 ] ]", 2),
    ("[SM 5 6 7 ]", 8),
    ("[MED 1 9 3 ]", 3),
    ("[MED 1 2 3 4 ]", 2),  # int(np.median([1, 2, 3, 4])) = int(2.5)
    ("[MED 2 9 ]", 5),  # int(5.5)
    ("[MIN [MAX 1 2 ] [SM 9 9 ] ]", 2),
    ("[SM [MAX 8 1 ] [MED 7 7 0 ] [MIN 5 6 ] 3 ]", 3),  # 8 + 7 + 5 + 3 = 23
    ("[MAX [MIN [SM 9 9 9 ] 8 ] [MED 0 1 ] ]", 7),  # min(27 % 10, 8) = 7; med(0, 1) = 0
])
def test_listops_evaluator(expr, value):
    assert evaluate(expr) == value


def test_listops_evaluator_matches_numpy_median_and_rejects_bad_input():
    rng = np.random.default_rng(0)
    for _ in range(200):
        args = rng.integers(0, 10, size=rng.integers(1, 8)).tolist()
        assert apply_op("MED", args) == int(np.median(args))
    for bad in ("[MAX 1 2", "[MAX 1 2 ] ]", "[FOO 1 ]", "1 2", "[MAX 1 12 ]", "[MAX 1 ] 3"):
        with pytest.raises(ValueError):
            evaluate(bad)


def test_listops_generator():
    rng = np.random.default_rng(5)
    labels = []
    for _ in range(300):
        toks, label = generate_expression(rng, max_depth=3, max_args=4, min_length=5, max_length=40)
        assert 5 <= len(toks) <= 40 and toks[0].startswith("[") and toks[-1] == "]"
        assert evaluate(toks) == label and 0 <= label <= 9
        labels.append(label)
    assert len(set(labels)) >= 8
    a = generate_expression(7)
    assert a == generate_expression(7)


def test_listops_batch():
    b = listops_batch(16, rng=2, max_length=30)
    assert b.x.shape[1:] == (16, VOCAB) and VOCAB == len(TOKENS) == 15
    for j in range(16):
        n = int(b.lengths[j])
        assert b.mask[:n, j].all() and not b.mask[n:, j].any()
        toks = [TOKENS[i] for i in b.x[:n, j].argmax(-1)]
        assert (b.x[:n, j].sum(-1) == 1).all() and (b.x[n:, j] == 0).all()
        assert (b.y[:n, j] == evaluate(toks)).all()
    assert np.array_equal(listops_batch(16, rng=2, max_length=30).x, b.x)


# -- trace conditioning / patterning --------------------------------------------------------------------

def test_trace_patterning_statistics():
    s = trace_patterning(60_000, rng=0)
    T = 60_000
    assert s.x.shape == (T, 12) and s.n_cs == 6 and s.n_distractors == 5
    assert s.pattern_table.shape == (20, 6) and (s.pattern_table.sum(1) == 3).all()
    assert {tuple(np.flatnonzero(r)) for r in s.pattern_table} == set(combinations(range(6), 3))
    assert len(s.us_patterns) == 10 and len(set(s.us_patterns.tolist())) == 10
    # ISI ~ U{24..36}, ITI ~ U{80..120}, both ends reached; trials follow each other
    assert s.isi.min() == 24 and s.isi.max() == 36 and s.iti.min() == 80 and s.iti.max() == 120
    assert np.array_equal(np.diff(s.cs_times), (s.isi + s.iti)[:-1])
    # the CS channels: exactly the trial's pattern at CS onsets, zero elsewhere
    cs = s.x[:, :6]
    assert np.array_equal(np.flatnonzero(cs.sum(1)), s.cs_times)
    assert np.array_equal(cs[s.cs_times], s.pattern_table[s.patterns])
    # the US follows exactly the US patterns, ISI steps after the CS
    follows = np.isin(s.patterns, s.us_patterns)
    assert np.array_equal(s.us_times >= 0, follows)
    assert np.array_equal(s.us_times[follows], (s.cs_times + s.isi)[follows])
    in_stream = s.us_times[(s.us_times >= 0) & (s.us_times < T)]
    assert np.array_equal(np.flatnonzero(s.x[:, 6]), in_stream)
    assert np.array_equal(s.cumulant, s.x[:, 6])
    # all 20 patterns occur, the US on about half of the trials
    assert len(set(s.patterns.tolist())) == 20 and 0.35 < follows.mean() < 0.65
    # distractors: about one pulse per trial each, unrelated to the CS
    rate = s.x[:, 7:].mean(0)
    assert ((rate > 0.5 / 130) & (rate < 2 / 130)).all()
    # determinism
    s2 = trace_patterning(60_000, rng=0)
    assert np.array_equal(s.x, s2.x) and np.array_equal(s.us_patterns, s2.us_patterns)
    assert not np.array_equal(trace_patterning(60_000, rng=1).x, s.x)


def test_trace_conditioning_always_followed_by_us():
    s = trace_conditioning(20_000, rng=3)
    assert s.x.shape == (20_000, 7) and s.n_cs == 1
    assert (s.us_times == s.cs_times + s.isi).all()
    assert s.isi.min() >= 24 and s.isi.max() <= 36 and s.iti.min() >= 80 and s.iti.max() <= 120
    assert np.array_equal(np.flatnonzero(s.x[:, 0]), s.cs_times)


def test_discounted_return():
    rng = np.random.default_rng(0)
    c = (rng.random(60) < 0.1).astype(np.float32)
    G = discounted_return(c, 0.9)
    for t in range(60):
        assert G[t] == pytest.approx(sum(0.9 ** k * c[t + k + 1] for k in range(60 - t - 1)), abs=1e-12)


def test_oracle_prediction_floor():
    """With a fixed ISI the return is a function of the time since the CS (up to the unpredictable next CS
    onset): the oracle is almost exact;
    with ISI ~ U{24..36} it leaves an error floor well below the return's variance."""
    fixed = trace_conditioning(20_000, rng=0, isi=(30, 30))
    G = fixed.returns(0.9)
    assert ((oracle_predictions(fixed, 0.9) - G) ** 2).mean() < 2e-3 * G.var()  # left: the next CS onset
    s = trace_patterning(20_000, rng=0)
    G = s.returns(0.9)
    err = ((oracle_predictions(s, 0.9) - G) ** 2).mean()
    assert 0.01 * G.var() < err < 0.3 * G.var()
