"""Hardening tests (issue 5): bad HTTP input, slow clients and load, bad CLI input."""
