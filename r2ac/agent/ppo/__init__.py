"""PPO with stored RTRL traces: the agent of Elelimy, White, Bowling, White, "Real-time recurrent learning
using trace units in reinforcement learning" (NeurIPS 2024; Algorithm 1, App. F and G).

Three pieces: ``net`` (the network, normalisers, ``trace_memory``), ``rollout`` (collecting and storing
rollouts with their per-step core states, the refresh, GAE) and ``learner`` (``PPOLearner``, the loss on
minibatches of stored steps). The training loop is the PPO runtime, ``r2ac.runtime.ppo``.

Network (App. G, Fig. 20): observation -> a 64-unit feed-forward layer (tanh) -> the recurrent core (any
core of ``make_core``) -> two separate heads, actor and critic, each two 64-unit tanh layers and a
linear output. Actions: categorical (discrete) or a diagonal Gaussian with a state-independent learned
log-std (continuous; the env maps [-1, 1] onto its bounds, see ``r2ac.envs.continuous``).

Algorithm 1, as implemented here:

    loop
        roll out L steps in each of B envs with the current policy; store for every step t its network
        input x_t, the reset flag, the action, log pi_old(a_t), V_old(x_t), reward, done, *and the core
        state before step t including its RTRL sensitivities* S(t-1) (the traces; "stale" once the
        weights move)
        compute GAE advantages and value targets (lambda 0.95, gamma 0.99)
        for epoch = 1..k
            shuffle the L*B steps (or the length-C chunks, see below) and split them into m minibatches
            for each minibatch: run the core ONE step from each stored state s(t-1) with its stored
                S(t-1), compute the PPO loss (clipped surrogate, clipped value loss, entropy bonus) and
                call backward: identity 1 (``r2ac.cores.rtrl``) adds dL/ds(t-1) * S(t-1) to the recurrent
                parameters' gradient, so each step gets its untruncated RTRL gradient given the stored
                traces; clip the global gradient norm (0.5); one Adam step
            [optional, refresh_traces] re-run the network over the rollout with the current weights from
                the rollout's stored initial state: new states, traces, values; recompute advantages

Because every step carries its own state and traces, minibatches can mix steps from any time and env.
Cores without RTRL (GRU, LSTM: ``learning="tbptt"``) have no traces: they train on chunks of C
consecutive steps (``sequence_length``), each re-run from its stored (stale) hidden state with the gradient
truncated there, the usual recurrent PPO. With RTRL, C = 1 is the paper's scheme; C > 1 is also exact
(identity 1 at the chunk start plus BPTT inside it).

Memory: the stored traces cost L * B * (sensitivity size) floats; for the RTU with n units and d inputs
that is 2 n d + 4 n floats per step for the linear variant (dc/dW2 = i dc/dW1 is not stored) and
4 n d + 4 n for the nonlinear one (``trace_memory``).
"""

from r2ac.agent.ppo.learner import PPOLearner, evaluate_chunks, gather, ppo_objective
from r2ac.agent.ppo.net import PPONet, RunningMeanStd, action_spec, trace_memory
from r2ac.agent.ppo.rollout import Rollout, RolloutCollector, compute_advantages, rerun_rollout

__all__ = ["PPONet", "RunningMeanStd", "Rollout", "RolloutCollector", "PPOLearner", "evaluate_chunks",
           "ppo_objective", "rerun_rollout", "trace_memory", "action_spec", "compute_advantages", "gather"]
