"""The collector driven by the fake backend's scenarios: what each fault looks like in the part."""

from __future__ import annotations

import pynvml
import pytest

from gpuflow.collectors.nvml.fake_scenarios import GIB, OPTIONAL_FIELDS

from .conftest import by_pid

TICK_FIELDS = ("utilization_gpu_pct", "utilization_memory_pct", "memory_used_bytes",
               "memory_total_bytes", "temperature_c", "power_draw_w", "power_limit_w",
               "clock_sm_mhz", "clock_mem_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s",
               "mig_mode")


def test_shared8_eight_gpus_with_identity_and_host(manual):
    m = manual("shared8")
    part = m.tick()
    assert part.source == "nvml"
    assert [d.index for d in part.devices] == list(range(8))
    assert len({d.uuid for d in part.devices}) == 8
    assert all(d.uuid.startswith("GPU-") and d.name == "NVIDIA H200" for d in part.devices)
    assert part.devices[1].pci_bus_id == "00000000:28:00.0"
    assert part.host.hostname == "testhost"
    assert part.host.driver_version == "580.159.04"
    assert part.host.nvml_version == "13.580.159.04"
    assert part.host.cuda_driver_version == "13.0"
    assert part.problems == ()


def test_shared8_units_are_converted(manual):
    m = manual("shared8")
    part = m.tick()
    gpu0 = part.devices[0]
    handle = m.backend.handle_by_index(0)
    # The fake's raw answers are mW and KB/s; the part carries W and bytes/s.
    assert gpu0.power_limit_w == 700.0
    assert gpu0.power_draw_w == pytest.approx(m.backend.power_usage(handle) / 1000)
    assert gpu0.pcie_tx_bytes_per_s % 1024 == 0 and gpu0.pcie_tx_bytes_per_s > 0
    assert gpu0.memory_total_bytes == 150_754_820_096
    assert gpu0.clock_sm_mhz == 1980 and gpu0.clock_mem_mhz == 3201
    assert part.devices[7].mig_mode == "enabled" and gpu0.mig_mode == "disabled"
    # a MIG-mode GPU has no whole-GPU utilization: null, not 0
    assert part.devices[7].utilization_gpu_pct is None
    assert part.devices[7].temperature_c is not None


def test_process_on_four_gpus_is_one_process_with_four_attachments(manual):
    m = manual("shared8")
    part = m.tick()
    procs = by_pid(part)
    train = procs[4242]
    assert [a.device_index for a in train.attachments] == [0, 1, 2, 3]
    assert [a.device_uuid for a in train.attachments] == [d.uuid for d in part.devices[:4]]
    assert all(a.kind == "compute" for a in train.attachments)
    assert all(a.memory_used_bytes >= 30 * GIB for a in train.attachments)
    assert all(a.sm_util_pct is not None and a.sm_util_pct > 0 for a in train.attachments)
    assert [a.device_index for a in procs[5150].attachments] == [4, 5]
    assert [p.pid for p in part.processes] == sorted(procs)
    assert len(part.processes) == 5


def test_attachment_kinds_and_process_identity(manual):
    m = manual("shared8")
    procs = by_pid(m.tick())
    assert procs[6001].attachments[0].kind == "compute+graphics"
    assert procs[2077].attachments[0].kind == "graphics"
    assert (procs[4242].name, procs[4242].user) == ("python", "alice")
    assert (procs[2077].name, procs[2077].user) == ("Xorg", "root")


def test_cmdline_is_redacted_to_the_executable_unless_asked(manual):
    redacted = by_pid(manual("shared8").tick())
    assert redacted[4242].cmdline == "python"
    assert redacted[5150].cmdline == "/usr/bin/python3"
    full = by_pid(manual("shared8", show_cmdline=True).tick())
    assert full[4242].cmdline == "python train.py --api-key=sk-not-a-real-secret --epochs 90"


def test_idle_process_has_no_sm_sample_so_null_not_zero(manual):
    procs = by_pid(manual("shared8").tick())
    notebook = procs[6100].attachments[0]
    assert notebook.memory_used_bytes == 1 * GIB
    assert notebook.sm_util_pct is None and notebook.mem_util_pct is None


def test_values_move_between_polls(manual):
    m = manual("shared8")
    seen = {m.tick().devices[0].utilization_gpu_pct for _ in range(8)}
    assert len(seen) > 2


def test_unchanged_readings_keep_the_same_part_object(manual):
    m = manual("nodriver")
    first = m.tick()
    assert m.collector.poll_once() is first
    assert m.collector.latest() is first


def test_new_readings_make_a_new_part_and_notify(manual):
    m = manual("shared8")
    a = m.tick()
    notified = m.notified
    b = m.tick()
    assert b is not a and m.collector.latest() is b
    assert m.notified == notified + 1


def test_wddm_per_process_memory_is_null(manual):
    m = manual("wddm")
    part = m.tick()
    proc = by_pid(part)[4300]
    assert len(proc.attachments) == 2
    for a in proc.attachments:
        assert a.memory_used_bytes is None  # ULLONG_MAX from NVML, not 18 EiB
        assert a.sm_util_pct is None and a.mem_util_pct is None
    assert all(d.memory_used_bytes > 10 * GIB for d in part.devices)  # device memory still there


def test_notsupported_fields_are_null_and_the_others_present(manual):
    m = manual("notsupported")
    part = m.tick()
    gpu0 = part.devices[0]
    for name in ("utilization_gpu_pct", "utilization_memory_pct", "temperature_c", "power_draw_w",
                 "power_limit_w", "clock_sm_mhz", "clock_mem_mhz", "pcie_tx_bytes_per_s",
                 "pcie_rx_bytes_per_s", "mig_mode"):
        assert getattr(gpu0, name) is None, name
    assert gpu0.memory_total_bytes == 150_754_820_096 and gpu0.memory_used_bytes > 6 * GIB
    assert gpu0.name == "NVIDIA H200" and gpu0.uuid.startswith("GPU-") and not gpu0.lost
    proc = by_pid(part)[4400]
    assert proc.name == "python" and proc.attachments[0].memory_used_bytes >= 6 * GIB
    assert proc.attachments[0].sm_util_pct is None
    assert part.problems == ()  # not supported is normal, not a problem
    # every optional field was asked for, and only the fields answered NotSupported
    assert OPTIONAL_FIELDS <= set(m.backend.calls)


def test_lost_gpu_is_marked_and_the_others_keep_updating(manual):
    m = manual("lost")
    for _ in range(2):  # polls 1-3 (the first tick polls twice); GPU 2 answers three polls
        part = m.tick()
        assert not any(d.lost for d in part.devices)
    before = {d.index: d for d in part.devices}
    readings = []
    for _ in range(4):
        part = m.tick()
        readings.append(part)
        lost = part.devices[2]
        assert lost.lost is True
        assert lost.uuid == before[2].uuid and lost.name == "NVIDIA H200"
        assert lost.pci_bus_id == before[2].pci_bus_id
        assert all(getattr(lost, f) is None for f in TICK_FIELDS)
        assert [d.lost for d in part.devices] == [False, False, True, False]
        assert all(part.devices[i].temperature_c is not None for i in (0, 1, 3))
        errors = [p for p in part.problems if p.severity == "error"]
        assert len(errors) == 1 and "GPU 2" in errors[0].message and "lost" in errors[0].message
        assert before[2].uuid in errors[0].message
        # the job that spanned the four GPUs keeps its attachments on the three that answer
        assert [a.device_index for a in by_pid(part)[4500].attachments] == [0, 1, 3]
    assert len({p.devices[0].utilization_gpu_pct for p in readings} | {
        p.devices[0].power_draw_w for p in readings}) > 2  # still moving


def test_unknown_error_also_marks_the_device_lost(manual):
    m = manual("single")
    m.tick()
    m.backend.utilization = _raiser(pynvml.NVML_ERROR_UNKNOWN)
    part = m.tick()
    assert part.devices[0].lost and part.devices[0].memory_used_bytes is None
    assert part.processes == ()


def test_a_field_that_errors_loses_only_that_field(manual):
    m = manual("single")
    m.tick()
    m.backend.temperature = _raiser(pynvml.NVML_ERROR_TIMEOUT)
    m.backend.power_usage = _raiser(pynvml.NVML_ERROR_NO_PERMISSION)
    gpu = m.tick().devices[0]
    assert gpu.temperature_c is None and gpu.power_draw_w is None
    assert gpu.utilization_gpu_pct is not None and gpu.power_limit_w == 700.0 and not gpu.lost


def test_no_driver_gives_a_problem_not_a_crash(manual):
    m = manual("nodriver")
    part = m.tick()
    assert part.devices == () and part.processes == ()
    assert len(part.problems) == 1
    problem = part.problems[0]
    assert problem.severity == "error" and problem.source == "nvml"
    assert problem.message == ("NVIDIA driver not found (libnvidia-ml.so.1 could not be loaded): "
                               "GPUFlow shows no GPUs")
    assert part.host.hostname == "testhost" and part.host.driver_version is None


def test_init_is_retried_and_recovers(manual):
    m = manual("nodriver")
    clock = [100.0]
    m.collector._monotonic = lambda: clock[0]
    m.collector.poll_once()
    m.collector.poll_once()
    assert m.backend.calls["init"] == 1  # not hammered every tick
    clock[0] += 31
    m.backend.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    part = m.collector.poll_once()
    assert m.backend.calls["init"] == 2
    assert "installed but not loaded" in part.problems[0].message
    clock[0] += 31
    m.backend.init_error = None  # the driver came back; the scenario has no GPUs
    part = m.collector.poll_once()
    assert m.backend.calls["init"] == 3
    assert [p.message for p in part.problems] == ["NVML found no NVIDIA GPUs on this machine"]
    assert part.host.driver_version == "580.159.04"


def test_vanishing_pid_is_dropped_cleanly(manual):
    m = manual("vanishing")
    for _ in range(6):
        part = m.tick()
        assert [p.pid for p in part.processes] == [4600]
        assert [a.device_index for a in part.processes[0].attachments] == [0, 1]
        assert part.problems == ()
    # NVML did list the pid (at first), so it really was dropped, not merely never seen
    assert m.backend.calls["compute_processes"] >= 12


def test_pids_from_another_pid_namespace_are_kept_nameless(manual):
    m = manual("single")
    m.collector._procs = _NoProc()
    first = m.collector.poll_once()
    assert first.processes == ()  # once could be a process that just exited
    second = m.tick()
    assert [(p.pid, p.name, p.user, p.cmdline) for p in second.processes] == [(3131, None, None, None)]
    assert second.processes[0].attachments[0].memory_used_bytes >= 8 * GIB
    assert any("PID namespace" in p.message and p.severity == "info" for p in second.problems)


def test_slow_poll_is_reported_as_a_problem(manual):
    m = manual("hang", interval_s=0.05)
    m.backend.slow = {"utilization": 0.0}
    clock = iter(float(i) for i in range(1000))  # each monotonic() call: 1 s later
    m.collector._monotonic = lambda: next(clock)
    part = m.tick()
    assert any("NVML is slow" in p.message and "0.05 s interval" in p.message for p in part.problems)
    assert part.devices[0].utilization_gpu_pct is not None


def test_device_handles_and_static_facts_are_fetched_once_per_init(manual):
    m = manual("shared8")
    for _ in range(5):
        m.tick()
    assert m.backend.calls["handle_by_index"] == 8
    assert m.backend.calls["uuid"] == 8 and m.backend.calls["name"] == 8
    assert m.backend.calls["driver_version"] == 1
    assert m.backend.calls["utilization"] == 8 * 6


def test_process_utilization_is_skipped_on_gpus_without_processes(manual):
    m = manual("shared8")
    m.tick()
    before = m.backend.calls["process_utilization"]
    m.tick()
    # GPU 7 has no processes; GPU 7 is also MIG (NotSupported) - 7 busy GPUs asked
    assert m.backend.calls["process_utilization"] - before == 7


class _NoProc:
    def read(self, pid):
        return None


def _raiser(code):
    def call(*args):
        raise pynvml.NVMLError(code)
    return call
