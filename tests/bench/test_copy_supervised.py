"""tools/copy_supervised.py: the copy task's episodes as the RL agent sees them, and a short supervised run."""

import csv

import numpy as np

from r2ac.envs.recall import CopyVecEnv


def test_copy_episodes_match_the_env(load_tool):
    tool = load_tool("copy_supervised")
    env = CopyVecEnv(6, 3, span=4, symbols=3)
    x, bits = tool.copy_episodes(env)
    assert x.shape == (10, 6, 5) and bits.shape == (6, 3)
    for k in range(3):  # the bits, one-hot in entries 0/1, on the first three steps
        assert np.array_equal(x[k, :, 1].numpy(), bits[:, k].numpy().astype(np.float32))
        assert np.array_equal(x[k, :, 0].numpy(), 1 - bits[:, k].numpy().astype(np.float32))
    assert (x[3:7, :, 2] == 1).all() and (x[7:, :, 3] == 1).all()  # blanks, then the queries
    assert (x[0, :, 4] == 1).all() and (x[1:, :, 4] == 0).all()  # the episode-start flag


def test_short_supervised_run_learns_every_bit(tmp_path, capsys, load_tool):
    tool = load_tool("copy_supervised")
    out = tmp_path / "sup.csv"
    assert tool.main(["--span", "2", "--seeds", "0", "--seconds", "4", "--batch", "64", "--lr", "1e-2",
                      "--out", str(out)]) == 0
    assert "| seed | seconds to 0.9 |" in capsys.readouterr().out
    rows = list(csv.DictReader(open(out)))
    assert rows and float(rows[-1]["fraction_right"]) >= 0.9  # span 2: learned within about a second here
    assert tool.first_reaching([{"fraction_right": 0.5}, {"fraction_right": 0.95}], 0.9) == {"fraction_right": 0.95}
