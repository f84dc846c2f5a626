"""Core: the snapshot contract, hook specifications, plugin manager, merge and agent loop."""
