"""Semantic operators as logical plan nodes: their physical plans chosen by rules here, when the job runs.

Every semantic operator has one shape: a thin builder where the user calls it (``functions``: it checks
the arguments and builds the AI steps, as expressions; this layer builds no AI call), and its planner
and its steps here. ``join`` (a package: sem_join's node, estimates, plans, counted checks and batched
rounds), ``topk`` (sem_topk: quick or rerank), ``agg`` (sem_agg: the fold) and ``cluster`` (sem_dedup,
sem_cluster_by: blocking and the evidence merge); ``rounds`` is what they share: the one runner of a
round of questions (one job) and the one counter of calls and failures, with its one warning.
``resolve`` turns a plan's semantic and whole-table nodes into ordinary ones at run time, through a
``Runtime`` the dataframe layer passes in (this layer runs no job itself). sem_rank needs no planner:
it is a projection (one score per row) and a sort.
"""
