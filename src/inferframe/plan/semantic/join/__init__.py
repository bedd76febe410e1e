"""sem_join's planner and its steps, in one package: the node and what its choice gathers (``node``), the estimates
and the choice (``estimate``), the plans it builds and the k sample (``plans``), its counted checks (``guard``) and
its batched asking in rounds (``batches``), over the working columns of ``names``.

``functions.sem_join`` (the builder) checks the arguments and builds the AI steps (``node.Steps``: this
layer builds no AI call); everything that decides what to ask and when is here, as plain data and
functions: a chosen plan pickles with plain pickle and runs the same on Ray and Spark.

The plans and the model calls each makes are tabled in ``estimate``'s docstring.
"""

from inferframe.plan.semantic.join.node import PLANS, JoinSpec, SemJoin, Steps, split_condition

__all__ = ["PLANS", "JoinSpec", "SemJoin", "Steps", "split_condition"]
