"""Every shipped config loads and validates, and its env/core names exist."""

import glob

import pytest

from r2ac.config import load_config
from r2ac.cores import CORES
from r2ac.envs import parse_env_id

FILES = sorted(glob.glob("configs/**/*.yaml", recursive=True))


def test_there_are_configs_for_every_paper_setting():
    names = {f.split("configs/")[1] for f in FILES}
    for need in ("quickstart.yaml", "dmlab/watermaze_rtrl_m100.yaml", "dmlab/select_nonmatching_tbptt_m10.yaml",
                 "dmlab/keys_doors_feedforward.yaml", "atari/breakout_rtrl_m50.yaml", "atari/qbert_tbptt_m50.yaml",
                 "procgen/chaser_rtrl_m5.yaml", "memory/tmaze.yaml"):
        assert need in names, need


@pytest.mark.parametrize("path", FILES)
def test_config_loads(path):
    cfg = load_config(path)
    assert cfg.model.core in CORES
    parse_env_id(cfg.env.id)
