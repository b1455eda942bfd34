"""What a run's ``auto`` model keys became: ``r2ac.runtime.resolved_autos`` and ``autos_line``, and a real run's
line in ``events.log`` and field in ``summary.json`` (its ``config.yaml`` keeps ``auto`` as given)."""

import json

from r2ac.cli import main
from r2ac.config import load_config
from r2ac.envs import make_config_env
from r2ac.runtime import autos_line, build_net, resolved_autos

FIRST_GUESS = "gym:examples.first_guess:FirstGuess"


def _net(*overrides):
    cfg = load_config("quickstart", ["model.hidden_size=8", *overrides])
    venv = make_config_env(cfg.env, 1, 0)
    try:
        return cfg, build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    finally:
        venv.close()


def test_the_keys_left_to_auto_are_named_with_what_they_became():
    cfg, net = _net("env.id=cue", "env.options={span: 3}")
    got = resolved_autos(cfg, net)
    assert got["prev_action_input"] is False  # the delayed cue declares nothing
    assert got["input_scale"] == net.input_scale and got["centre_frames"] is net.centre_frames is True
    assert got["frame_pool"] == net.frame_pool
    assert autos_line(got).startswith("model auto: prev_action_input=false, input_scale=")
    cfg, net = _net("env.id=cue", "env.options={span: 3}", "model.prev_action_input=true", "model.input_scale=1")
    got = resolved_autos(cfg, net)
    assert "prev_action_input" not in got and "input_scale" not in got  # given, not auto
    assert autos_line({}) == ""


def test_a_run_names_what_auto_became(tmp_path):
    for given, expect in (("auto", True), ("false", None)):
        run = tmp_path / given
        assert main(["train", "quickstart", f"run_dir={run}", f"env.id={FIRST_GUESS}", "env.options={span: 3}",
                     "env.num_envs=4", "learner.batch_size=2", "model.hidden_size=8", "total_steps=200",
                     "logger.progress_bar=false", "checkpoint.interval_s=.inf",
                     f"model.prev_action_input={given}"]) == 0
        summary = json.loads((run / "summary.json").read_text())
        events = (run / "events.log").read_text()
        if expect is None:
            assert "prev_action_input" not in summary["model_auto"] and "prev_action_input=" not in events
        else:
            assert summary["model_auto"]["prev_action_input"] is True
            assert "model auto: prev_action_input=true" in events
            assert "prev_action_input: auto" in (run / "config.yaml").read_text()


def test_a_ppo_run_names_what_auto_became(tmp_path):
    """PPO names the keys it uses: the previous action as the task declares, the episode-start flag 1, the whole
    frame and no raw-frame features; ``input_scale`` (unused by PPO) is not named, a key given is not named."""
    from r2ac.runtime.ppo import ppo_resolved_autos, train_ppo

    def cfg(*extra):
        return load_config(None, ["algo=ppo", f"env.id={FIRST_GUESS}", "env.options={span: 3}", "env.num_envs=2",
                                  "ppo.rollout_length=8", "ppo.epochs=1", "ppo.minibatches=2", "ppo.encoder=[8]",
                                  "model.core=rtu", "model.hidden_size=4", "total_steps=16",
                                  f"run_dir={tmp_path / 'run'}", "logger.tensorboard=false",
                                  "logger.progress_bar=false", *extra])

    got = ppo_resolved_autos(cfg())
    assert got["prev_action_input"] is True and got["episode_start_value"] == 1.0 and got["frame_pool"] == 1
    assert got["centre_frames"] is got["frame_centroids"] is False and "input_scale" not in got
    assert "prev_action_input" not in ppo_resolved_autos(cfg("model.prev_action_input=false"))
    assert ppo_resolved_autos(cfg("env.id=tmaze", "env.options={corridor_length: 2}"))["prev_action_input"] is False
    assert train_ppo(cfg())["status"] == "finished"
    run = tmp_path / "run"
    assert json.loads((run / "summary.json").read_text())["model_auto"] == got
    assert "model auto: prev_action_input=true, episode_start_value=1, frame_pool=1" in (run / "events.log").read_text()
