import dataclasses
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from r2ac.config import schema as C
from r2ac.config import (
    Config,
    ConfigError,
    apply_overrides,
    config_from_dict,
    config_hash,
    config_keys,
    config_to_dict,
    load_config,
    save_config,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(textwrap.dedent(text))
    return str(path)


# ------------------------------------------------------------------ defaults


def test_defaults_match_the_documented_schema():
    c = load_config(None)
    assert (c.name, c.seed, c.algo, c.device, c.total_steps) == ("run", 0, "impala", "auto", 1_000_000)
    assert c.run_dir == os.path.join("runs", "run")
    assert (c.env.id, c.env.num_envs, c.env.options) == ("tmaze", 16, {})
    m = c.model
    assert (m.stem, m.stem_channels, m.stem_fc, m.core, m.hidden_size, m.learning) == (
        "impala", [16, 32, 32], 256, "elstm", 512, "rtrl")
    assert (m.core_options, m.reward_input, m.prev_action_input) == ({}, True, "auto")
    assert (c.stem.path, c.stem.freeze) == ("", False)
    L = c.learner
    assert (L.batch_size, L.unroll_length, L.discount, L.baseline_cost, L.entropy_cost, L.entropy_floor) == (
        32, 100, 0.99, 0.5, 0.05, 0.9)
    assert (L.optimizer, L.learning_rate, L.lr_schedule, L.adam_eps) == ("adam", 6e-3, "linear", 1e-8)
    assert L.entropy_cap == 0.25 and L.logit_penalty == 1e-3
    assert (L.rmsprop_alpha, L.rmsprop_eps, L.rmsprop_momentum) == (0.99, 0.01, 0.0)
    assert (L.grad_norm_clip, L.reward_clip, L.max_nonfinite_updates) == (40.0, 1.0, 10)
    P = c.ppo
    assert (P.rollout_length, P.epochs, P.minibatches, P.gae_lambda, P.discount, P.clip) == (
        2048, 10, 32, 0.95, 0.99, 0.2)
    assert (P.value_clip, P.entropy_cost, P.learning_rate, P.grad_norm_clip, P.refresh_traces,
            P.adam_eps) == (0.5, 0.0, 3e-4, 0.5, False, 1e-5)
    R = c.runtime
    assert (R.kind, R.num_actors, R.address, R.max_trajectories_in_flight, R.dashboard_host,
            R.learner_gpus) == ("local", 1, "", 2, "127.0.0.1", 0.0)
    G = c.logger
    assert (G.tensorboard, G.wandb, G.wandb_project, G.wandb_group, G.wandb_tags, G.wandb_mode,
            G.log_interval_s, G.progress_bar) == (True, False, "r2ac", "", [], "auto", 5.0, True)
    assert (c.checkpoint.interval_s, c.checkpoint.keep) == (300.0, 2)
    assert (c.eval.sets, c.eval.episodes) == (3, 100)


def test_mutable_defaults_are_not_shared():
    a, b = Config(), Config()
    a.model.stem_channels.append(64)
    a.env.options["x"] = 1
    assert b.model.stem_channels == [16, 32, 32] and b.env.options == {}


# ------------------------------------------------------------------ loading and overrides


def test_yaml_and_overrides(tmp_path):
    p = write(tmp_path / "a.yaml", """
        name: tm
        learner: {unroll_length: 20, learning_rate: 6e-4}
        env: {options: {corridor_length: 10, noise: true}}
    """)
    c = load_config(p, ["learner.unroll_length=50", "model.learning=tbptt",
                        "env.options.corridor_length=40", "logger.wandb_tags=[a, b]",
                        "learner.discount=1"])
    assert c.learner.unroll_length == 50
    assert c.model.learning == "tbptt"
    assert c.env.options == {"corridor_length": 40, "noise": True}
    assert c.logger.wandb_tags == ["a", "b"]
    # PyYAML reads 6e-4 as a string; ints are accepted for floats: both become floats
    assert c.learner.learning_rate == 6e-4 and type(c.learner.learning_rate) is float
    assert type(c.learner.discount) is float
    assert c.run_dir == os.path.join("runs", "tm")
    # a non-empty mapping merges; an empty one (or null) empties it
    assert load_config(p, ["env.options={noise: false}"]).env.options == {"corridor_length": 10, "noise": False}
    assert load_config(p, ["env.options={}"]).env.options == {}
    assert load_config(p, ["env.options=null"]).env.options == {}


def test_string_overrides_keep_their_text():
    c = load_config(None, ["name=123", "runtime.address=", "logger.wandb_group=true",
                           "run_dir=out/x"])
    assert c.name == "123" and c.runtime.address == "" and c.logger.wandb_group == "true"
    assert c.run_dir == "out/x"


def test_integral_scientific_ints_accepted_fractional_rejected():
    assert load_config(None, ["total_steps=1e6"]).total_steps == 1_000_000
    with pytest.raises(ConfigError, match=r"total_steps: expected an integer, got 1.5"):
        load_config(None, ["total_steps=1.5"])


def test_null_resets_dict_and_section(tmp_path):
    base = write(tmp_path / "b.yaml", "env: {options: {a: 1}}\nlearner: {batch_size: 4}\n")
    assert load_config(base, ["env.options=null"]).env.options == {}
    assert load_config(base, ["learner=null"]).learner.batch_size == 32


def test_core_override_drops_the_previous_cores_options(tmp_path):
    """The file's model.core_options belong to its core: swapping the core drops them (options given on the
    command line still apply, in any order); naming the same core keeps them."""
    base = write(tmp_path / "b.yaml", "model: {core: elstm, core_options: {contractive: true}}\n")
    assert load_config(base, ["model.core=lstm"]).model.core_options == {}
    assert load_config(base, ["model.core=elstm"]).model.core_options == {"contractive": True}
    assert load_config(base, ["model.core_options.forget_bias=2.0", "model.core=lstm"]).model.core_options == {
        "forget_bias": 2.0}
    assert load_config(base, ["seed=1"]).model.core_options == {"contractive": True}


def test_configs_saved_before_a_key_existed_keep_their_old_behaviour(tmp_path):
    """A run saved before model.carry_inputs_across_episodes existed carried the inputs: loading its resolved
    config (config.yaml, or a checkpoint's) gives true, not today's default; a saved config that lists the key
    and a hand-written file that omits it are taken as they are."""
    cfg = load_config(None, ["name=old"])
    path = tmp_path / "config.yaml"
    save_config(cfg, path)
    assert load_config(str(path)).model.carry_inputs_across_episodes is False  # saved today: as saved
    text = path.read_text().replace("  carry_inputs_across_episodes: false\n", "")
    assert "carry_inputs_across_episodes" not in text and text.startswith("# r2ac resolved config")
    path.write_text(text)
    assert load_config(str(path)).model.carry_inputs_across_episodes is True
    off = load_config(str(path), ["model.carry_inputs_across_episodes=false"])
    assert off.model.carry_inputs_across_episodes is False
    hand = write(tmp_path / "hand.yaml", "model: {hidden_size: 8}\n")
    assert load_config(hand).model.carry_inputs_across_episodes is False
    from r2ac.api import _config_of

    old = config_to_dict(cfg)
    del old["model"]["carry_inputs_across_episodes"]
    assert _config_of({"config": old}, "ckpt").model.carry_inputs_across_episodes is True
    assert "carry_inputs_across_episodes" not in old["model"]  # the checkpoint's dict is not changed


def test_apply_overrides_returns_new_validated_config():
    c = load_config(None)
    c2 = apply_overrides(c, ["seed=3", "env.options={a: {b: 1}}", "env.options.a.c=2"])
    assert c.seed == 0 and c2.seed == 3
    assert c2.env.options == {"a": {"b": 1, "c": 2}}
    with pytest.raises(ConfigError):
        apply_overrides(c, ["seed=-1"])


# ------------------------------------------------------------------ base: inheritance


def test_base_inheritance_recursive_merge(tmp_path):
    write(tmp_path / "common" / "root.yaml", """
        seed: 7
        env: {id: tmaze, num_envs: 8, options: {corridor_length: 10, a: 1}}
        learner: {batch_size: 8, unroll_length: 10}
    """)
    write(tmp_path / "common" / "mid.yaml", """
        base: root.yaml
        learner: {batch_size: 16}
    """)
    child = write(tmp_path / "exp" / "child.yaml", """
        base: ../common/mid.yaml
        name: child
        env: {options: {corridor_length: 40}}
    """)
    c = load_config(child)
    assert c.seed == 7 and c.name == "child"
    assert c.learner.batch_size == 16 and c.learner.unroll_length == 10
    assert c.env.num_envs == 8
    assert c.env.options == {"corridor_length": 40, "a": 1}  # child wins, rest inherited
    # overrides beat every file
    assert load_config(child, ["learner.batch_size=2"]).learner.batch_size == 2


def test_base_cycle_and_missing_base(tmp_path):
    a = write(tmp_path / "a.yaml", "base: b.yaml\n")
    write(tmp_path / "b.yaml", "base: a.yaml\n")
    with pytest.raises(ConfigError, match="loops"):
        load_config(a)
    m = write(tmp_path / "m.yaml", "base: nope.yaml\n")
    with pytest.raises(ConfigError, match=r"not found: .*nope\.yaml.*'base:' of"):
        load_config(m)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = write(tmp_path / "bad.yaml", "learner: {batch_size: 4\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    lst = write(tmp_path / "list.yaml", "- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(lst)
    empty = write(tmp_path / "empty.yaml", "")
    assert load_config(empty) == load_config(None)


# ------------------------------------------------------------------ validation messages


def test_unknown_key_suggests_closest_and_lists_allowed():
    with pytest.raises(ConfigError) as ei:
        load_config(None, ["learner.unrol_length=50"])
    msg = str(ei.value)
    assert "unknown key 'learner.unrol_length'" in msg
    assert "Did you mean 'learner.unroll_length'?" in msg
    assert "batch_size" in msg and "max_nonfinite_updates" in msg
    with pytest.raises(ConfigError, match="Did you mean 'learner'"):
        config_from_dict({"lerner": {"batch_size": 3}})
    with pytest.raises(ConfigError, match="Did you mean 'ppo.rollout_length'"):
        config_from_dict({"ppo": {"num_steps": 3}})


def test_file_error_names_file_and_dotted_key(tmp_path):
    p = write(tmp_path / "x.yaml", "model:\n  hiden_size: 3\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert str(p) in str(ei.value) and "model.hiden_size" in str(ei.value)
    assert "model.hidden_size" in str(ei.value)


@pytest.mark.parametrize(
    "override, pattern",
    [
        ("model.learning=bptt", r"model.learning: must be one of 'rtrl', 'tbptt'; got 'bptt'"),
        ("device=gpu", r"device: must be one of 'auto', 'cpu', 'cuda'"),
        ("learner.batch_size=0", r"learner.batch_size: must be > 0, got 0"),
        ("env.num_envs=-2", r"env.num_envs: must be > 0"),
        ("learner.batch_size=abc", r"learner.batch_size: expected an integer, got 'abc'"),
        ("learner.discount=1.5", r"learner.discount: must be <= 1.0"),
        ("learner.learning_rate=fast", r"learner.learning_rate: expected a number"),
        ("learner.learning_rate=.inf", r"learner.learning_rate: must be finite"),
        ("learner.learning_rate=.nan", r"must be a number, got nan"),
        ("logger.tensorboard=1", r"logger.tensorboard: expected a bool"),
        ("seed=true", r"seed: expected an integer, got True"),
        ("logger.wandb_tags=x", r"logger.wandb_tags: expected a list of strings"),
        ("logger.wandb_tags=[1]", r"logger.wandb_tags\[0\]: expected a string"),
        ("model.stem_channels=[16, 0]", r"model.stem_channels\[1\]: must be > 0"),
        ("env.options=5", r"env.options: expected a mapping"),
        ("learner=3", r"'learner': expected a mapping"),
        ("seed=null", r"seed: must not be null"),
        ("seed.x=1", r"'seed' is a value"),
        ("name=", r"name: must not be empty"),
        ("checkpoint.keep=0", r"checkpoint.keep: must be > 0"),
        ("stem.freeze=true", r"stem.freeze: true needs a pretrained stem"),
        ("--seed=1", r"without leading dashes"),
        ("seed", r"not of the form key=value"),
        ("learner.batch_size=[1", r"not valid YAML"),
    ],
)
def test_bad_values_give_clear_errors(override, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(None, [override])


def test_literal_suggestion_and_all_errors_reported():
    with pytest.raises(ConfigError, match="Did you mean 'linear'"):
        load_config(None, ["learner.lr_schedule=lineer"])
    with pytest.raises(ConfigError) as ei:
        load_config(None, ["seed=-1", "learner.batch_size=0", "algo=dqn"])
    assert len(ei.value.errors) == 3
    assert isinstance(ei.value, ValueError)


def test_yaml_file_type_errors(tmp_path):
    p = write(tmp_path / "t.yaml", "name: 123\nlearner: {batch_size: 2.5}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert "name: expected a string, got 123" in str(ei.value)
    assert "quote it" in str(ei.value)
    assert "learner.batch_size: expected an integer, got 2.5" in str(ei.value)


def test_cross_field_ppo_minibatches():
    with pytest.raises(ConfigError, match="ppo.minibatches"):
        load_config(None, ["algo=ppo", "env.num_envs=1", "ppo.rollout_length=4",
                           "ppo.minibatches=8"])
    load_config(None, ["algo=impala", "env.num_envs=1", "ppo.rollout_length=4"])  # not checked


def test_overrides_must_be_a_list():
    with pytest.raises(ConfigError, match="list of key=value"):
        load_config(None, "seed=1")


# ------------------------------------------------------------------ dict round trip, save, hash


def test_round_trip_and_save(tmp_path):
    c = load_config(None, ["env.options={a: [1, 2], b: {c: x}}", "logger.wandb_tags=[t]",
                           "checkpoint.interval_s=.inf"])
    d = config_to_dict(c)
    assert yaml.safe_load(yaml.safe_dump(d)) == d
    assert config_from_dict(d) == c
    out = tmp_path / "sub" / "config.yaml"
    save_config(c, out)
    assert load_config(out) == c
    assert config_hash(load_config(out)) == config_hash(c)
    assert [f for f in os.listdir(out.parent) if f != "config.yaml"] == []  # no temp left


def test_save_config_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "config.yaml"
    save_config(load_config(None, ["seed=1"]), out)
    before = out.read_text()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(yaml, "safe_dump", boom)
    with pytest.raises(RuntimeError):
        save_config(load_config(None, ["seed=2"]), out)
    assert out.read_text() == before
    assert os.listdir(tmp_path) == ["config.yaml"]


def test_config_hash_stable_and_sensitive():
    a = config_from_dict({"env": {"options": {"x": 1, "y": 2}}})
    b = config_from_dict({"env": {"options": {"y": 2, "x": 1}}})
    assert config_hash(a) == config_hash(b)
    assert len(config_hash(a)) == 12
    assert config_hash(a) != config_hash(apply_overrides(a, ["learner.discount=0.9"]))
    # int vs float spelling of the same value hashes the same (values are normalised)
    assert config_hash(apply_overrides(a, ["learner.discount=1"])) == config_hash(
        apply_overrides(a, ["learner.discount=1.0"]))
    # exclude: seeds of one experiment share a hash
    s1, s2 = apply_overrides(a, ["seed=1", "name=a"]), apply_overrides(a, ["seed=2", "name=b"])
    assert config_hash(s1) != config_hash(s2)
    assert config_hash(s1, exclude=("seed", "name")) == config_hash(s2, exclude=("seed", "name"))


def test_config_hash_is_stable_across_processes():
    code = ("from r2ac.config import load_config, config_hash;"
            "print(config_hash(load_config(None, ['env.options={b: 1, a: 2}'])))")
    env = dict(os.environ, PYTHONHASHSEED="123")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=REPO, check=True).stdout.strip()
    assert out == config_hash(load_config(None, ["env.options={a: 2, b: 1}"]))


def test_every_field_has_help_and_is_documented():
    doc_path = os.path.join(REPO, "docs", "configuration.md")
    with open(doc_path) as fh:
        doc = fh.read()
    missing = [k for k in config_keys() if f"`{k}`" not in doc]
    assert not missing, f"docs/configuration.md does not document: {missing}"

    def walk(cls):
        hints = C._hints(cls)
        for f in dataclasses.fields(cls):
            if C._is_section(hints[f.name]):
                yield from walk(hints[f.name])
            else:
                yield cls.__name__, f

    no_help = [f"{c}.{f.name}" for c, f in walk(Config) if not f.metadata.get("help")]
    assert not no_help
