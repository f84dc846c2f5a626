"""nvml_query: the one place where NVML's "not available" answers become None."""

from __future__ import annotations

import logging
from typing import NamedTuple

import pynvml
import pytest

from gpuflow.collectors.nvml.backend import UINT_MAX, ULLONG_MAX, MemoryInfo, ProcessInfo
from gpuflow.collectors.nvml.query import DeviceLost, explain_init_error, nvml_query, reset_log_once


@pytest.fixture(autouse=True)
def _fresh_log_memory():
    reset_log_once()


def raising(code):
    def get_thing(*args):
        raise pynvml.NVMLError(code)
    return get_thing


def test_value_passes_through():
    assert nvml_query(lambda h: 42, "h") == 42
    assert nvml_query(lambda: "580.1") == "580.1"
    assert nvml_query(lambda: 0) == 0  # a measured zero stays zero


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION])
def test_not_supported_and_no_permission_are_none(code):
    assert nvml_query(raising(code), "h") is None


@pytest.mark.parametrize("sentinel", [UINT_MAX, ULLONG_MAX])
def test_sentinels_are_none(sentinel):
    assert nvml_query(lambda: sentinel) is None


def test_sentinels_inside_named_tuples_and_lists():
    assert nvml_query(lambda: MemoryInfo(100, ULLONG_MAX)) == MemoryInfo(100, None)
    mem = MemoryInfo(100, 50)
    assert nvml_query(lambda: mem) is mem  # untouched values are not copied
    procs = nvml_query(lambda: [ProcessInfo(1, ULLONG_MAX), ProcessInfo(2, 7), ProcessInfo(3, None)])
    assert procs == [ProcessInfo(1, None), ProcessInfo(2, 7), ProcessInfo(3, None)]
    assert type(procs[0]) is ProcessInfo


def test_bools_and_plain_tuples_are_not_scrubbed():
    class Pair(NamedTuple):
        a: bool
        b: int
    assert nvml_query(lambda: Pair(True, 3)) == Pair(True, 3)
    assert nvml_query(lambda: (UINT_MAX, 1)) == (UINT_MAX, 1)  # only named tuples carry fields


def test_not_found_returns_the_callers_value():
    assert nvml_query(raising(pynvml.NVML_ERROR_NOT_FOUND), "h", 0, not_found=[]) == []
    assert nvml_query(raising(pynvml.NVML_ERROR_NOT_FOUND), "h") is None


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN])
def test_lost_and_unknown_raise_device_lost(code):
    with pytest.raises(DeviceLost) as info:
        nvml_query(raising(code), "h")
    assert isinstance(info.value.error, pynvml.NVMLError)
    assert info.value.error.value == code


def test_function_not_found_is_none_and_logged_once(caplog):
    missing = raising(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    with caplog.at_level(logging.WARNING, logger="gpuflow.nvml"):
        for _ in range(5):
            assert nvml_query(missing, "h") is None
    records = [r for r in caplog.records if "missing" in r.getMessage()]
    assert len(records) == 1
    assert "get_thing" in records[0].getMessage()


def test_other_errors_lose_the_field_and_are_logged_once(caplog):
    timeout = raising(pynvml.NVML_ERROR_TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="gpuflow.nvml"):
        assert nvml_query(timeout, "h") is None
        assert nvml_query(timeout, "h") is None
    assert len([r for r in caplog.records if "Timeout" in r.getMessage()]) == 1


def test_non_nvml_exceptions_propagate():
    def broken():
        raise ZeroDivisionError
    with pytest.raises(ZeroDivisionError):
        nvml_query(broken)


@pytest.mark.parametrize("code, words", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVIDIA driver not found (libnvidia-ml.so.1 could not be loaded)"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "installed but not loaded"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "do not match"),
    (pynvml.NVML_ERROR_INSUFFICIENT_POWER, "NVML could not start"),
])
def test_init_errors_are_explained(code, words):
    message = explain_init_error(pynvml.NVMLError(code))
    assert words in message
    assert message.endswith(": GPUFlow shows no GPUs")


def test_init_error_that_is_not_nvml():
    assert explain_init_error(OSError("boom")) == "NVML could not start (OSError: boom): GPUFlow shows no GPUs"
