"""Optimizer rules, one per module."""
