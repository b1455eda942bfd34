"""Loading run configs: YAML files (which may inherit from others through a top-level ``base:`` key),
``key=value`` overrides from the command line, the configs shipped with the package, saving a resolved
config and its hash. Every result is validated against the schema (``r2ac.config.schema``)::

    cfg = load_config("configs/quickstart.yaml", ["learner.unroll_length=50", "model.learning=tbptt"])
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import typing
from typing import Any, Literal

import yaml

from r2ac.config.schema import (Config, ConfigError, EnvConfig, ModelConfig, _hints, _is_dict, _is_section, _show,
                                _type_name, _unknown_key_message, config_from_dict, config_to_dict)
from r2ac.fileio import atomic_write_text

__all__ = [
    "PACKAGED_CONFIGS",
    "load_config",
    "save_config",
    "apply_overrides",
    "config_hash",
    "packaged_configs",
    "resolve_config_path",
]


# --------------------------------------------------------------------------------------------
# YAML files, inheritance and overrides
# --------------------------------------------------------------------------------------------


def _merge(base: dict, child: dict) -> dict:
    """Recursive merge: mappings merge key by key, anything else in ``child`` replaces."""
    out = copy.deepcopy(base)
    for k, v in child.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _read_yaml(path: str, chain: tuple[str, ...] = ()) -> dict:
    real = os.path.realpath(path)
    if real in chain:
        cycle = " -> ".join(list(chain) + [real])
        raise ConfigError(f"'base:' inheritance loops: {cycle}", source=path)
    if not os.path.isfile(path):
        via = f" (the 'base:' of {chain[-1]})" if chain else ""
        hint = ("relative 'base:' paths are resolved from the directory of the file that names them" if chain
                else "`r2ac list configs` names the configs shipped with r2ac")
        raise ConfigError(f"config file not found: {path}{via}; check the path ({hint})")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML: {e}", source=path) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"the top level must be a mapping (key: value pairs), got {type(data).__name__}",
            source=path,
        )
    if text.startswith(RESOLVED_HEADER):
        data = upgrade_resolved(data)
    bases = data.pop("base", None)
    if bases is None:
        return data
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not all(isinstance(b, str) and b for b in bases):
        raise ConfigError(
            f"base: expected a file name or a list of file names, got {_show(bases)}", source=path
        )
    merged: dict = {}
    here = os.path.dirname(path)
    for b in bases:
        bpath = b if os.path.isabs(b) else os.path.join(here, b)
        merged = _merge(merged, _read_yaml(bpath, chain + (real,)))
    return _merge(merged, data)


# r2ac/configs (a link to the repository's configs/ in a checkout, the files themselves in a wheel)
PACKAGED_CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def packaged_configs() -> list[str]:
    """Names of the configs shipped in the package (``quickstart``, ``atari/breakout_rtrl_m50``, ...), sorted;
    ``base`` files (only inherited from) are left out."""
    out = []
    for root, _, files in os.walk(PACKAGED_CONFIGS, followlinks=True):
        for f in files:
            if f.endswith(".yaml") and f != "base.yaml":
                rel = os.path.relpath(os.path.join(root, f), PACKAGED_CONFIGS)
                out.append(rel[: -len(".yaml")].replace(os.sep, "/"))
    return sorted(out)


def resolve_config_path(path: str | os.PathLike) -> str:
    """A config file: ``path`` if that file exists, else the packaged config of that name, so that
    ``quickstart``, ``atari/breakout_rtrl_m50`` and ``configs/quickstart.yaml`` work from any directory.
    A path found nowhere is returned as given (loading it then reports it missing)."""
    path = os.path.expanduser(os.fspath(path))
    if os.path.isfile(path):
        return path
    name = path.replace(os.sep, "/")
    if name.startswith("./"):
        name = name[2:]
    if name.startswith("configs/"):
        name = name[len("configs/"):]
    for cand in (name, name + ".yaml"):
        full = os.path.join(PACKAGED_CONFIGS, *cand.split("/"))
        if not os.path.isabs(name) and os.path.isfile(full):
            return full
    return path


def _schema_target(key: str) -> tuple[Any, str | None]:
    """Annotation at dotted ``key`` (``Any`` inside free-form dicts), or an error message."""
    parts = key.split(".")
    cls: Any = Config
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        if not part:
            return None, f"override key '{key}' has an empty component"
        if _is_dict(cls):
            return Any, None  # free-form: anything below a dict-typed field goes
        if not _is_section(cls):
            return None, (
                f"cannot set '{key}': '{prefix}' is a value ({_type_name(cls)}), not a section"
            )
        hints = _hints(cls)
        if part not in hints:
            return None, _unknown_key_message(cls, prefix, part)
        cls = hints[part]
    return cls, None


def _parse_override(item: str) -> tuple[str, Any]:
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(
            f"override {item!r} is not of the form key=value (e.g. learner.unroll_length=50)"
        )
    key, raw = item.split("=", 1)
    key = key.strip()
    if key.startswith("-"):
        raise ConfigError(
            f"override {item!r}: write overrides without leading dashes, e.g. "
            f"{key.lstrip('-')}={raw}"
        )
    if not key:
        raise ConfigError(f"override {item!r} has no key before '='")
    tp, err = _schema_target(key)
    if err:
        raise ConfigError(f"{err} (in override {item!r})")
    str_like = tp is str or (
        typing.get_origin(tp) is Literal and all(isinstance(a, str) for a in typing.get_args(tp))
    )
    if raw.strip() == "" and (str_like or tp is Any):
        return key, ""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"override {item!r}: the value is not valid YAML ({e})") from None
    if str_like and not isinstance(value, str) and value is not None:
        value = raw.strip()  # name=123 means the string "123"
    return key, value


def _set_dotted(d: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    node = d
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    last = parts[-1]
    if isinstance(value, dict) and value and isinstance(node.get(last), dict):
        # `key={a: 1}` merges into the mapping; `key={}` empties it
        node[last] = _merge(node[last], value)
    else:
        node[last] = value


# env kinds whose options are free-form keyword arguments of one particular env (not of the kind)
_FREE_OPTION_ENV_KINDS = ("gym", "gymc", "mujoco", "mujoco-p", "mujoco-v", "popgym")


def _env_kind(env_id: Any) -> str:
    """The kind part of an env id (``atari`` of ``atari:Breakout``), without importing the envs."""
    text = str(env_id).strip().lower()
    return text.partition(":")[0] if ":" in text else text


def _keeps_env_options(old_id: Any, new_id: Any) -> bool:
    """Whether options written for env ``old_id`` still apply to ``new_id``: the same kind of env (Atari
    to another Atari game), unless that kind's options belong to one env (Gymnasium keyword arguments)."""
    if str(old_id).strip() == str(new_id).strip():
        return True
    kind = _env_kind(old_id)
    return kind == _env_kind(new_id) and kind not in _FREE_OPTION_ENV_KINDS


def _apply_overrides_to_dict(d: dict, overrides: typing.Iterable[str], errors: list[str] | None = None) -> dict:
    """Apply ``key=value`` overrides to a config dict. With an ``errors`` list, every bad override adds its
    line there and the others are still applied (so one load reports all of its problems); without one the
    first bad override raises.

    An override of ``env.id`` that names another kind of env drops the ``env.options`` that came with the
    file (they were written for the previous env); ``env.options...`` overrides still apply, in any order.
    Likewise an override of ``model.core`` that names another core drops the file's ``model.core_options``
    (``configs/quickstart.yaml`` sets the eLSTM's ``contractive``).
    """
    if isinstance(overrides, str):
        raise ConfigError(f"overrides must be a list of key=value strings, got the string {overrides!r}")
    d = copy.deepcopy(d)
    parsed = []
    for item in overrides:
        try:
            parsed.append(_parse_override(item))
        except ConfigError as e:
            if errors is None:
                raise
            errors.extend(e.errors)
    new_ids = [v for k, v in parsed if k == "env.id" and isinstance(v, str)]
    env = d.get("env")
    if new_ids and isinstance(env, dict) and env.get("options"):
        if not _keeps_env_options(env.get("id", EnvConfig.id), new_ids[-1]):
            env["options"] = {}
    new_cores = [v for k, v in parsed if k == "model.core" and isinstance(v, str)]
    model = d.get("model")
    if new_cores and isinstance(model, dict) and model.get("core_options"):
        if str(model.get("core", ModelConfig.core)).strip() != new_cores[-1].strip():
            model["core_options"] = {}
    for key, value in parsed:
        _set_dotted(d, key, value)
    return d


def _validated(d: dict, errors: list[str]) -> Config:
    """``config_from_dict(d)``, reporting ``errors`` (from the overrides) together with the schema's."""
    try:
        cfg = config_from_dict(d)
    except ConfigError as e:
        raise ConfigError(errors + e.errors) from None
    if errors:
        raise ConfigError(errors)
    return cfg


def apply_overrides(cfg: Config, overrides: typing.Iterable[str]) -> Config:
    """Return a new validated :class:`Config`: ``cfg`` with ``key=value`` overrides applied (every problem
    of the overrides and of the result in one :class:`ConfigError`)."""
    errors: list[str] = []
    return _validated(_apply_overrides_to_dict(config_to_dict(cfg), overrides, errors), errors)


def load_config(path: str | os.PathLike | None, overrides: typing.Iterable[str] = ()) -> Config:
    """Load ``path`` (``None``: defaults), apply overrides, validate, and resolve ``run_dir``.

    An empty ``run_dir`` becomes ``runs/<name>``.
    """
    if path is not None:
        path = resolve_config_path(path)
    data = _read_yaml(path) if path is not None else {}
    errors: list[str] = []
    data = _apply_overrides_to_dict(data, overrides, errors)
    try:
        cfg = _validated(data, errors)
    except ConfigError as e:
        if path is None:
            raise
        raise ConfigError(e.errors, source=f"{os.fspath(path)} (with overrides)" if overrides
                          else os.fspath(path)) from None
    if not cfg.run_dir:
        cfg.run_dir = os.path.join("runs", cfg.name)
    return cfg


def _atomic_write_text(path: str, text: str) -> None:
    atomic_write_text(path, text)


RESOLVED_HEADER = "# r2ac resolved config"

#: keys added to the schema after runs were saved, with the value that reproduces those runs
_ADDED_KEYS = (("model", "carry_inputs_across_episodes", True), ("model", "episode_start_value", 1.0),
              ("model", "centre_frames", False), ("model", "frame_centre", "mean"), ("env", "desync", False),
              ("learner", "logit_penalty", 0.0), ("learner", "logit_margin", 0.0),
              ("model", "frame_spread", False), ("model", "running_centres", False),
              ("learner", "truncation_bootstrap", False), ("learner", "vtrace_lambda", 1.0),
              ("learner", "kl_target", 0.0), ("learner", "log_update_kl", False), ("learner", "epochs", 1),
              ("learner", "clip", 0.2), ("learner", "adam_amsgrad", False),
              ("model", "head_hidden", 0), ("model", "head_input", False), ("model", "head_norm", False),
              ("learner", "target_tau", 0.0), ("learner", "target_pg", True),
              ("learner", "target_warmup_steps", 0), ("learner", "weight_decay", 0.0),
              ("model", "centre_basis", "channels"), ("model", "centre_observations", False),
              ("model", "frame_pool", 1), ("model", "frame_extremes", False),
              ("env", "frame_stack", 1), ("model", "frame_centroids", False),
              ("model", "freeze_core", False), ("learner", "logit_penalty_where", "every_step"))


def upgrade_resolved(d: dict) -> dict:
    """A resolved config saved by an older r2ac (a run's ``config.yaml``, a checkpoint's config), with each
    key added since set to the value that reproduces the old behaviour rather than today's default (runs
    saved before ``model.carry_inputs_across_episodes`` existed carried the inputs). A resolved config lists
    every key of its time, so a missing one was added later."""
    d = copy.deepcopy(d)
    model = d.get("model")
    if isinstance(model, dict) and "head_hidden" not in model and model.get("input_scale", "auto") == "auto":
        # saved before 'auto' scaled wide flat observations too (the release that added model.head_hidden)
        model["input_scale"] = "auto_pixels"
    for section, key, old in _ADDED_KEYS:
        sec = d.get(section)
        if isinstance(sec, dict) and key not in sec:
            sec[key] = old
    return d


def save_config(cfg: Config, path: str | os.PathLike) -> None:
    """Atomically write the resolved config as YAML (loadable again with :func:`load_config`)."""
    text = (
        f"{RESOLVED_HEADER} (config_hash {config_hash(cfg)})\n"
        + yaml.safe_dump(config_to_dict(cfg), sort_keys=False, default_flow_style=None)
    )
    _atomic_write_text(os.fspath(path), text)


def _canonical(x: Any) -> Any:
    if isinstance(x, dict):
        return [[str(k), _canonical(v)] for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))]
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    if isinstance(x, float):
        return repr(x)  # exact, and identical for nan/inf
    if isinstance(x, (bool, int, str)) or x is None:
        return x
    return repr(x)


def config_hash(cfg: Config, exclude: typing.Iterable[str] = ()) -> str:
    """Stable 12-hex-digit hash of the resolved config.

    ``exclude``: top-level or dotted keys left out, e.g. ``("name", "run_dir", "seed")`` to
    group runs that differ only in those.
    """
    d = config_to_dict(cfg)
    for key in exclude:
        node, parts = d, key.split(".")
        for p in parts[:-1]:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    blob = json.dumps(_canonical(d), separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]
