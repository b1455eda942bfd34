"""Training entry points above the runtimes: dispatch by runtime kind, and the two-stage pipeline of
Irie et al. 2024, Sec. 4 — pretrain the whole agent with TBPTT, export its vision stem, then train with that stem
loaded and frozen (only the core and what follows it learn, with RTRL or TBPTT).

    r2ac pretrain CONFIG   ->  <run_dir>/ (a TBPTT run) + <run_dir>/stem.safetensors
    r2ac pipeline CONFIG   ->  <run_dir>/pretrain/ (stage 1, incl. stem.safetensors), <run_dir>/main/ (stage 2),
                               <run_dir>/pipeline.json (both summaries)
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

from r2ac.config import Config, ConfigError, apply_overrides, config_hash
from r2ac.runtime.session import run_dir_of

STEM_FILE = "stem.safetensors"


def check_a2c(cfg: Config) -> None:
    """algo=a2c is the synchronous on-policy reference: one local actor whose env batch is one update."""
    errors = []
    if cfg.runtime.kind != "local":
        errors.append("runtime.kind=local (A2C is synchronous)")
    if cfg.runtime.num_actors != 1:
        errors.append("runtime.num_actors=1")
    if cfg.learner.batch_size != cfg.env.num_envs:
        errors.append(f"learner.batch_size={cfg.env.num_envs} (= env.num_envs: each update is the actor's whole "
                      "batch, on-policy)")
    if cfg.learner.epochs != 1:
        errors.append("learner.epochs=1 (more passes per batch are the IMPALA learner's, algo=impala)")
    if errors:
        raise ConfigError("algo=a2c needs " + ", ".join(errors))


def run_training(cfg: Config, resume: bool = False, address: Optional[str] = None,
                 time_limit_s: Optional[float] = None) -> Dict:
    """Train with the algorithm (``algo``) and runtime (``runtime.kind``) the config names. ``time_limit_s``
    ends the run after that many seconds of this call's training (``status: "stopped: time limit"``, with a
    final checkpoint that ``resume`` continues), or at ``total_steps``, whichever comes first."""
    if cfg.algo == "ppo":
        if cfg.runtime.kind == "ray":
            raise ConfigError("algo=ppo runs in one process: use runtime.kind=local (PPO's rollouts and epochs "
                              "are synchronous; the Ray runtime serves IMPALA)")
        from r2ac.runtime.ppo import train_ppo

        return train_ppo(cfg, resume=resume, time_limit_s=time_limit_s)
    if cfg.algo == "a2c":
        check_a2c(cfg)
    if cfg.runtime.kind == "ray":
        from r2ac.runtime.ray_runtime import train as ray_train

        return ray_train(cfg, resume=resume, address=address, time_limit_s=time_limit_s)
    from r2ac.runtime.local import train

    return train(cfg, resume=resume, time_limit_s=time_limit_s)


def export_run_stem(run_dir: str, cfg: Config, summary: Dict) -> str:
    """Export the stem of a run's newest checkpoint to ``<run_dir>/stem.safetensors``."""
    from r2ac.checkpoint import load_latest_checkpoint
    from r2ac.envs import make_config_env
    from r2ac.agent.stem_io import export_stem
    from r2ac.runtime.common import build_net

    ckpt = load_latest_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint to export a stem from")
    venv = make_config_env(cfg.env, 1, cfg.seed)
    net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    venv.close()
    net.load_state_dict(ckpt["model"])
    path = os.path.join(run_dir, STEM_FILE)
    return export_stem(net.stem, path, env_id=cfg.env.id, steps=int(ckpt["counters"].get("step", 0)),
                       score=summary.get("recent_return"), config_hash=config_hash(cfg),
                       learning=cfg.model.learning, unroll_length=cfg.learner.unroll_length)


def pretrain(cfg: Config, resume: bool = False, address: Optional[str] = None,
             time_limit_s: Optional[float] = None) -> Dict:
    """Train the full agent with TBPTT (M = learner.unroll_length) and export its stem (``time_limit_s`` as
    :func:`run_training`)."""
    if cfg.model.stem == "none":
        raise ConfigError("r2ac pretrain: model.stem is 'none' (no stem to pretrain); pick impala, shallow or mlp")
    cfg = apply_overrides(cfg, ["model.learning=tbptt", "stem.freeze=false"])
    summary = run_training(cfg, resume=resume, address=address, time_limit_s=time_limit_s)
    summary["stem_path"] = export_run_stem(run_dir_of(cfg), cfg, summary)
    return summary


def stage_configs(cfg: Config):
    """The two stages of ``r2ac pipeline`` as configs (stage 2's stem.path points into stage 1's run)."""
    p = cfg.pipeline
    if p.pretrain_steps <= 0:
        raise ConfigError("r2ac pipeline needs pipeline.pretrain_steps > 0 (the TBPTT pretraining budget)")
    root = run_dir_of(cfg)
    stage1 = apply_overrides(cfg, [
        f"run_dir={os.path.join(root, 'pretrain')}", f"name={cfg.name}_pretrain", "model.learning=tbptt",
        f"learner.unroll_length={p.pretrain_unroll_length}", f"total_steps={p.pretrain_steps}", "stem.path=",
        "stem.freeze=false", *p.pretrain_overrides])
    stage2 = apply_overrides(cfg, [
        f"run_dir={os.path.join(root, 'main')}", f"name={cfg.name}_main",
        f"stem.path={os.path.join(root, 'pretrain', STEM_FILE)}", "stem.freeze=true"])
    return stage1, stage2


def pipeline(cfg: Config, address: Optional[str] = None) -> Dict:
    """Stage 1 (TBPTT pretraining, stem export), then stage 2 (frozen stem). A finished stage is not run
    again, so a rerun of the same command continues with what is missing."""
    stage1, stage2 = stage_configs(cfg)
    root = run_dir_of(cfg)
    os.makedirs(root, exist_ok=True)
    out: Dict = {}
    for name, stage, fn in (("pretrain", stage1, pretrain), ("main", stage2, run_training)):
        d = run_dir_of(stage)
        done = os.path.join(d, "summary.json")
        if os.path.exists(done) and (name == "main" or os.path.exists(os.path.join(d, STEM_FILE))):
            with open(done) as f:
                prev = json.load(f)
            if prev.get("status") == "finished":
                out[name] = dict(prev, skipped="already finished")
                continue
        from r2ac.checkpoint import latest_checkpoint

        resume = latest_checkpoint(d) is not None
        out[name] = fn(stage, resume=resume, address=address)
    with open(os.path.join(root, "pipeline.json"), "w") as f:
        json.dump(out, f, indent=2)
    return out
