"""Evaluation: test episodes of a trained policy, results appended to ``<run_dir>/eval.csv`` (one row per
evaluation, never overwritten) and logged to TensorBoard / W&B under ``eval/``; optionally a video of the
observations of one episode in ``<run_dir>/videos/``: an animated GIF, and an H.264 MP4 beside it when PyAV
is installed (``pip install r2ac[video]``), which is the one W&B gets (``eval/video``).

Taking "the first n episodes to finish" over a batch of envs over-samples short episodes (an agent that
dies early finishes more episodes in the same time), which biases the mean return. ``EpisodeQuota``
takes each env's first k = ceil(n / num_envs) episodes instead, then interleaves them.

Two entry points: :func:`evaluate_run` (``r2ac eval``, and the periodic and final evaluations of training:
an ``r2ac.api.Policy``, a row of ``eval.csv``, dashboards) and :func:`evaluate_checkpoint` (the experiment
scripts: the checkpoint's network acted by an ``Actor``, ``eval.json`` only).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np

from r2ac.fileio import atomic_write, atomic_write_text

EVAL_COLUMNS = ("step", "env_frames", "wall_time", "checkpoint", "mode", "seed", "sets", "episodes", "mean",
                "std", "min", "max", "mean_length", "set_means")


class EpisodeQuota:
    def __init__(self, num_envs: int, episodes: int):
        if num_envs < 1 or episodes < 1:
            raise ValueError(f"need num_envs >= 1 and episodes >= 1, got {num_envs}, {episodes}")
        self.episodes = episodes
        self.k = math.ceil(episodes / num_envs)
        self.per_env: List[List[float]] = [[] for _ in range(num_envs)]
        self.lengths: List[List[int]] = [[] for _ in range(num_envs)]
        self.infos: List[List[Dict[str, float]]] = [[] for _ in range(num_envs)]

    def add(self, done, episode_return, episode_length=None, info: Optional[Dict[str, Any]] = None) -> None:
        """One vector step: ``done`` [B] bool, ``episode_return`` [B] (the finished episodes' returns);
        ``info``: the env's step info, whose episode-end statistics (:func:`episode_end_stats`) are kept
        with each taken episode."""
        stats = episode_end_stats(info, len(self.per_env)) if info is not None else {}
        for e in np.flatnonzero(np.asarray(done)):
            if len(self.per_env[e]) < self.k:
                self.per_env[e].append(float(np.asarray(episode_return)[e]))
                self.lengths[e].append(int(np.asarray(episode_length)[e]) if episode_length is not None else 0)
                self.infos[e].append({key: float(v[e]) for key, v in stats.items()})

    def full(self) -> bool:
        return all(len(r) >= self.k for r in self.per_env)

    def returns(self) -> List[float]:
        """``episodes`` returns: round i takes every env's i-th episode."""
        out = [r[i] for i in range(self.k) for r in self.per_env]
        return out[:self.episodes]

    def episode_lengths(self) -> List[int]:
        out = [n[i] for i in range(self.k) for n in self.lengths]
        return out[:self.episodes]

    def episode_infos(self) -> List[Dict[str, float]]:
        """The episode-end statistics of the taken episodes, in the order of :meth:`returns`."""
        out = [d[i] for i in range(self.k) for d in self.infos]
        return out[:self.episodes]


# Per-step keys of every vector env's info, not statistics of the task.
_STANDARD_INFO_KEYS = frozenset({"episode_return", "episode_length", "truncated", "env_failure"})


def episode_end_stats(info: Dict[str, Any], num_envs: int) -> Dict[str, np.ndarray]:
    """The task's own episode-end numbers in a vector env's step ``info``: every float array of shape
    ``[num_envs]`` other than the return, length and truncation flags (e.g. the watermaze's
    ``goals_found``, ``steps_to_first_goal`` and ``mean_steps_to_goal_after_first``, the recall tasks'
    ``success``). NaN where an env's episode did not end, or where the number is undefined."""
    out = {}
    for key, value in info.items():
        if key in _STANDARD_INFO_KEYS or not isinstance(value, np.ndarray):
            continue
        if value.shape == (num_envs,) and np.issubdtype(value.dtype, np.floating):
            out[key] = value
    return out


def summarize_episode_infos(infos: List[Dict[str, float]]) -> Dict[str, Dict[str, float]]:
    """Per statistic: ``mean`` over the episodes where it is defined (not NaN) and their ``count``."""
    keys = sorted({k for d in infos for k in d})
    out = {}
    for key in keys:
        vals = np.array([d.get(key, np.nan) for d in infos], dtype=np.float64)
        ok = ~np.isnan(vals)
        out[key] = {"mean": float(vals[ok].mean()) if ok.any() else float("nan"), "count": int(ok.sum())}
    return out


def _frame(obs: np.ndarray, stacked: int = 1) -> Optional[np.ndarray]:
    """An RGB (H, W, 3) uint8 picture of one observation, or None for non-image observations. ``stacked``:
    the observation is that many frames on its channels (``env.frame_stack``); the picture is the newest."""
    o = np.asarray(obs)
    if o.dtype != np.uint8 or o.ndim != 3:
        return None
    if stacked > 1:
        o = o[-(o.shape[0] // stacked):]
    c = o.shape[0]
    if c == 3:
        img = o.transpose(1, 2, 0)
    elif c in (1, 4) or c > 4:  # grey, or a frame stack: its newest frame
        img = np.repeat(o[-1][:, :, None], 3, axis=2)
    else:
        return None
    scale = max(1, 96 // max(img.shape[0], 1))  # small frames (8x8 T-maze) scaled up to be visible
    return np.kron(img, np.ones((scale, scale, 1), dtype=np.uint8)) if scale > 1 else img


def write_gif(frames: List[np.ndarray], path: str, fps: int = 15) -> str:
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    atomic_write(path, lambda fh: images[0].save(fh, format="GIF", save_all=True, append_images=images[1:],
                                                 duration=max(1, int(1000 / fps)), loop=0))
    return path


def write_mp4(frames: List[np.ndarray], path: str, fps: int = 15) -> str:
    """An MP4 of RGB ``frames`` (H.264, yuv420p: what browsers and W&B play; MPEG-4 part 2 where the FFmpeg
    libraries have no H.264 encoder) through PyAV. Odd sizes are padded by one black row/column (yuv420p
    needs even ones). Raises ImportError without PyAV."""
    import av

    h, w = frames[0].shape[:2]
    H, W = h + h % 2, w + w % 2
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"

    def write(fh) -> None:
        with av.open(fh, mode="w", format="mp4") as container:
            stream = container.add_stream(codec, rate=int(fps))
            stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
            for f in frames:
                img = np.zeros((H, W, 3), dtype=np.uint8)
                img[:h, :w] = f
                for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():  # flush the encoder
                container.mux(packet)

    atomic_write(path, write)
    return path


def write_videos(frames: List[np.ndarray], path: str, fps: int = 15) -> List[str]:
    """The episode as ``<stem>.gif`` and, with PyAV installed, ``<stem>.mp4`` (``path``'s extension is
    replaced). Returns the files written, the MP4 first when there is one. A failed MP4 is a warning."""
    import warnings

    stem = os.path.splitext(path)[0]
    written = [write_gif(frames, stem + ".gif", fps)]
    try:
        written.insert(0, write_mp4(frames, stem + ".mp4", fps))
    except ImportError:
        pass  # no PyAV: the GIF alone
    except Exception as e:  # a video must never lose an evaluation
        warnings.warn(f"MP4 video not written ({type(e).__name__}: {e}); the GIF is in {written[0]}",
                      RuntimeWarning, stacklevel=2)
    return written


def wandb_video(result: Dict[str, Any]) -> Dict[str, Any]:
    """``{"eval/video": wandb.Video(...)}`` of an evaluation's video (the MP4 where there is one), or ``{}``."""
    if not result.get("video"):
        return {}
    import wandb

    return {"eval/video": wandb.Video(result["video"])}  # format from the file's extension


def play(policy, venv, episodes: int, *, greedy: bool = False, record: Optional[str] = None,
         max_steps: Optional[int] = None) -> Dict[str, Any]:
    """``episodes`` test episodes of ``policy`` (an :class:`r2ac.api.Policy`) on ``venv`` (each env
    contributing its first episodes, see ``EpisodeQuota``). ``record``: write env 0's first episode there
    (image observations only) as a GIF and, with PyAV, an MP4 (:func:`write_videos`). Returns returns, lengths,
    ``video`` (the MP4 where written, else the GIF, or None) and ``videos`` (every file written)."""
    quota = EpisodeQuota(venv.num_envs, episodes)
    obs = venv.reset()
    state = policy.initial_state(venv.num_envs)
    reward = done = None
    frames: Optional[List[np.ndarray]] = [] if record else None
    videos: List[str] = []
    steps = 0
    while not quota.full():
        if frames is not None:
            f = _frame(obs[0], getattr(venv, "stacked_frames", 1))
            if f is None:
                frames = None
                record = None
            else:
                frames.append(f)
        action, state = policy.act(obs, state, reward=reward, done=done, greedy=greedy)
        obs, reward, done, info = venv.step(action)
        quota.add(done, info["episode_return"], info.get("episode_length"), info)
        if frames is not None and done[0]:
            videos = write_videos(frames, record)
            frames = None
        steps += 1
        if max_steps is not None and steps >= max_steps:
            raise RuntimeError(f"evaluation did not finish {episodes} episodes within {max_steps} steps")
    return {"returns": quota.returns(), "lengths": quota.episode_lengths(), "infos": quota.episode_infos(),
            "video": videos[0] if videos else None, "videos": videos}


def evaluate_policy(policy, cfg, *, sets: int, episodes: int, seed: int, greedy: bool,
                    num_envs: Optional[int] = None, video: Optional[str] = None) -> Dict[str, Any]:
    """k = ``sets`` sets of n = ``episodes`` episodes (as in the paper: mean of the set means, std over
    sets) on fresh envs of ``cfg`` seeded with ``seed``."""
    from r2ac.envs import make_config_env

    if sets < 1 or episodes < 1:
        raise ValueError(f"need at least one set of one episode, got sets={sets}, episodes={episodes}")
    n_envs = num_envs or cfg.eval.num_envs or cfg.env.num_envs
    venv = make_config_env(cfg.env, n_envs, seed)
    try:
        out = play(policy, venv, sets * episodes, greedy=greedy, record=video)
    finally:
        venv.close()
    returns = out["returns"]
    set_means = [float(np.mean(returns[i * episodes:(i + 1) * episodes])) for i in range(sets)]
    return {"sets": sets, "episodes": episodes, "seed": seed, "mode": "greedy" if greedy else "sampled",
            "mean": float(np.mean(set_means)), "std": float(np.std(set_means)),
            "min": float(np.min(returns)), "max": float(np.max(returns)),
            "mean_length": float(np.mean(out["lengths"])) if out["lengths"] else float("nan"),
            "set_means": set_means, "episode_returns": [float(r) for r in returns],
            "episode_info": summarize_episode_infos(out["infos"]), "video": out["video"], "videos": out["videos"]}


def append_eval_csv(run_dir: str, result: Dict[str, Any]) -> str:
    """Append one row to ``<run_dir>/eval.csv`` (header written with the first row)."""
    path = os.path.join(run_dir, "eval.csv")
    row = dict(result, wall_time=f"{time.time():.3f}", set_means=json.dumps([round(m, 6) for m in
                                                                                 result["set_means"]]))
    buf = io.StringIO()
    w = csv.writer(buf)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        w.writerow(EVAL_COLUMNS)
    w.writerow([row.get(c, "") for c in EVAL_COLUMNS])
    os.makedirs(run_dir, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write(buf.getvalue())
    return path


def read_eval_csv(path: str) -> List[Dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def eval_metrics(result: Dict[str, Any]) -> Dict[str, float]:
    """The numbers an evaluation logs (``eval/`` namespace), the task's episode-end statistics as
    ``eval/<name>`` (their means)."""
    out = {"eval/return_mean": result["mean"], "eval/return_std": result["std"],
           "eval/return_min": result["min"], "eval/return_max": result["max"],
           "eval/episode_length": result["mean_length"], "eval/episodes": result["sets"] * result["episodes"]}
    for key, stat in (result.get("episode_info") or {}).items():
        if stat["count"] > 0:
            out.setdefault(f"eval/{key}", stat["mean"])
    return out


def log_eval_to_backends(run_dir: str, cfg, result: Dict[str, Any]) -> None:
    """``r2ac eval`` after training: add the evaluation to the run's TensorBoard events (a writer of its
    own in ``tensorboard/``) and, with ``logger.wandb``, to its W&B run (resumed by its stored id)."""
    step = int(result["step"])
    metrics = eval_metrics(result)
    if cfg.logger.tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter

            with SummaryWriter(log_dir=os.path.join(run_dir, "tensorboard"), filename_suffix=".eval") as tb:
                for k, v in metrics.items():
                    tb.add_scalar(k, v, global_step=step)
        except Exception as e:  # logging must not lose an evaluation that is already in eval.csv
            print(f"warning: TensorBoard logging of the evaluation failed: {e}")
    if cfg.logger.wandb:
        try:
            from r2ac.logger import open_wandb_run

            run = open_wandb_run(run_dir, cfg.logger, None, cfg.name, resume=True)
            if run is not None:
                payload = {**metrics, **wandb_video(result), "agent_step": step,
                           "env_frames": int(result.get("env_frames", step))}
                run.log(payload)
                run.finish()
        except Exception as e:
            print(f"warning: W&B logging of the evaluation failed: {e}")


def evaluate_run(path: str, overrides: List[str] = (), *, checkpoint: Optional[int] = None,
                 sets: Optional[int] = None, episodes: Optional[int] = None, seed: Optional[int] = None,
                 greedy: Optional[bool] = None, num_envs: Optional[int] = None, video: Optional[bool] = None,
                 log: bool = True) -> Dict[str, Any]:
    """``r2ac eval``: evaluate a run directory's newest checkpoint (or the one at step ``checkpoint``) or a
    checkpoint file; ``overrides`` (``key=value``) change the env or eval settings for this evaluation.
    Appends the result to ``eval.csv``, writes ``eval.json`` (the latest) and logs to TB/W&B."""
    from r2ac.api import _config_of, load_checkpoint_for, policy_from_checkpoint, run_dir_of_path
    from r2ac.config import apply_overrides
    from r2ac.runtime import frames_per_step, set_fast_math

    ckpt = load_checkpoint_for(path, checkpoint)
    cfg = _config_of(ckpt, ckpt.get("path", path))
    if overrides:
        cfg = apply_overrides(cfg, list(overrides))
    set_fast_math(cfg.runtime.torch_threads)
    greedy = cfg.eval.greedy if greedy is None else greedy
    seed = 12345 if seed is None else int(seed)
    run_dir = run_dir_of_path(path)
    policy = policy_from_checkpoint(ckpt, cfg, greedy=greedy, seed=seed)
    step = policy.step
    vid = None
    if cfg.eval.video if video is None else video:
        vid = os.path.join(run_dir, "videos", f"eval_step{step}_{'greedy' if greedy else 'sampled'}.gif")
    result = evaluate_policy(policy, cfg, sets=cfg.eval.sets if sets is None else sets,
                             episodes=cfg.eval.episodes if episodes is None else episodes, seed=seed,
                             greedy=greedy, num_envs=num_envs, video=vid)
    result.update(step=step, env_frames=step * frames_per_step(cfg), checkpoint=str(ckpt.get("path", path)))
    append_eval_csv(run_dir, result)
    atomic_write_text(os.path.join(run_dir, "eval.json"), json.dumps(result, indent=2))
    if log:
        log_eval_to_backends(run_dir, cfg, result)
    return result


# ------------------------------------------------------------------ checkpoints acted by the Actor


def load_for_eval(path: str):
    """A run directory or a checkpoint file -> (config, checkpoint)."""
    from r2ac.checkpoint import load_checkpoint, load_latest_checkpoint
    from r2ac.config import config_from_dict, upgrade_resolved

    if os.path.isdir(path):
        ckpt = load_latest_checkpoint(path)
        if ckpt is None:
            raise FileNotFoundError(f"{path} has no checkpoints (expected {path}/checkpoints/ckpt_*.pt)")
    elif os.path.isfile(path):
        ckpt = load_checkpoint(path)
    else:
        raise FileNotFoundError(f"{path}: no such run directory or checkpoint file")
    return config_from_dict(upgrade_resolved(ckpt["config"])), ckpt


def play_episodes(net, venv, episodes: int, seed: int) -> np.ndarray:
    """Returns of ``episodes`` episodes of the stochastic policy ``net`` (an ``AgentNet``) on ``venv`` (closed
    afterwards), acted by an ``Actor`` seeded with ``seed``, each env contributing its first episodes
    (``EpisodeQuota``: no short-episode bias)."""
    import torch

    from r2ac.agent.actor import Actor

    actor = Actor(net, venv, 1, seed=seed)
    quota = EpisodeQuota(venv.num_envs, episodes)
    try:
        while not quota.full():
            r = actor.rollout()["episode_return"][1:]
            quota.add((~torch.isnan(r[0])).numpy(), r[0].numpy())
    finally:
        actor.close()
    return quota.returns()


def evaluate_checkpoint(path: str, sets: Optional[int] = None, episodes: Optional[int] = None, seed: int = 12345,
                        num_envs: Optional[int] = None) -> Dict:
    """k sets of n test episodes with the trained (stochastic) policy of a run directory's newest checkpoint
    or a checkpoint file, acted by an ``Actor`` (the protocol of the experiment scripts): returns the mean of
    the set means and the std over sets, and writes ``eval.json`` next to the run (no ``eval.csv`` row, no
    logging: that is :func:`evaluate_run`)."""
    import torch

    from r2ac.config import ConfigError
    from r2ac.envs import make_config_env
    from r2ac.runtime import build_net, set_fast_math

    cfg, ckpt = load_for_eval(path)
    if cfg.algo != "impala":
        raise ConfigError(f"r2ac eval evaluates IMPALA runs; {path} is an algo={cfg.algo} run (its metrics.csv "
                          "holds the training returns)")
    set_fast_math(cfg.runtime.torch_threads)
    sets = cfg.eval.sets if sets is None else sets
    episodes = cfg.eval.episodes if episodes is None else episodes
    if sets < 1 or episodes < 1:
        raise ValueError(f"need at least one set of one episode, got sets={sets}, episodes={episodes}")
    venv = make_config_env(cfg.env, num_envs or cfg.env.num_envs, seed)
    net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
    net.load_state_dict(ckpt["model"])
    with torch.no_grad():
        returns = play_episodes(net, venv, sets * episodes, seed)
    set_means = [float(np.mean(returns[i * episodes:(i + 1) * episodes])) for i in range(sets)]
    result = {"checkpoint": ckpt.get("path", path), "step": int(ckpt["counters"].get("step", 0)), "sets": sets,
              "episodes": episodes, "mean": float(np.mean(set_means)), "std": float(np.std(set_means)),
              "set_means": set_means, "episode_returns": [float(r) for r in returns]}
    out_dir = path if os.path.isdir(path) else os.path.dirname(os.path.dirname(os.path.abspath(path)))
    with open(os.path.join(out_dir, "eval.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result
