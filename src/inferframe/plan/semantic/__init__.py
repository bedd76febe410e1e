"""Semantic operators as logical plan nodes: their physical plans chosen by rules here, when the job runs.

``join`` holds sem_join's node and planner (estimates, plan choice, builders, the k sample);
``resolve`` turns a plan's semantic and whole-table nodes into ordinary ones at run time, through a
``Runtime`` the dataframe layer passes in (this layer runs no job itself).
"""
