"""Online learning with recurrent cores: supervised sequence learning (BPTT / truncated BPTT / RTRL in
segments or fully online) and online TD(lambda) prediction with RTRL eligibility (Javed et al. 2023, Algorithm 1).

    from r2ac.online import build_model, SequenceLearner, TDLambda, run_stream
"""

from r2ac.online.budget import flops_per_step, size_for_budget
from r2ac.online.common import CoreUnavailable, require_core
from r2ac.online.supervised import MODES, SequenceLearner, SequenceModel, build_model, fit
from r2ac.online.td import TDLambda, run_stream

__all__ = ["MODES", "SequenceModel", "SequenceLearner", "build_model", "fit", "TDLambda", "run_stream",
           "flops_per_step", "size_for_budget", "CoreUnavailable", "require_core"]
