"""r2ac.bench.probe: a linear probe reads what a state holds linearly, and only that; states of any nesting
flattened one row per env."""

import dataclasses

import numpy as np
import pytest
import torch

from r2ac.bench.probe import fit_softmax_probe, probe_right, state_rows


def count_states(n, seed=0, noise=0.03, parity_unit=False):
    """A state that keeps a count 1-6 along one direction of 8, 0.2 per flash, with noise of ``noise`` on every
    unit; optionally a unit holding its parity as +-1: [n, 8 or 9], and the counts [n]."""
    rng = np.random.default_rng(seed)
    count = rng.integers(1, 7, size=n)
    direction = rng.normal(size=8)
    x = 0.2 * count[:, None] * direction / np.linalg.norm(direction) + noise * rng.normal(size=(n, 8))
    if parity_unit:
        x = np.c_[x, 2.0 * (count % 2) - 1]
    return x, count


def test_a_count_kept_along_a_line_is_read_and_its_parity_is_not():
    x, count = count_states(3000)
    held_out = np.arange(3000) % 2 == 1
    counted = probe_right(x, count - 1, 6, held_out)
    assert counted.mean() > 0.95
    for k in range(1, 7):  # every count, the middle ones too: softmax carves the line into intervals
        assert counted[count[held_out] == k].mean() > 0.85
    parity = probe_right(x, count % 2, 2, held_out)
    assert parity.mean() < 0.75  # one threshold on a line cannot tell 1, 3, 5 from 2, 4, 6


def test_a_parity_held_by_a_unit_of_its_own_is_read():
    x, count = count_states(2000, seed=1, parity_unit=True)
    held_out = np.arange(2000) % 2 == 1
    assert probe_right(x, count % 2, 2, held_out).mean() > 0.99


def test_labels_the_state_does_not_hold_are_read_at_chance():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 16))
    labels = rng.integers(0, 2, size=2000)
    held_out = np.arange(2000) % 2 == 1
    assert abs(probe_right(x, labels, 2, held_out).mean() - 0.5) < 0.06


def test_the_fit_is_deterministic_and_standardises_each_feature():
    x, count = count_states(600, seed=3)
    big = x * np.array([1e3] + [1.0] * 7)  # one feature a thousand times larger reads the same
    a = fit_softmax_probe(x, count - 1, 6)(x)
    assert np.array_equal(a, fit_softmax_probe(x, count - 1, 6)(x))
    assert (fit_softmax_probe(big, count - 1, 6)(big) == a).mean() > 0.97


def test_bad_probe_input_is_refused_with_the_problem_named():
    x, count = count_states(40)
    with pytest.raises(ValueError, match="2 classes or more"):
        fit_softmax_probe(x, count * 0, 1)
    with pytest.raises(ValueError, match=r"labels must be in 0 \.\. 5"):
        fit_softmax_probe(x, count, 6)  # 1 .. 6, not 0 .. 5
    with pytest.raises(ValueError, match=r"x must be \[n, D\]"):
        fit_softmax_probe(x[:, 0], count - 1, 6)
    with pytest.raises(ValueError, match="both fitted and held-out rows"):
        probe_right(x, count - 1, 6, np.ones(40, bool))


@dataclasses.dataclass
class FakePolicyState:
    core: object


def test_states_flatten_one_row_per_env_in_a_fixed_order():
    core = {"c": torch.arange(6.0).reshape(2, 3), "a": [torch.ones(2, 2, 2), np.zeros((2, 1))]}
    rows = state_rows(FakePolicyState(core))
    assert rows.shape == (2, 4 + 1 + 3) and rows.dtype == np.float64
    assert np.array_equal(rows[:, -3:], [[0, 1, 2], [3, 4, 5]])  # "a" before "c"
    assert np.array_equal(state_rows(np.array([[1, 2], [3, 4]])), [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match="different numbers of rows"):
        state_rows({"a": torch.zeros(2, 1), "b": torch.zeros(3, 1)})
    with pytest.raises(ValueError, match="no tensors"):
        state_rows({"a": None})
    assert state_rows((torch.ones(2, 1), None)).shape == (2, 1)  # None parts (a core without them) skipped
    with pytest.raises(ValueError, match="one row per env"):
        state_rows(torch.tensor(1.0))


def test_a_linear_readout_learns_by_policy_gradient_what_is_linear_in_the_features():
    from r2ac.bench.probe import train_readout

    x, count = count_states(2000, seed=4)
    held_out = np.arange(2000) % 4 == 3
    res = train_readout(x, (count > 3).astype(int), 2, held_out, updates=1500, eval_every=250)
    assert res["updates_to_0.9"] is not None and res["curve"][-1][1] > 0.95
    assert [u for u, _ in res["curve"]] == [250, 500, 750, 1000, 1250, 1500]
    assert res["right"].shape == (held_out.sum(),)


def test_a_linear_readout_answers_a_kept_parity_and_stops_on_a_count_along_a_line():
    from r2ac.bench.probe import train_readout

    x, count = count_states(2000, seed=5, parity_unit=True)
    held_out = np.arange(2000) % 4 == 3
    kept = train_readout(x, count % 2, 2, held_out, updates=1500, eval_every=500)
    assert kept["updates_to_0.9"] is not None and kept["curve"][-1][1] > 0.95
    line = train_readout(x[:, :-1], count % 2, 2, held_out, updates=1500, eval_every=500)
    assert line["updates_to_0.9"] is None and line["curve"][-1][1] < 0.85
    taught = train_readout(x, count % 2, 2, held_out, updates=1500, eval_every=500, supervised=True)
    assert taught["curve"][-1][1] > 0.95
    taught = train_readout(x[:, :-1], count % 2, 2, held_out, updates=1500, eval_every=500, supervised=True)
    assert taught["curve"][-1][1] < 0.85  # given the answers, a linear read-out still cannot bend the line
    bent = train_readout(x[:, :-1], count % 2, 2, held_out, hidden=8, norm=True, updates=20, eval_every=10)
    assert [u for u, _ in bent["curve"]] == [10, 20] and bent["right"].dtype == bool


def test_readouts_refuse_bad_input():
    from r2ac.bench.probe import readout_net, train_readout

    assert readout_net(5, 3, hidden=4, norm=True)(torch.zeros(2, 5, dtype=torch.float64)).shape == (2, 4)
    with pytest.raises(ValueError, match="actions >= 2"):
        readout_net(5, 1)
    x, count = count_states(40)
    with pytest.raises(ValueError, match="rows on both sides"):
        train_readout(x, count % 2, 2, np.zeros(40, bool))
    with pytest.raises(ValueError, match=r"answers lie in 0 \.\. 1"):
        train_readout(x, count, 2, np.arange(40) % 2 == 0)
    with pytest.raises(ValueError, match="updates, batch and eval_every must be >= 1"):
        train_readout(x, count % 2, 2, np.arange(40) % 2 == 0, updates=0)


def test_a_readout_starts_from_given_heads_and_the_agents_heads_are_taken_as_they_are():
    from r2ac.bench.probe import agent_heads, train_readout

    x, count = count_states(400, seed=6, parity_unit=True)
    held_out = np.arange(400) % 4 == 3
    weight = np.zeros((3, 9))
    weight[1, -1], weight[0, -1] = 50.0, -50.0  # answers "odd" exactly where the parity unit is +1: right already
    res = train_readout(x, count % 2, 2, held_out, updates=1, eval_every=1, initial=(weight, np.zeros(3)))
    assert res["start"] == 1.0
    assert train_readout(x[:, :-1], count % 2, 2, held_out, updates=1, eval_every=1)["start"] < 0.9  # fresh
    with pytest.raises(ValueError, match=r"must be \[3, 9\] and \[3\]"):
        train_readout(x, count % 2, 2, held_out, updates=1, initial=(weight[:, :4], np.zeros(3)))
    with pytest.raises(ValueError, match="for a linear read-out"):
        train_readout(x, count % 2, 2, held_out, updates=1, hidden=4, initial=(weight, np.zeros(3)))

    class Net(torch.nn.Module):
        def __init__(self, trunk=None):
            super().__init__()
            self.policy, self.baseline = torch.nn.Linear(9, 2), torch.nn.Linear(9, 1)
            self.head_trunk, self.head_norm, self.head_input = trunk, None, False

    net = Net()
    w, b = agent_heads(net)
    assert w.shape == (3, 9) and np.allclose(w[:2], net.policy.weight.detach())
    assert np.allclose(b[2], net.baseline.bias.item())
    with pytest.raises(ValueError, match="not linear on the core's output"):
        agent_heads(Net(trunk=torch.nn.Tanh()))
