"""Analyses that run whole experiments: ``reproduce`` (the paper's evaluation) and ``sensitivity``."""
