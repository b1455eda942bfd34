"""tools/retention.py: the share of what each eLSTM unit held after an episode's first frame that is left at its
end, checked against the cell itself, the table's bookkeeping, and a real (tiny) run with and without training."""

import csv

import numpy as np
import pytest
import torch

from r2ac.cores import make_core


def test_recorded_share_is_what_the_cell_keeps(load_tool):
    """With z = 0 after the first frame (no input, w_z = b_z = 0) the cell only decays: c(L) = f(2)...f(L) c(1).
    The recorder, fed the same steps one at a time, must give exactly c(L) / c(1) per unit, and start over where
    an episode starts."""
    tool = load_tool("retention")
    torch.manual_seed(0)
    core = make_core("elstm", 5, 4, learning="tbptt", forget_bias_init=0.0).double()
    with torch.no_grad():
        core.w_z.zero_()
        core.b_z.zero_()
        core.w_f.uniform_(-1, 1)
    B, L = 3, 7
    rec = tool.KeepRecorder(core, B)
    hook = core.register_forward_hook(rec)
    state = core.initial_state(B, sensitivities=False)
    xs = torch.zeros(L, B, 5, dtype=torch.float64)
    xs[0] = 3 * torch.randn(B, 5)  # the first frame writes; nothing after it does
    cells = []
    for t in range(L):
        reset = torch.full((1, B), t == 0)
        _, state = core(xs[t:t + 1], state, reset, sensitivities=False)
        cells.append(state["c"].clone())
    assert (cells[0].abs() > 1e-3).all()
    kept = rec.log_kept.exp()
    assert torch.allclose(kept, cells[-1] / cells[0], rtol=1e-10, atol=0)
    assert (kept < 1).all() and (kept > 0).all()
    core(xs[:1], state, torch.tensor([[True, False, False]]), sensitivities=False)  # env 0 starts an episode
    assert rec.log_kept[0].eq(0).all() and not rec.log_kept[1].eq(0).any()
    hook.remove()


def test_retention_stats_counts_units_per_episode(load_tool):
    tool = load_tool("retention")
    kept = np.array([[0.9, 0.2, 0.05, 0.001], [0.6, 0.6, 0.005, 0.0]])
    row = tool.retention_stats(kept, np.array([10, 12]))
    assert row == {"units": 4, "episodes": 2, "length": 11.0, "kept_half": 1.5, "kept_tenth": 2.0,
                   "kept_hundredth": 2.5, "best": pytest.approx(0.75)}
    with pytest.raises(ValueError, match="at least one episode"):
        tool.retention_stats(np.zeros((0, 4)), np.zeros(0))


def test_retention_of_a_real_run_and_of_its_initialisation(tmp_path, capsys, load_tool, tiny_run):
    tool = load_tool("retention")
    run = tiny_run("cue", "{span: 6, obs: vector}")
    from r2ac.api import load

    kept, lengths = tool.kept_shares(load(str(run)), 5, 0)
    assert kept.shape == (5, 8) and (lengths == 8).all()  # span + 2 steps per episode, 8 units
    assert ((kept > 0) & (kept < 1)).all()
    out = tmp_path / "retention.csv"
    assert tool.main([str(run), "--episodes", "5", "--out", str(out)]) == 0
    row = next(csv.DictReader(open(out)))
    assert row["units"] == "8" and row["episodes"] == "5" and float(row["length"]) == 8.0
    assert 0 <= float(row["kept_half"]) <= float(row["kept_tenth"]) <= float(row["kept_hundredth"]) <= 8
    assert "| units keeping 1/2 |" in capsys.readouterr().out
    assert tool.main([str(run), "--episodes", "5", "--out", str(out), "--untrained"]) == 0
    assert next(csv.DictReader(open(out)))["units"] == "8"


def test_a_core_without_keep_gates_is_refused_by_name(load_tool):
    tool = load_tool("retention")
    with pytest.raises(ValueError, match="model.core=elstm"):
        tool.KeepRecorder(make_core("lstm", 3, 4, learning="tbptt"), 2)
