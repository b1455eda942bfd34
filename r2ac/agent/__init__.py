"""Agent: stems, heads, actor, learner and the RL losses (V-trace, IMPALA, PPO) as pure functions.

Import submodules directly, e.g. ``from r2ac.agent.vtrace import vtrace_from_logits``.
"""
