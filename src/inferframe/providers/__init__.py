"""Providers: talking to one kind of model."""
