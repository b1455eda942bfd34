"""The Ray runtime (``r2ac train ... runtime.kind=ray``): actor processes step envs, one learner process
trains, Ray's object store moves trajectories and weights between them.

Processes::

    driver (r2ac train)  --ray.init-->  learner process (Ray actor: LearnerProcess; GPU / "learner" node)
                                          |  owns N rollout workers, runs the whole training loop
                                          v
                         rollout worker 0..N-1 (Ray actors: RolloutWorker; envs + Actor, CPU inference)

* The learner process hosts the loop that the local runtime runs in one process (``TrainingSession``
  from ``r2ac.runtime.common``): validate, batch, update, log, checkpoint. It pulls trajectories as
  ObjectRefs straight from the workers (one hop through the object store; the driver never touches
  them) and runs where the learner should run: ``num_gpus=runtime.learner_gpus`` and the custom
  resource ``learner`` when the cluster has it.
* Back-pressure: each worker has exactly ``runtime.max_trajectories_in_flight`` (K) outstanding
  ``rollout`` calls; the learner submits a new one only when it has consumed one, so at most K
  unconsumed trajectories per worker exist whatever the speed of the learner.
* Weight broadcast: after every applied update the learner makes one ``ray.put`` of its weights and
  passes ``(version, [ref])`` with each new ``rollout`` call. The ref is wrapped in a list so Ray does
  not fetch it eagerly: a worker fetches and loads the weights only when the version changed.
* Faults: workers are restarted by Ray (``max_restarts=-1``) and the rollouts they had in flight are
  counted as lost; an env that raises is recreated inside its worker and the partial trajectory dropped
  and counted; malformed trajectories are rejected with a logged reason; non-finite updates are skipped
  by the Learner and K in a row stop the run with its checkpoint kept; the learner process itself is
  not restarted: its run directory holds the last checkpoint, ``r2ac train --resume RUN_DIR`` goes on.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import warnings
from typing import Dict, List, Optional

import numpy as np
import ray
import torch

from r2ac.agent.actor import Actor
from r2ac.config import Config, ConfigError, config_from_dict, config_to_dict
from r2ac.logger import progress
from r2ac.runtime.common import TrainingSession, build_net, make_env, recreate_envs
from r2ac.runtime.session import (RunAborted, actor_seed, frames_per_step, resolve_device, run_dir_of,
                                  set_fast_math, sigterm_as_interrupt, start_run)

# A worker that delivers nothing for this long after its process failed (Ray keeps restarting it), or
# whose process is reported dead for good, is given up; when none is left the run stops.
WORKER_GIVE_UP_S = 600.0


def to_numpy(x):
    """Tensors -> numpy arrays (nested dicts kept): Ray stores numpy arrays with one copy and reads them
    back without any (measured: a 1.2 MB T-maze trajectory 0.14 ms to fetch instead of 1.3 ms)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    return x


def from_numpy(x, copy: bool = True):
    """numpy arrays -> tensors. Arrays fetched from the object store are read-only views of shared
    memory: ``copy=True`` gives the learner writable tensors of its own; ``copy=False`` is for data that
    is only read (weights, copied into the network by ``load_state_dict``)."""
    if isinstance(x, np.ndarray):
        if copy:
            return torch.from_numpy(np.array(x))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "non-writable NumPy array": only read here
            return torch.from_numpy(x)
    if isinstance(x, dict):
        return {k: from_numpy(v, copy) for k, v in x.items()}
    return x


def node_info() -> Dict[str, str]:
    """The Ray node this process runs on: ``{"node_id": ..., "host": ...}`` (``node_id`` empty outside Ray)."""
    try:
        node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
    except Exception:
        node_id = ""
    return {"node_id": node_id or "", "host": socket.gethostname()}


def _short(e: BaseException, n: int = 300) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:n]}{'...' if len(text) > n else ''}"


class RolloutWorker:
    """One actor process: a vector of ``env.num_envs`` envs and an ``Actor`` (CPU inference)."""

    def __init__(self, cfg_dict: dict, index: int, seed: int):
        cfg = config_from_dict(cfg_dict)
        set_fast_math(cfg.runtime.torch_threads)
        self.cfg, self.index = cfg, index
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        except Exception:  # not inside a Ray actor (tests use the class directly)
            self.restarted = False
        # a restarted process gets fresh env seeds and action samples instead of replaying the first ones
        offset = 1 + os.getpid() % 9973 if self.restarted else 0
        self.failures = 0
        venv = make_env(cfg, index + 100_000 * offset)
        net = build_net(cfg, venv.observation_shape, venv.num_actions, load_stem=False)
        self.actor = Actor(net, venv, cfg.learner.unroll_length, seed=seed + 7_000_003 * offset,
                           ship_features=net.stem_frozen,  # a frozen stem runs here: ship features
                           desync=cfg.env.desync, truncation_values=cfg.learner.truncation_bootstrap)
        self.actor.version = -1  # load the learner's weights before the first trajectory
        self.weight_loads = 0
        self.node = node_info()

    def spec(self) -> Dict:
        venv = self.actor.venv
        return {"observation_shape": tuple(venv.observation_shape), "num_actions": int(venv.num_actions),
                "num_envs": int(venv.num_envs), "pid": os.getpid(), **self.node}

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> Dict[str, str]:
        """The Ray node this worker runs on (``node_info``)."""
        return dict(self.node)

    def rollout(self, version: int, weights: List, restart: bool = False) -> tuple:
        """One trajectory with the weights of ``version`` (``weights``: ``[ObjectRef]``, fetched only if the
        version changed); ``restart``: start over first (new episodes, fresh core state), as the learner asks
        after rejecting a trajectory of this worker. Returns ``(trajectory, info)``, or ``(None, info)``
        after an env failure."""
        if restart:
            self.actor.restart()
        if version != self.actor.version:
            self.actor.set_weights(from_numpy(ray.get(weights[0]), copy=False), version)
            self.weight_loads += 1
        t0 = time.perf_counter()
        try:
            traj = self.actor.rollout()
        except Exception as e:  # the env raised: recreate it here, drop the partial trajectory
            self.failures += 1
            recreate_envs(self.cfg, self.actor, self.index, self.failures)
            return None, {"env_failure": _short(e), "steps": 0, **self.node}
        info = {"steps": self.actor.M * self.actor.B, "rollout_s": time.perf_counter() - t0,
                "weight_loads": self.weight_loads, **self.node}
        return to_numpy(traj), info


class LearnerProcess:
    """The learner side (a Ray actor with two threads: ``run`` trains, ``status``/``stop`` answer the
    driver meanwhile)."""

    def __init__(self, cfg_dict: dict, resume: bool, worker_cls=None, time_limit_s: Optional[float] = None):
        self.cfg = config_from_dict(cfg_dict)
        self.resume = resume
        self.worker_cls = worker_cls or RolloutWorker
        self.time_limit_s = time_limit_s
        self.session: Optional[TrainingSession] = None
        self.stop_requested = False
        self._status: Dict = {"phase": "starting", "step": 0, "updates": 0, "worker_pids": [], "pid": os.getpid()}
        self._lock = threading.Lock()
        self.wait_s = self.fetch_s = 0.0  # learner time blocked waiting for / deserialising trajectories
        self.node = node_info()
        self.actor_nodes: Dict[int, List[str]] = {}  # actor index -> the node ids it ran on, in order
        self.node_hosts: Dict[str, str] = {self.node["node_id"]: self.node["host"]}

    def status(self) -> Dict:
        with self._lock:
            return dict(self._status)

    def stop(self) -> None:
        """Finish the current update, checkpoint and return from ``run`` (Ctrl-C, SIGTERM)."""
        self.stop_requested = True
        if self.session is not None:
            self.session.stop_requested = True

    def _set_status(self, **kw) -> None:
        with self._lock:
            self._status.update(kw)

    def run(self) -> Dict:
        cfg = self.cfg
        n, K = cfg.runtime.num_actors, cfg.runtime.max_trajectories_in_flight
        ckpt = start_run(cfg, self.resume)
        updates0 = int(ckpt["extra"]["learner"]["updates"]) if ckpt is not None else 0
        cfg_dict = config_to_dict(cfg)
        worker = ray.remote(self.worker_cls).options(num_cpus=1, max_restarts=-1, max_task_retries=0)
        handles = [worker.remote(cfg_dict, i, actor_seed(cfg, i, updates0)) for i in range(n)]
        try:
            return self._train(ckpt, handles, K)
        finally:
            for h in handles:
                ray.kill(h)

    def _await_actors(self, handles) -> tuple:
        """Each worker's env spec (worker 0's), pid and node, once Ray has placed and started them all. Ray
        queues an actor until a node has a free CPU for it: the status says how many are up meanwhile (the
        driver reports a long wait), and a stop request ends the wait."""
        spec_ref = handles[0].spec.remote()
        pid_refs = [h.pid.remote() for h in handles]
        node_refs = [h.where.remote() for h in handles]
        self._set_status(phase="placing actors", actors_up=0, num_actors=len(handles))
        while True:
            _, waiting = ray.wait(node_refs, num_returns=len(node_refs), timeout=1.0)
            self._set_status(actors_up=len(node_refs) - len(waiting))
            if not waiting:
                break
            if self.stop_requested:
                raise RunAborted(f"stopped while waiting for Ray to place the actors ({len(node_refs) - len(waiting)}"
                                 f" of {len(node_refs)} up); nothing was trained")
        try:
            return ray.get(spec_ref), ray.get(pid_refs), ray.get(node_refs)
        except ray.exceptions.RayActorError as e:  # e.g. the env cannot be built there
            raise RunAborted(f"the actor processes could not start:\n{e}") from None

    def _train(self, ckpt, handles, K: int) -> Dict:
        cfg, n = self.cfg, len(handles)
        spec, pids, nodes = self._await_actors(handles)
        weights = {"ref": None, "version": None}

        def publish(version: int) -> None:  # one ray.put per update; workers fetch it on their next rollout
            weights["ref"], weights["version"] = ray.put(to_numpy(session.weights())), version

        session = self.session = TrainingSession(cfg, ckpt, spec["observation_shape"], spec["num_actions"],
                                                 publish=publish, time_limit_s=self.time_limit_s,
                                                 progress_bar=False, device=learner_device(cfg))
        session.stop_requested = self.stop_requested
        session.event(f"learner on node {self.node['node_id']} ({self.node['host']})")
        for i, where in enumerate(nodes):
            self._note_node(session, i, where, started=True)
        self._log_placement(session)
        publish(session.learner.updates)
        pending: Dict = {}  # ObjectRef -> worker index
        outage: List[Optional[float]] = [None] * n  # when the current outage of each worker began
        died, alive = [0] * n, [True] * n
        rollout_rates: List[float] = []

        restart_next = [False] * n
        per_actor = [0] * n  # trajectories received from each worker

        def submit(i: int) -> None:
            ref = handles[i].rollout.remote(weights["version"], [weights["ref"]], restart_next[i])
            restart_next[i] = False
            pending[ref] = i

        for _ in range(K):
            for i in range(n):
                submit(i)
        self._set_status(phase="training", worker_pids=pids, total_steps=cfg.total_steps, rollouts_in_flight=0,
                         max_in_flight_per_actor=0)

        def loop() -> None:
            while not session.done():
                t0 = time.perf_counter()
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                if ready:
                    ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                self.wait_s += time.perf_counter() - t0
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        t0 = time.perf_counter()
                        traj, info = ray.get(ref)
                        traj = from_numpy(traj)
                        self.fetch_s += time.perf_counter() - t0
                    except ray.exceptions.RayActorError as e:  # the worker process died: Ray restarts it
                        first = outage[i] is None  # its other rollouts in flight fail too: one failure
                        if first:
                            outage[i], died[i] = time.time(), 0
                        session.rollout_lost(f"actor {i}", _short(e), actor_failed=first)
                        died[i] += isinstance(e, ray.exceptions.ActorDiedError)
                        if e.actor_init_failed or died[i] >= 3 or time.time() - outage[i] > WORKER_GIVE_UP_S:
                            if alive[i]:
                                alive[i] = False
                                session.event(f"giving up actor {i}: {_short(e)}")
                            if not any(alive):
                                raise RunAborted("no actor process is left; last error: " + _short(e))
                        else:
                            submit(i)
                        continue
                    except ray.exceptions.ObjectLostError as e:  # done, but its result lived on a node that died
                        session.rollout_lost(f"actor {i}", _short(e), actor_failed=False)
                        submit(i)  # a restarting actor answers with RayActorError, handled above
                        continue
                    except ray.exceptions.RayTaskError as e:  # raised outside the env guard (e.g. recreating it)
                        submit(i)
                        session.env_failure(f"actor {i}", _short(getattr(e, "cause", None) or e))
                        continue
                    outage[i] = None
                    self._note_node(session, i, info)
                    if traj is None:
                        submit(i)
                        session.env_failure(f"actor {i}", info["env_failure"])
                        continue
                    rollout_rates.append(info["steps"] / max(info["rollout_s"], 1e-9))
                    per_actor[i] += 1
                    if not session.add_trajectory(traj, info["steps"], source=f"actor {i}"):
                        restart_next[i] = True
                    del traj
                    submit(i)  # after the update, so the new rollout carries the newest weights
                session.tick(lambda: self._row_extra(session, pending, alive, rollout_rates))
                self._set_status(step=session.counters["step"], updates=session.learner.updates,
                                 recent_return=session.episodes.recent(),
                                 actor_failures=session.counters["actor_failures"],
                                 env_failures=session.counters["env_failures"],
                                 rejected_trajectories=session.counters["rejected_trajectories"],
                                 rollouts_in_flight=len(pending), max_in_flight_per_actor=_max_per_actor(pending, n),
                                 trajectories_per_actor=list(per_actor))

        try:
            summary = session.run(loop, summary_extra=self._placement)
        finally:
            self._set_status(phase="done", step=session.counters["step"], updates=session.learner.updates)
        return summary

    # ------------------------------------------------------------------ where things ran
    def _note_node(self, session: TrainingSession, i: int, where: Dict, started: bool = False) -> None:
        """Remember the node actor ``i`` reported; a change (Ray restarted it elsewhere) is an event."""
        node_id = where.get("node_id", "")
        if not node_id:
            return
        self.node_hosts[node_id] = where.get("host", "")
        seen = self.actor_nodes.setdefault(i, [])
        if not seen or seen[-1] != node_id:
            seen.append(node_id)
            if not started:
                session.event(f"actor {i} now runs on node {node_id} ({where.get('host', '')})")

    def _log_placement(self, session: TrainingSession) -> None:
        """One event line: which actors run on which node."""
        by_node: Dict[str, List[int]] = {}
        for i, seen in sorted(self.actor_nodes.items()):
            by_node.setdefault(seen[-1], []).append(i)
        parts = [f"node {nid} ({self.node_hosts.get(nid, '')}): actors {_ranges(idx)}" for nid, idx in by_node.items()]
        if parts:
            session.event("actor placement: " + "; ".join(parts))

    def _placement(self) -> Dict:
        """The learner's and the actors' Ray nodes, and the learner's device and the GPUs Ray gave its process,
        for the summary."""
        return {"learner_node": self.node["node_id"],
                "learner_device": str(self.session.device) if self.session is not None else None,
                "learner_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "actor_nodes": {str(i): list(v) for i, v in sorted(self.actor_nodes.items())},
                "node_hosts": dict(self.node_hosts)}

    def _row_extra(self, session: TrainingSession, pending: Dict, alive: List[bool],
                   rollout_rates: List[float]) -> Dict:
        dt = max(time.time() - session.last_log_time, 1e-9)
        extra = {"actor_failures": session.counters["actor_failures"],
                 "lost_rollouts": session.counters["lost_rollouts"],
                 "rollouts_in_flight": len(pending), "actors_alive": sum(alive),
                 "learner_wait_frac": self.wait_s / dt, "learner_fetch_frac": self.fetch_s / dt}
        self.wait_s = self.fetch_s = 0.0
        if rollout_rates:  # agent steps/s of one worker while it rolls out (envs + inference)
            extra["actor_steps_per_s"] = sum(rollout_rates) / len(rollout_rates)
            rollout_rates.clear()
        return extra


def _ranges(indices: List[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    out: List[str] = []
    for i in sorted(indices):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in out)


def _max_per_actor(pending: Dict, n: int) -> int:
    counts = [0] * n
    for i in pending.values():
        counts[i] += 1
    return max(counts) if counts else 0


# ---------------------------------------------------------------------- the driver side


def resolve_address(address: Optional[str], cfg: Config) -> Optional[str]:
    """The cluster to join: ``--address`` first, then ``RAY_ADDRESS``, then ``runtime.address``; ``None``
    means start a local instance. (``auto`` is passed on to Ray, which itself prefers ``RAY_ADDRESS``.)"""
    for a in (address, os.environ.get("RAY_ADDRESS"), cfg.runtime.address):
        if a and a.strip():
            return a.strip()
    return None


def init_kwargs(cfg: Config, address: Optional[str], include_dashboard: Optional[bool] = None) -> Dict:
    """Arguments of ``ray.init``. A local instance is sized to the machine, but with at least one CPU slot
    per actor plus one for the learner (logical slots: processes share the cores). Token authentication
    stays as Ray sets it (on by default for a local instance); the dashboard binds to
    ``runtime.dashboard_host`` (127.0.0.1 unless configured)."""
    if address:
        return {"address": address, "log_to_driver": True}
    return {"num_cpus": max(os.cpu_count() or 1, cfg.runtime.num_actors + 1),
            "include_dashboard": include_dashboard,
            "dashboard_host": cfg.runtime.dashboard_host, "log_to_driver": True}


class ClusterError(ValueError):
    """The Ray cluster named by ``--address`` / ``RAY_ADDRESS`` / ``runtime.address`` cannot be joined (no head
    answers there, or it refuses this driver's token); the message is one line naming the fix."""


_TOKEN_FIX = ("use the cluster's token: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the token> (or the token in "
              "~/.ray/auth_token), as on the cluster's nodes")


# How long `r2ac train --address HOST:PORT` waits for the head's port before giving up with one line.
HEAD_WAIT_S = 10.0


def _head_answers(address: str, wait_s: float) -> Optional[str]:
    """``None`` if ``address`` (``HOST:PORT``) accepts a TCP connection within ``wait_s``, else why not.
    Other forms (``auto``, ``ray://...``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host or "/" in host:
        return None
    host = host.strip("[]")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=min(5.0, wait_s)).close()
            return None
        except OSError as e:
            if time.monotonic() >= deadline:
                return e.strerror or str(e) or type(e).__name__
            time.sleep(1.0)


def connect(address: Optional[str], kwargs: Dict) -> None:
    """``ray.init(**kwargs)``. Joining the cluster at ``address`` fails with one line (:class:`ClusterError`)
    when no head answers there (checked first: Ray itself retries for minutes) or the head refuses the
    token."""
    if address:
        why = _head_answers(address, HEAD_WAIT_S)
        if why is not None:
            raise ClusterError(f"no Ray head answers at {address} ({why}): start the cluster first (`ray start "
                               f"--head`, `docker compose up`, `ray up`) or give its GCS address HOST:6379 with "
                               f"--address, RAY_ADDRESS or runtime.address")
    try:
        ray.init(**kwargs)
    except (ConnectionError, ray.exceptions.AuthenticationError) as e:
        if not address:
            raise
        chain, c = [], e
        while c is not None and len(chain) < 10:
            chain.append(c)
            c = c.__cause__ or c.__context__
        text = " ".join(str(c) for c in chain)
        if any(isinstance(c, ray.exceptions.AuthenticationError) for c in chain) or "InvalidAuthToken" in text:
            if "no authentication token was found" in text:
                why = f"token authentication is on but this driver has no token for the Ray cluster at {address}"
            else:
                why = f"the Ray cluster at {address} refused this driver: its token is missing or wrong"
            raise ClusterError(f"{why}; {_TOKEN_FIX}") from None
        raise ClusterError(f"could not join the Ray cluster at {address}: {' '.join(str(e).split())} (is it the "
                           f"head's GCS address, HOST:6379, and the same Ray version as here ({ray.__version__})?)"
                           ) from None


def learner_options(cfg: Config) -> Dict:
    """Where the learner process goes: ``num_gpus=runtime.learner_gpus`` and the custom resource
    ``learner`` when the cluster offers it (see docker/docker-compose.yml and deploy/cluster.yaml)."""
    opts: Dict = {"num_cpus": 1, "max_concurrency": 2, "max_restarts": 0}
    if cfg.runtime.learner_gpus > 0:
        opts["num_gpus"] = cfg.runtime.learner_gpus
    if ray.cluster_resources().get("learner", 0) >= 1:
        opts["resources"] = {"learner": 1}
    return opts


# A run that is not training this long after its start says what it waits for, and again at this interval.
PLACEMENT_WARN_S = 30.0
PLACEMENT_REPEAT_S = 60.0


def placement_report(cfg: Config, status: Dict, waited_s: float, total: Dict, free: Dict, nodes: int) -> str:
    """One line on a run that Ray has not placed yet: what it waits for (the learner process, or how many of
    its actors are up), what it needs, what the cluster has (``ray.cluster_resources()``,
    ``ray.available_resources()``, alive nodes) and the fix. Ray queues an actor until a node can hold it
    (an autoscaling cluster may add one), so the run waits rather than failing."""
    n, gpus = cfg.runtime.num_actors, cfg.runtime.learner_gpus
    if status.get("phase") == "placing actors":
        what = f"its actors: {status.get('actors_up', 0)} of {status.get('num_actors', n)} are up"
    else:
        what = "its learner process (not placed, or still starting)"
    need = f"1 CPU{f' and {gpus:g} GPU' if gpus > 0 else ''} for the learner and 1 CPU for each of " \
           f"runtime.num_actors={n} actors ({n + 1} CPUs)"
    has = f"{total.get('CPU', 0):g} CPUs in all, {free.get('CPU', 0):g} free"
    if gpus > 0:
        has += f", {total.get('GPU', 0):g} GPUs ({free.get('GPU', 0):g} free)"
    fix = []
    if total.get("CPU", 0) < n + 1:
        fix.append(f"add nodes or CPUs (ray start --num-cpus) or lower runtime.num_actors to "
                   f"{max(int(total.get('CPU', 0)) - 1, 1)}")
    if gpus > 0 and total.get("GPU", 0) < gpus:
        fix.append("add a node with a GPU or set runtime.learner_gpus=0")
    if not fix:
        fix.append("other work holds its CPUs now, or a node is still joining")
    return (f"still waiting after {waited_s:.0f} s for Ray to place {what}. The run needs {need}; the "
            f"cluster has {has} on {nodes} node{'s' if nodes != 1 else ''}. {_sentence('; '.join(fix))} "
            f"(`ray status` shows what is pending).")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _cluster_view() -> tuple:
    """(total resources, free resources, alive nodes) of the connected cluster."""
    return (ray.cluster_resources(), ray.available_resources(),
            sum(1 for nd in ray.nodes() if nd.get("Alive")))


def learner_device(cfg: Config) -> torch.device:
    """The learner process's device. ``device=auto`` takes a GPU only where Ray gave this process one
    (``runtime.learner_gpus`` > 0): Ray leaves every GPU of the node visible to a process that reserved none,
    and a learner there would share a GPU that Ray counts as free."""
    if cfg.device == "auto" and not ray.get_gpu_ids():
        return torch.device("cpu")
    return resolve_device(cfg.device)


def _check(cfg: Config) -> None:
    if cfg.device == "cuda" and cfg.runtime.learner_gpus <= 0:
        raise ConfigError("device=cuda with runtime.kind=ray needs runtime.learner_gpus > 0 (the learner "
                          "process sees only the GPUs Ray gives it)")


class RayRun:
    """A training run on the connected Ray cluster: starts the learner process and its workers.
    ``status()`` while it runs, ``wait()`` for its summary, ``stop()`` to end it early with a checkpoint."""

    def __init__(self, cfg: Config, resume: bool = False, worker_cls=None, time_limit_s: Optional[float] = None):
        _check(cfg)
        # the learner may run in another working directory (or on another node): pass an absolute run_dir
        self.cfg = dataclasses.replace(cfg, run_dir=os.path.abspath(run_dir_of(cfg)))
        self.learner = ray.remote(LearnerProcess).options(**learner_options(self.cfg)).remote(
            config_to_dict(self.cfg), resume, worker_cls, time_limit_s)
        self.result = self.learner.run.remote()

    def status(self, timeout: float = 30.0) -> Dict:
        """The learner's status; ``{"phase": "unresponsive"}`` if it does not answer within ``timeout``
        (e.g. its process is still starting on a loaded machine)."""
        try:
            return ray.get(self.learner.status.remote(), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            return {"phase": "unresponsive", "step": 0, "updates": 0}

    def stop(self) -> None:
        self.learner.stop.remote()

    def wait(self, timeout: Optional[float] = None, show_progress: bool = False) -> Dict:
        show = show_progress and self.cfg.logger.progress_bar
        bar = progress(self.cfg.total_steps, enabled=False)  # made once training reports its first step
        deadline = None if timeout is None else time.time() + timeout
        started, next_report = time.time(), time.time() + PLACEMENT_WARN_S
        try:
            while True:
                ready, _ = ray.wait([self.result], timeout=1.0)
                if ready:
                    break
                if deadline is not None and time.time() > deadline:
                    raise TimeoutError(f"the run did not finish within {timeout} s")
                if show_progress and not bar.enabled and time.time() >= next_report:
                    st = self.status(timeout=5.0)
                    if st.get("phase") != "training":
                        print(f"[train] {placement_report(self.cfg, st, time.time() - started, *_cluster_view())}",
                              flush=True)
                        next_report = time.time() + PLACEMENT_REPEAT_S
                    else:
                        next_report = float("inf")
                if show:
                    try:
                        st = self.status(timeout=5.0)
                        if st.get("phase") == "training":
                            if not bar.enabled:  # from the first step seen (a resumed run starts above 0)
                                bar = progress(self.cfg.total_steps, initial=int(st.get("step", 0)),
                                               interval_s=self.cfg.logger.log_interval_s,
                                               frames_per_step=frames_per_step(self.cfg))
                            bar.update(st.get("step", 0), st.get("recent_return"))
                    except Exception:  # progress is cosmetic
                        pass
            try:
                return ray.get(self.result)
            except ray.exceptions.RayTaskError as e:  # the learner raised: re-raise the original error
                cause = getattr(e, "cause", None)
                if isinstance(cause, BaseException):
                    raise cause from None
                raise
            except ray.exceptions.RayActorError as e:
                run_dir = self.cfg.run_dir
                raise RunAborted(f"the learner process died ({_short(e)}); {run_dir} keeps its last checkpoint: "
                                 f"continue with `r2ac train --resume {run_dir}`") from None
        finally:
            bar.close()

    def close(self) -> None:
        try:
            ray.kill(self.learner)
        except Exception:
            pass


def train(cfg: Config, resume: bool = False, address: Optional[str] = None, *,
          include_dashboard: Optional[bool] = None, worker_cls=None, time_limit_s: Optional[float] = None) -> Dict:
    """Train on Ray: join the cluster at ``address`` / ``RAY_ADDRESS`` / ``runtime.address``, or start a local
    instance (and stop it at the end). If this process is already connected to Ray, that connection is used.
    Returns the run's summary (as ``r2ac.runtime.local.train``)."""
    _check(cfg)
    owns = False
    if not ray.is_initialized():
        address = resolve_address(address, cfg)
        connect(address, init_kwargs(cfg, address, include_dashboard))
        owns = True
    try:
        run = RayRun(cfg, resume, worker_cls=worker_cls, time_limit_s=time_limit_s)
        with sigterm_as_interrupt():  # `ray job stop`, docker stop: stop cleanly with a checkpoint
            try:
                return run.wait(show_progress=True)
            except KeyboardInterrupt:
                print("stopping: the learner finishes its update and writes a checkpoint ...", flush=True)
                run.stop()
                try:
                    run.wait(timeout=120)
                except (KeyboardInterrupt, RunAborted):  # e.g. stopped before its actors were placed
                    pass
                raise
            finally:
                run.close()
    finally:
        if owns:
            ray.shutdown()
