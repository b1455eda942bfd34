"""r2ac: recurrent RL agents trained with exact real-time recurrent learning (RTRL)."""

from r2ac.cores import CORES, make_core

__all__ = ["CORES", "make_core"]
__version__ = "0.1.0"
