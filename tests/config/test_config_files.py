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


@pytest.mark.parametrize("path", [f for f in FILES
                                  if f.split("configs/")[1].split("/")[0] in ("atari", "dmlab", "procgen")])
def test_paper_configs_keep_the_papers_optimiser(path):
    """The schema's learner defaults are the small-CPU-run settings (Adam); the paper's configs state seed
    000's Table 4 optimiser (RMSprop, alpha 0.99, momentum 0; lr 6e-4 and entropy 0.01 unless a quick config
    says otherwise, the plain bonus: no entropy floor) themselves."""
    L = load_config(path).learner
    assert (L.optimizer, L.rmsprop_alpha, L.rmsprop_momentum, L.entropy_floor) == ("rmsprop", 0.99, 0.0, 0.0)
    assert L.entropy_cap == 0.0 and L.logit_penalty == 0.0
    if "quick" not in path and "long" not in path:
        assert (L.learning_rate, L.entropy_cost, L.rmsprop_eps) == (6e-4, 0.01, 0.01)


@pytest.mark.parametrize("path", [f for f in FILES if "/memory/" in f])
def test_memory_configs_keep_their_plain_bonus(path):
    """configs/memory made their results with the plain bonus as is: no floor, no cap in reward units (the
    schema's defaults since docs/results.md 'An entropy floor' and 'Held-out tasks')."""
    L = load_config(path).learner
    assert (L.entropy_floor, L.entropy_cap, L.logit_penalty) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("path", [f for f in FILES if "/memory/" in f])
def test_memory_configs_keep_their_envs_in_step(path):
    """configs/memory made their results with every env starting its first episode at step 0 (the schema
    desyncs them since docs/results.md 'Envs out of step')."""
    assert load_config(path).env.desync is False
