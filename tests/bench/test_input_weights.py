"""tools/input_weights.py: the core input's layout per kind, and each kind's weight size against the start."""

import copy

import pytest
import torch

from r2ac.agent.nets import AgentNet
from r2ac.config import load_config


def _net(*overrides):
    cfg = load_config("configs/quickstart.yaml", ["env.id=cue", "model.hidden_size=4", *overrides])
    return AgentNet.from_config(cfg.model, (3, 16, 16), 3)


def test_the_kinds_follow_the_networks_input_layout(load_tool):
    tool = load_tool("input_weights")
    assert tool.input_kinds(_net()) == [("centred pixels", 0, 768), ("frame centres", 768, 771),
                                        ("frame extremes", 771, 777), ("frame centroids", 777, 783),
                                        ("reward", 783, 784), ("episode start", 784, 785)]
    kinds = tool.input_kinds(_net("model.prev_action_input=true", "model.frame_spread=true",
                                  "model.frame_extremes=false", "model.frame_centroids=false"))
    assert kinds == [("centred pixels", 0, 768), ("frame centres", 768, 774), ("reward", 774, 775),
                     ("action", 775, 778), ("episode start", 778, 779)]
    vector = AgentNet.from_config(load_config("configs/quickstart.yaml", ["model.hidden_size=4"]).model, (5,), 3)
    assert tool.input_kinds(vector)[0] == ("features", 0, vector.stem.output_size)


@pytest.mark.parametrize("core", ["elstm", "rtu"])
def test_rows_measure_each_kind_against_the_start(load_tool, core):
    tool = load_tool("input_weights")
    start = _net(f"model.core={core}")
    trained = copy.deepcopy(start)
    with torch.no_grad():
        for p in trained.core.parameters():
            if p.dim() == 2 and p.shape[-1] == trained.core_input_size:
                p[:, :768] *= 10.0  # the pixels' columns grew tenfold, the rest kept
    rows = tool.rows_for("run", 5, trained, start)
    matrices = {"elstm": {"F", "Z", "O"}, "rtu": {"W1", "W2"}}[core]
    assert {r["matrix"] for r in rows} == matrices and len(rows) == 8 * len(matrices)  # + the centres' 2 axes
    for r in rows:
        assert r["ratio"] == pytest.approx(10.0 if r["kind"] == "centred pixels" else 1.0)
        assert r["rms_initial"] > 0 and r["step"] == 5


def test_the_centres_axes_are_the_same_whichever_basis_a_net_feeds(load_tool):
    """A net fed the channels with weights W and one fed the contrasts with weights W H^T compute the same
    function: their grey and contrast axes' weights agree."""
    from r2ac.agent.inputs import helmert_basis

    tool = load_tool("input_weights")
    channels, contrasts = _net("model.centre_basis=channels"), _net("model.centre_basis=contrasts")
    W = channels.core.F.detach()[:, 768:771]
    with torch.no_grad():
        contrasts.core.F[:, 768:771] = W @ helmert_basis(3).T
    a = tool.centre_axes(channels, channels.core.F, 768, 771)
    b = tool.centre_axes(contrasts, contrasts.core.F, 768, 771)
    assert [k for k, _ in a] == ["centres: grey axis", "centres: contrast axes"] == [k for k, _ in b]
    for (_, x), (_, y) in zip(a, b):
        assert torch.allclose(x, y, atol=1e-6)
    assert torch.allclose(a[0][1].squeeze(-1).squeeze(-1), W.sum(-1) / 3 ** 0.5, atol=1e-6)


def test_input_weights_reads_a_run(tmp_path, capsys, load_tool, tiny_run):
    run = tiny_run("cue", "{span: 3, distractors: 0.5}")
    tool = load_tool("input_weights")
    out = tmp_path / "weights.csv"
    assert tool.main([str(run), "--out", str(out)]) == 0
    assert "| run | step | matrix | kind |" in capsys.readouterr().out
    import csv

    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["matrix"] for r in rows} == {"F", "Z", "O"} and int(rows[0]["step"]) > 0
    assert {r["kind"] for r in rows} == {"centred pixels", "frame centres", "frame extremes", "frame centroids",
                                         "reward", "episode start", "centres: grey axis", "centres: contrast axes"}
    # the run trained: some input weights moved, none of the initial ones is zero
    assert all(float(r["rms_initial"]) > 0 for r in rows) and any(float(r["ratio"]) != 1.0 for r in rows)
