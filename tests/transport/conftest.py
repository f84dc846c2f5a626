"""Fixtures of the transport tests; the helpers they share with other folders live in
tests/support (``snapshots``: hand-made snapshots; ``servers``: real gunicorn, a raw SSE client)."""

from __future__ import annotations

import os

import pytest

from servers import FAKE_ENV


@pytest.fixture
def fake_env():
    """The fake collector, for in-process agents (restored afterwards)."""
    saved = {k: os.environ.get(k) for k in FAKE_ENV}
    os.environ.update(FAKE_ENV)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
