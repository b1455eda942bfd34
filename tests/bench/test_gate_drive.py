"""tools/gate_drive.py on a real (tiny) delayed-cue run: the keep gate's drive by cue and noise frames."""

import csv

import pytest
import torch



def test_gate_drive_reads_a_run_and_scales_as_the_run_did(tmp_path, capsys, load_tool, tiny_run):
    run = tiny_run("cue", "{span: 3, distractors: 0.5}", "model.centre_frames=false")
    tool = load_tool("gate_drive")
    rows = {}
    for scale, out in (("auto", tmp_path / "auto.csv"), ("1", tmp_path / "one.csv")):
        assert tool.main([str(run), "--out", str(out), "--set", f"model.input_scale={scale}"]) == 0
        with open(out, newline="") as fh:
            rows[scale] = {r["weights"]: r for r in csv.DictReader(fh)}
    assert "| run | weights |" in capsys.readouterr().out
    auto, one = rows["auto"], rows["1"]
    assert float(auto["initial"]["input_scale"]) == 0.1 and float(one["initial"]["input_scale"]) == 1.0
    # the same initial weights: the drive scales with the input
    for k in ("cue_abs_Fx", "noise_mean_abs_Fx", "noise_std_Fx", "query_abs_Ox"):
        assert float(one["initial"][k]) == pytest.approx(10 * float(auto["initial"][k]), rel=1e-5)
        assert float(auto["initial"][k]) > 0
    assert auto["trained"]["cue_abs_Fx"] != auto["initial"]["cue_abs_Fx"]  # the checkpoint was loaded
    with pytest.raises(SystemExit, match="not an eLSTM run on the delayed cue"):
        tool.main([str(run), "--set", "env.id=tmaze", "env.options={}"])


@pytest.mark.parametrize("centre, statistic, drive", [(False, "mean", 768 * 0.1), (True, "mean", 3.0),
                                                     (True, "median_mean", 6.0)])
def test_query_drive_counts_saturated_output_gates(load_tool, centre, statistic, drive):
    """The output gate's drive by the white query frame: O = 0 gives 0; O = 1 on every input gives the
    frame's summed scaled inputs in every unit: 768 x 0.1, all of them over 10, for the pixels as they are;
    centred (model.centre_frames), the white frame is 0 in every pixel and 1 in each of the 3 channel means
    (and the 3 medians with model.frame_centre=median_mean)."""
    from r2ac.agent.nets import AgentNet

    tool = load_tool("gate_drive")
    net = AgentNet((3, 16, 16), 3, stem="none", core="elstm", hidden_size=4, centre_frames=centre,
                   frame_centre=statistic)
    cue, noise = tool.frames({"span": 2})
    with torch.no_grad():
        net.core.O.zero_()
        assert tool.drive(net, cue, noise)[3:] == (0.0, 0.0)
        net.core.O.fill_(1.0)
        q, frac = tool.drive(net, cue, noise)[3:]
    assert q == pytest.approx(drive, rel=1e-5) and frac == (1.0 if drive > 10 else 0.0)
