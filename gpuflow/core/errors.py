"""Errors a plugin raises to tell the command line "not like this", with a sentence for the user.

Constraints: plain exceptions, no imports; the CLI prints the message as one line and exits 2.
"""

from __future__ import annotations


class LaunchRefused(Exception):
    """A plugin cannot prepare the program ``gpuflow run`` is about to launch (from the
    ``child_environment`` hook): the message says what is missing and how to get it."""
