"""r2ac: recurrent RL agents trained with exact real-time recurrent learning (RTRL)."""

from r2ac.cores import CORES, make_core

__all__ = ["CORES", "make_core", "load"]
__version__ = "0.1.0"


def load(path, checkpoint=None, *, greedy=False, seed=0, device="cpu"):
    """The trained policy of a run directory or checkpoint file: ``policy.act(obs, state)``
    (see :mod:`r2ac.api`)."""
    from r2ac.api import load as _load

    return _load(path, checkpoint, greedy=greedy, seed=seed, device=device)
