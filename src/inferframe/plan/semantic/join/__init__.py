"""sem_join's planner and its steps, in one package: the node and what its choice gathers (``node``), the estimates
and the choice (``estimate``), the plans it builds and the k sample (``plans``), its counted checks (``guard``) and
its batched asking in rounds (``batches``), over the working columns of ``names``.

``functions.sem_join`` (the builder) checks the arguments and builds the AI steps (``node.Steps``: this
layer builds no AI call); everything that decides what to ask and when is here, as plain data and
functions: a chosen plan pickles with plain pickle and runs the same on Ray and Spark.

| plan | what runs | model calls |
|---|---|---|
| ``projection`` | each side's property once per row, then a hash join on it | rows(left) + rows(right) |
| ``blocking`` | embeddings, the ``k`` nearest right rows per left row, a yes/no check per candidate | sample + rows(left) * k |
| ``nested`` | every pair, a yes/no check each | rows(left) * rows(right) |
| ``batched`` | every pair, ``pairs_per_request`` right rows per request | rows(left) * ceil(rows(right) / pairs_per_request) |
| ``blocking_batched`` | blocking's ``k`` candidates per left row, asked as in ``batched`` | sample + rows(left) * ceil(k / pairs_per_request) |
"""

from inferframe.plan.semantic.join.node import PLANS, JoinSpec, SemJoin, Steps, split_condition

__all__ = ["PLANS", "JoinSpec", "SemJoin", "Steps", "split_condition"]
