"""Logical plans, optimizer rules and explain()."""
