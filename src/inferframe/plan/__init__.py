"""Logical plans, optimizer rules, and plan rewriting: AI stages with their side columns, questions asked of a plan."""
