"""The real adapter (pynvml_backend + query + collector) against a scripted pynvml, gpustat style.

pynvml's module functions are monkeypatched to return the same struct types the real binding
returns (c_nvmlUtilization_t, c_nvmlMemory_t, nvmlPciInfo_t, process "friendly objects",
c_nvmlProcessUtilizationSample_t) and to raise real NVMLError subclasses. Nothing here loads
libnvidia-ml; one test calls the real nvmlInit where no driver is installed.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pwd
import time

import pynvml
import pytest

from gpuflow.collectors.nvml.backend import ULLONG_MAX
from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.gpm import FAST_IDS, METRIC_IDS
from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend
from gpuflow.collectors.nvml.query import reset_log_once
from gpuflow.core.context import AgentConfig

ME = os.getpid()


def err(code):
    def raise_it(*args):
        raise pynvml.NVMLError(code)
    return raise_it


def proc(pid, used):
    return pynvml.nvmlFriendlyObject({"pid": pid, "usedGpuMemory": used, "gpuInstanceId": 0xFFFFFFFF,
                                      "computeInstanceId": 0xFFFFFFFF})


class ScriptedDriver:
    """Two GPUs as pynvml would present them; attributes steer each answer."""

    def __init__(self, monkeypatch):
        self.calls: dict[str, int] = {}
        self.lost: set[int] = set()
        self.mp = monkeypatch
        self.used = [21474836480, 1 << 30]
        self.compute = {0: [proc(ME, 1310720000)], 1: [proc(ME, 655360000), proc(999_999_999, 1)]}
        self.samples = {0: [(ME, 34, 12)], 1: []}
        monkeypatch.setattr(pynvml, "nvmlLib", None)  # any unscripted call fails as uninitialized
        fns = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: 2,
            "nvmlDeviceGetHandleByIndex": lambda i: ("handle", i),
            "nvmlSystemGetDriverVersion": lambda: b"580.159.04",  # bytes, as older bindings return
            "nvmlSystemGetNVMLVersion": lambda: "13.580.159.04",
            "nvmlSystemGetCudaDriverVersion": lambda: 12040,
            "nvmlDeviceGetUUID": lambda h: f"GPU-0000000{h[1]}-aaaa-bbbb-cccc-dddddddddddd",
            "nvmlDeviceGetName": lambda h: b"NVIDIA H200",
            "nvmlDeviceGetPciInfo": self.pci,
            "nvmlDeviceGetUtilizationRates": self.util,
            "nvmlDeviceGetMemoryInfo": self.memory,
            "nvmlDeviceGetTemperature": self.temperature,
            "nvmlDeviceGetPowerUsage": self.guard(lambda h: 412500),
            "nvmlDeviceGetEnforcedPowerLimit": self.guard(lambda h: 700000),
            "nvmlDeviceGetClockInfo": self.guard(lambda h, t: {pynvml.NVML_CLOCK_SM: 1980,
                                                               pynvml.NVML_CLOCK_MEM: 3201}[t]),
            "nvmlDeviceGetPcieThroughput": self.pcie,
            "nvmlDeviceGetMigMode": self.guard(lambda h: [0, 0]),
            # an older driver: no _v3 process functions, v2 present
            "nvmlDeviceGetComputeRunningProcesses_v3": err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
            "nvmlDeviceGetComputeRunningProcesses_v2": self.guard(lambda h: list(self.compute[h[1]])),
            "nvmlDeviceGetGraphicsRunningProcesses_v3": err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
            "nvmlDeviceGetGraphicsRunningProcesses_v2": self.guard(lambda h: []),
            # and no nvmlDeviceGetProcessesUtilizationInfo (driver < 550)
            "nvmlDeviceGetProcessesUtilizationInfo": err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
            "nvmlDeviceGetProcessUtilization": self.proc_util,
        }
        for name, fn in fns.items():
            self.set(name, fn)

    def set(self, name, fn):
        def counted(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args)
        self.mp.setattr(pynvml, name, counted)

    def guard(self, fn):
        def call(h, *args):
            if h[1] in self.lost:
                raise pynvml.NVMLError_GpuIsLost()
            return fn(h, *args)
        return call

    def pci(self, h):
        info = pynvml.nvmlPciInfo_t()
        info.busId = b"00000000:%02X:00.0" % (0x19 + h[1])
        return info

    def util(self, h):
        if h[1] in self.lost:
            raise pynvml.NVMLError_GpuIsLost()
        u = pynvml.c_nvmlUtilization_t()
        u.gpu, u.memory = (87, 41) if h[1] == 0 else (0, 0)
        return u

    def memory(self, h, version=None):
        if version is None:
            m = pynvml.c_nvmlMemory_t()
        else:  # nvmlDeviceGetMemoryInfo_v2: reserved apart from used
            assert version == pynvml.nvmlMemory_v2
            m = pynvml.c_nvmlMemory_v2_t()
            m.reserved = 497025024
        m.total, m.used = 150754820096, self.used[h[1]]
        m.free = m.total - m.used if m.used != ULLONG_MAX else 0
        return m

    def temperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        if h[1] == 1:
            raise pynvml.NVMLError_NotSupported()
        return 47

    def pcie(self, h, counter):
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            return 1_024_000  # KB/s
        return 0xFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE_uint

    def proc_util(self, h, last_seen):
        now = int(time.time() * 1e6)
        out = []
        for pid, sm, mem in self.samples[h[1]]:
            s = pynvml.c_nvmlProcessUtilizationSample_t()
            s.pid, s.timeStamp, s.smUtil, s.memUtil = pid, now, sm, mem
            if s.timeStamp > last_seen:
                out.append(s)
        if not out:
            raise pynvml.NVMLError_NotFound()
        return out


@pytest.fixture
def driver(monkeypatch):
    reset_log_once()
    return ScriptedDriver(monkeypatch)


def make(**config):
    return NvmlCollector(PynvmlBackend(), AgentConfig(**config), hostname="box")


def tick(c):
    if c.polls == 0:
        c.poll_once()
    c.sample_once()
    return c.poll_once()


def own_identity():
    with open(f"/proc/{ME}/comm") as f:
        name = f.read().strip()
    with open(f"/proc/{ME}/cmdline", "rb") as f:
        argv0 = f.read().split(b"\0")[0].decode()
    return name, pwd.getpwuid(os.getuid()).pw_name, argv0


def test_device_fields_through_the_real_adapter(driver):
    part = tick(make())
    gpu0, gpu1 = part.devices
    assert part.host.driver_version == "580.159.04" and part.host.cuda_driver_version == "12.4"
    assert part.host.nvml_version == "13.580.159.04" and part.host.hostname == "box"
    assert gpu0.uuid == "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd" and gpu0.name == "NVIDIA H200"
    assert gpu0.pci_bus_id == "00000000:19:00.0" and gpu1.pci_bus_id == "00000000:1A:00.0"
    assert (gpu0.utilization_gpu_pct, gpu0.utilization_memory_pct) == (87, 41)
    assert (gpu1.utilization_gpu_pct, gpu1.utilization_memory_pct) == (0, 0)  # measured zeros
    assert gpu0.memory_used_bytes == 21474836480 and gpu0.memory_total_bytes == 150754820096
    assert gpu0.temperature_c == 47 and gpu1.temperature_c is None  # NotSupported on GPU 1
    assert gpu0.power_draw_w == 412.5 and gpu0.power_limit_w == 700.0
    assert (gpu0.clock_sm_mhz, gpu0.clock_mem_mhz) == (1980, 3201)
    assert gpu0.pcie_tx_bytes_per_s == 1_024_000 * 1024
    assert gpu0.pcie_rx_bytes_per_s is None  # UINT_MAX sentinel
    assert gpu0.mig_mode == "disabled"


def test_processes_through_the_real_adapter_and_real_proc(driver):
    part = tick(make())
    name, user, argv0 = own_identity()
    # pid 999999999 does not exist in /proc: it vanished, it is dropped
    assert [p.pid for p in part.processes] == [ME]
    me = part.processes[0]
    assert (me.name, me.user) == (name, user)
    assert me.cmdline == argv0.split()[0]
    a0, a1 = me.attachments
    assert (a0.device_index, a0.kind, a0.memory_used_bytes) == (0, "compute", 1310720000)
    assert (a0.sm_util_pct, a0.mem_util_pct) == (34, 12)
    assert (a1.device_index, a1.memory_used_bytes) == (1, 655360000)
    assert a1.sm_util_pct is None  # NVML had no sample for it on GPU 1


def test_versioned_functions_fall_back_once(driver):
    c = make()
    for _ in range(4):
        tick(c)
    assert driver.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1
    assert driver.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2 * 5
    assert driver.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 1
    assert driver.calls["nvmlDeviceGetProcessUtilization"] >= 4


def test_missing_process_functions_are_logged_once(driver, caplog):
    driver.set("nvmlDeviceGetComputeRunningProcesses_v2", err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))

    def unversioned(h):  # as pynvml's throwOnVersionMismatch wrapper reports a missing symbol
        raise pynvml.NVMLLibraryMismatchError("Unversioned function called ...")
    driver.set("nvmlDeviceGetComputeRunningProcesses", unversioned)
    c = make()
    with caplog.at_level(logging.WARNING, logger="gpuflow.nvml"):
        for _ in range(3):
            part = tick(c)
    assert part.processes == ()
    assert part.devices[0].utilization_gpu_pct == 87  # the rest of the GPU is unaffected
    missing = [r for r in caplog.records if "compute_processes" in r.getMessage()]
    assert len(missing) == 1 and "missing" in missing[0].getMessage()


def test_gpu_is_lost_from_pynvml(driver):
    c = make()
    tick(c)
    driver.lost.add(1)
    part = tick(c)
    assert [d.lost for d in part.devices] == [False, True]
    assert part.devices[1].memory_used_bytes is None and part.devices[1].name == "NVIDIA H200"
    assert part.devices[0].power_draw_w == 412.5
    assert [a.device_index for a in part.processes[0].attachments] == [0]
    assert any("GPU 1" in p.message and "lost" in p.message for p in part.problems)
    driver.lost.clear()  # it came back (e.g. after a reset)
    assert not any(d.lost for d in tick(c).devices)


def test_wddm_sentinels_from_pynvml(driver):
    driver.compute[0] = [proc(ME, None)]  # pynvml itself turns WDDM's ULLONG_MAX into None
    driver.compute[1] = [proc(ME, ULLONG_MAX)]  # an older binding passes the raw sentinel
    driver.used[0] = ULLONG_MAX
    part = tick(make())
    assert [a.memory_used_bytes for a in part.processes[0].attachments] == [None, None]
    assert part.devices[0].memory_used_bytes is None
    assert part.devices[0].memory_total_bytes == 150754820096


def test_stop_calls_nvml_shutdown(driver):
    c = make(interval_s=0.02)
    c.start()
    deadline = time.monotonic() + 5
    # wait for a part with devices: under load the first poll can outlast the 0.02 s interval,
    # and latest() then answers with an empty part that says NVML is not answering
    while not (c.latest() is not None and c.latest().devices) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert c.latest() is not None and c.latest().devices
    c.stop()
    assert driver.calls.get("nvmlShutdown") == 1
    assert driver.calls["nvmlInit"] == 1


def _libnvml_loadable() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_libnvml_loadable(), reason="a real NVIDIA driver is installed here")
def test_real_nvml_init_without_a_driver():
    reset_log_once()
    part = make().poll_once()
    assert part.devices == ()
    assert [p.message for p in part.problems] == [
        "NVIDIA driver not found (libnvidia-ml.so.1 could not be loaded): GPUFlow shows no GPUs"]


class ScriptedGpm:
    """GPM, energy, memory temperature and memory v2 as pynvml presents them: real ctypes sample
    pointers and a real c_nvmlGpmMetricsGet_t filled per metric with its own return code."""

    def __init__(self, driver):
        self.allocated: set[int] = set()
        self.taken: dict[int, int] = {}  # sample address → how many times it was filled
        self.requests = []
        driver.set("nvmlGpmQueryDeviceSupport", self.support)
        driver.set("nvmlGpmSampleAlloc", self.alloc)
        driver.set("nvmlGpmSampleFree", self.free)
        driver.set("nvmlGpmSampleGet", self.get)
        driver.set("nvmlGpmMetricsGet", self.metrics)
        driver.set("nvmlDeviceGetTotalEnergyConsumption", lambda h: 7_200_500)
        driver.set("nvmlDeviceGetFieldValues", self.fields)

    def support(self, h):
        s = pynvml.c_nvmlGpmSupport_t()
        s.isSupportedDevice = 1 if h[1] == 0 else 0  # GPU 1: an older GPU
        return s

    def alloc(self):
        sample = pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t())
        self.allocated.add(ctypes.addressof(sample.contents))
        return sample

    def free(self, sample):
        self.allocated.remove(ctypes.addressof(sample.contents))

    def get(self, h, sample):
        address = ctypes.addressof(sample.contents)
        assert address in self.allocated
        self.taken[address] = self.taken.get(address, 0) + 1
        return sample

    def metrics(self, request):
        assert request.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        assert ctypes.addressof(request.sample1.contents) != ctypes.addressof(request.sample2.contents)
        self.requests.append((ctypes.addressof(request),
                              tuple(request.metrics[i].metricId for i in range(request.numMetrics))))
        answers = {pynvml.NVML_GPM_METRIC_SM_UTIL: (0, 71.0), pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: (0, 62.0),
                   pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: (0, 1000.0),
                   pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: (0, 0.0),
                   pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: (pynvml.NVML_ERROR_INVALID_ARGUMENT, 0.0)}
        for i in range(request.numMetrics):
            m = request.metrics[i]
            m.nvmlReturn, m.value = answers.get(m.metricId, (pynvml.NVML_ERROR_NOT_SUPPORTED, 123.0))
        return request

    def fields(self, h, ids):
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for v, field in zip(out, ids):
            if field == pynvml.NVML_FI_DEV_MEMORY_TEMP:
                v.fieldId, v.valueType, v.nvmlReturn = field, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 0
                v.value.uiVal = 58
            else:
                v.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return out


def test_gpm_energy_memory_and_fields_through_the_real_adapter(driver):
    gpm = ScriptedGpm(driver)
    now = [100.0]
    c = NvmlCollector(PynvmlBackend(), AgentConfig(), hostname="box", monotonic=lambda: now[0])
    for _ in range(3):
        c.sample_once()
        c.poll_once()
        now[0] += 0.5
    gpu0, gpu1 = c.poll_once().devices
    assert gpu0.gpm.sm_util_pct == 71.0 and gpu0.gpm.sm_occupancy_pct == 62.0
    assert gpu0.gpm.pcie_tx_bytes_per_s == 1000.0 * (1 << 20) and gpu0.gpm.pcie_rx_bytes_per_s == 0.0
    assert gpu0.gpm.nvlink_tx_bytes_per_s is None  # InvalidArgument for that one metric
    assert gpu0.gpm.fp64_util_pct is None  # NotSupported: the 123.0 beside it is not a reading
    assert gpu0.links.pcie_rate_source == "gpm" and gpu0.pcie_tx_bytes_per_s == 1000 * (1 << 20)
    assert gpu0.links.pcie_tx_bytes_total == 3 * 0.5 * 1000 * (1 << 20)  # three pairs of 0.5 s
    # one request per id set, reused, not a new 19 KB struct per call: GRAPHICS_UTIL with the
    # first pair, then (within 10 s) the other 12 ids
    (first, all_ids), (second, fast), (third, fast_again) = gpm.requests
    assert all_ids == METRIC_IDS and fast == fast_again == FAST_IDS and second == third != first
    assert gpu1.gpm is None and gpu1.links.pcie_rate_source == "throughput"
    assert gpu0.health.energy_joules == 7200.5 and gpu0.health.memory_temperature_c == 58
    assert gpu0.health.memory_reserved_bytes == 497025024
    assert gpu0.health.ecc_corrected_volatile is None  # not scripted: the driver says Uninitialized
    assert len(gpm.allocated) == 2
    c.stop()
    assert gpm.allocated == set()  # both buffers given back before nvmlShutdown
