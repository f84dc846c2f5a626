"""Fixtures for the decoder fuzz tests: the decoder twins, one at a time or both together.

Like tests/cupti/conftest.py: ``twin`` is parametrized ``c`` / ``py``, the ``c`` case carries the
``c_extension`` mark and is skipped when the compiled decoder is not built (a failure when it is
required: GPUFLOW_REQUIRE_EXTENSIONS=1 or CI=true). ``twins`` is (compiled, Python) for the tests
that require both to agree; those tests are marked ``c_extension`` themselves.

Constraints: the fuzz cases build rings in bytearrays (see ringfuzz.py), so these tests need no
ring memory files and no processes — except test_fuzz_twins.py's fixture, which copies rings out
of the compiled test producer's (gcc).
"""

from __future__ import annotations

import os

import pytest

from gpuflow.collectors.cupti import decoder as decoder_mod


def _compiled_or_skip() -> type:
    if decoder_mod.RingDecoderC is None:
        msg = f"the compiled decoder did not load: {decoder_mod.EXTENSION_IMPORT_ERROR}"
        if os.environ.get("GPUFLOW_REQUIRE_EXTENSIONS") == "1" or os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return decoder_mod.RingDecoderC


@pytest.fixture(scope="session", params=[pytest.param("c", marks=pytest.mark.c_extension, id="c"),
                                         pytest.param("py", id="py")])
def twin(request: pytest.FixtureRequest) -> type:
    """One decoder class."""
    if request.param == "py":
        return decoder_mod.RingDecoderPy
    return _compiled_or_skip()


@pytest.fixture(scope="session")
def twins() -> tuple[type, type]:
    """(compiled, Python)."""
    return _compiled_or_skip(), decoder_mod.RingDecoderPy
