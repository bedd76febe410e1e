"""Semantic operators as logical plan nodes: their physical plans chosen by rules here, when the job runs.

``join`` holds sem_join's node and planner (estimates, plan choice), ``join_plans`` the plans it builds and
the k sample; ``topk``
(sem_topk: quick or rerank), ``agg`` (sem_agg: the fold) and ``cluster`` (sem_dedup, sem_cluster_by:
blocking and the evidence merge) are the planners a ``WholeTable`` node holds, ``rounds`` what they
share (a round of questions as one job, their counts and warnings); ``resolve`` turns a plan's
semantic and whole-table nodes into ordinary ones at run time, through a ``Runtime`` the dataframe
layer passes in (this layer runs no job itself). ``functions`` builds their AI steps (this layer
builds no AI call). sem_rank needs no planner: it is a projection (one score per row) and a sort.
"""
