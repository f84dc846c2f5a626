"""GPM through the collector and the fake backend: a rolling pair of samples at least 100 ms apart,
per MIG instance where MIG is on, every metric NVML does not offer null (never 0), each metric's
own return code honoured, PCIe byte totals summed from contiguous pairs, the buffers freed, and
GRAPHICS_UTIL evaluated at most once every 10 s of the collector's clock (the fake records which
ids it was asked when), its latest value held in between."""

from __future__ import annotations

import dataclasses

import pynvml
import pytest

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.collectors.nvml.fake_scenarios import SCENARIOS
from gpuflow.collectors.nvml.gpm import FAST_IDS, GRAPHICS_EVERY_S, METRIC_IDS, MIN_GAP_S
from gpuflow.collectors.nvml.query import reset_log_once
from gpuflow.core.context import AgentConfig

GRAPHICS_UTIL = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
GPM_PCTS = ("graphics_util_pct", "sm_util_pct", "sm_occupancy_pct", "integer_util_pct",
            "tensor_util_pct", "dram_bw_util_pct", "fp64_util_pct", "fp32_util_pct", "fp16_util_pct")


class Stepped:
    """A collector over a fake scenario whose clocks the test moves: ``step_s`` per tick."""

    def __init__(self, scenario, step_s: float = 1.0, seed: int = 3) -> None:
        reset_log_once()
        self.now = 5_000.0
        self.step_s = step_s
        self.backend = FakeBackend(scenario, seed=seed, clock=lambda: self.now)
        self.backend.slow = {}
        self.collector = NvmlCollector(self.backend, AgentConfig(interval_s=1.0),
                                       proc_reader=self.backend.proc_reader, clock=lambda: self.now,
                                       monotonic=lambda: self.now, hostname="h")

    def tick(self):
        c = self.collector
        if c.polls == 0:
            c.poll_once()
        c.sample_once()
        self.now += self.step_s
        return c.poll_once()


def scenario(base: str, **changes):
    return dataclasses.replace(SCENARIOS[base], **changes)


def test_no_pair_yet_is_null_then_every_h200_has_gpm_means():
    s = Stepped("shared8")
    first = s.collector.poll_once()  # init and the first sample of each pair: nothing to say yet
    assert all(d.gpm is None for d in first.devices)
    part = s.tick()
    for d in part.devices[:7]:
        assert d.gpm is not None and d.gpm.gpu_instance_id is None
        assert d.gpm.interval_s == pytest.approx(1.0)
        assert all(getattr(d.gpm, f) is not None for f in GPM_PCTS)
        assert d.gpm.pcie_tx_bytes_per_s is not None and d.gpm.nvlink_rx_bytes_per_s is not None
    busy, idle = part.devices[0], part.devices[6]
    assert busy.gpm.sm_util_pct > 0 and 0 < busy.gpm.sm_occupancy_pct < busy.gpm.sm_util_pct


def test_mig_gpu_has_means_per_gpu_instance_and_none_for_the_whole_gpu():
    s = Stepped("shared8")
    for _ in range(3):
        part = s.tick()
    gpu7 = part.devices[7]
    assert gpu7.mig_mode == "enabled" and gpu7.gpm is None  # NotSupported for the whole GPU
    assert [g.gpu_instance_id for g in gpu7.gpm_instances] == [1, 2, 5]
    one, two, five = gpu7.gpm_instances
    assert one.sm_util_pct == pytest.approx(57.0) and five.sm_util_pct == pytest.approx(23.75)
    assert two.sm_util_pct == 0.0  # a measured zero: the instance is idle
    assert one.pcie_tx_bytes_per_s is None and one.nvlink_tx_bytes_per_s is None  # not per instance
    # no exact PCIe source for the whole GPU: the sampler's throughput snapshot stays
    assert gpu7.links.pcie_rate_source == "throughput" and gpu7.links.pcie_tx_bytes_total is None


def test_pairs_are_at_least_100_ms_apart_and_reused_in_between():
    s = Stepped("single", step_s=0.04)
    s.tick()
    samples = s.backend.calls.get("gpm_sample", 0)
    parts = [s.tick() for _ in range(6)]  # at 80 ms ... 280 ms after the first sample
    taken = s.backend.calls["gpm_sample"] - samples
    assert taken == 2  # at 120 and 240 ms
    gpm = [p.devices[0].gpm for p in parts]
    assert gpm[0] is None  # 80 ms: no pair yet
    assert gpm[1] is gpm[2] is gpm[3] and gpm[4] is gpm[5] and gpm[4] is not gpm[1]
    assert gpm[1].interval_s == pytest.approx(0.12) and gpm[1].interval_s >= MIN_GAP_S


def test_a_metric_the_gpu_does_not_offer_is_null_never_zero():
    s = Stepped(scenario("single", gpm_not_offered=frozenset({11, 13})))
    s.tick()
    gpm = s.tick().devices[0].gpm
    assert gpm.fp64_util_pct is None and gpm.fp16_util_pct is None
    assert gpm.fp32_util_pct is not None and gpm.sm_util_pct is not None


def test_each_metrics_return_code_is_honoured(monkeypatch):
    s = Stepped("single")
    s.tick()
    answers = s.backend.gpm_metrics

    def odd_codes(first, second, ids):
        out = answers(first, second, ids)
        # InvalidArgument (an id this driver does not know), NoData, a Timeout: each null alone
        codes = {2: pynvml.NVML_ERROR_INVALID_ARGUMENT, 3: 21, 10: pynvml.NVML_ERROR_TIMEOUT}
        return [type(a)(codes.get(m, a.code), a.value) for m, a in zip(ids, out)]

    monkeypatch.setattr(s.backend, "gpm_metrics", odd_codes)
    gpm = s.tick().devices[0].gpm
    assert (gpm.sm_util_pct, gpm.sm_occupancy_pct, gpm.dram_bw_util_pct) == (None, None, None)
    assert gpm.tensor_util_pct is not None and gpm.graphics_util_pct is not None


def test_a_lost_code_on_one_metric_marks_that_gpu_lost_and_the_tick_goes_on(monkeypatch):
    s = Stepped("shared8")
    s.tick()
    answers = s.backend.gpm_metrics

    def lost_on_gpu1(first, second, ids):
        out = answers(first, second, ids)
        if second.index == 1:
            out[0] = out[0]._replace(code=pynvml.NVML_ERROR_GPU_IS_LOST)
        return out

    monkeypatch.setattr(s.backend, "gpm_metrics", lost_on_gpu1)
    part = s.tick()
    assert part.devices[1].lost and part.devices[1].gpm is None and part.devices[1].health is None
    assert not part.devices[0].lost and part.devices[0].gpm is not None
    assert any("GPU 1" in p.message and "lost" in p.message for p in part.problems)
    assert part.host.nvml_poll_errors == 1
    monkeypatch.setattr(s.backend, "gpm_metrics", answers)
    s.tick()  # the GPU answers again: a new pair starts, then means come back
    again = s.tick().devices[1]
    assert not again.lost and again.gpm is not None


def test_a_failing_metrics_call_gives_null_means_and_the_next_pair_recovers(monkeypatch):
    s = Stepped("single")
    s.tick()
    answers = s.backend.gpm_metrics
    monkeypatch.setattr(s.backend, "gpm_metrics",
                        lambda *a: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)))
    part = s.tick()
    assert part.devices[0].gpm is None and not part.devices[0].lost and part.devices[0].health
    monkeypatch.setattr(s.backend, "gpm_metrics", answers)
    assert s.tick().devices[0].gpm is not None


def test_pcie_totals_are_the_sum_of_each_pairs_rate_times_its_length():
    s = Stepped("single", step_s=0.7)
    tx = rx = 0.0
    for _ in range(10):  # the first pair is taken by the first tick's second poll
        d = s.tick().devices[0]
        tx += d.gpm.pcie_tx_bytes_per_s * d.gpm.interval_s
        rx += d.gpm.pcie_rx_bytes_per_s * d.gpm.interval_s
        assert d.links.pcie_rate_source == "gpm"
        assert d.pcie_tx_bytes_per_s == round(d.gpm.pcie_tx_bytes_per_s)
    assert d.links.pcie_tx_bytes_total == int(tx) and d.links.pcie_rx_bytes_total == int(rx)
    assert rx > 0


def test_gpus_with_exact_gpm_pcie_rates_skip_the_20_ms_throughput_calls():
    s = Stepped("shared8")
    s.tick()
    s.tick()
    before = s.backend.calls["pcie_tx"]
    s.tick()
    assert s.backend.calls["pcie_tx"] - before == 1  # GPU 7 only (MIG: no whole-GPU GPM)


def test_an_older_gpu_without_gpm_has_null_means_and_no_gpm_calls():
    s = Stepped("oldgpu")
    for _ in range(3):
        part = s.tick()
    for d in part.devices:
        assert d.name == "Tesla V100-SXM2-32GB"
        assert d.gpm is None and d.gpm_instances == ()
        assert d.links.pcie_rate_source == "throughput" and d.pcie_tx_bytes_per_s is not None
        assert d.links.pcie_tx_bytes_total is None and d.links.pcie_rx_bytes_total is None
        assert d.links.pcie_gen_max == 3
    assert s.backend.calls["gpm_supported"] == 2
    assert "gpm_sample" not in s.backend.calls and "gpm_alloc" not in s.backend.calls


def test_not_supported_gpm_query_means_no_gpm():
    s = Stepped("notsupported")
    s.tick()
    part = s.tick()
    assert all(d.gpm is None for d in part.devices)
    assert "gpm_alloc" not in s.backend.calls


def test_stop_gives_back_every_gpm_buffer_and_xid_event_set():
    s = Stepped("shared8")
    for _ in range(3):
        s.tick()
    # two buffers per GPU with GPM (7) and per MIG instance of GPU 7 (3); an event set per GPU
    assert s.backend.gpm_buffers == 2 * (7 + 3) and s.backend.xid_watches == 8
    s.collector.stop()
    assert s.backend.gpm_buffers == 0 and s.backend.xid_watches == 0
    assert s.backend.initialized is False


def test_metric_ids_are_the_documented_ones():
    # docs/nvml.md's GPM table names these NVML_GPM_METRIC_* ids
    assert METRIC_IDS == (pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL, pynvml.NVML_GPM_METRIC_SM_UTIL,
                          pynvml.NVML_GPM_METRIC_SM_OCCUPANCY, pynvml.NVML_GPM_METRIC_INTEGER_UTIL,
                          pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL, pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
                          pynvml.NVML_GPM_METRIC_FP64_UTIL, pynvml.NVML_GPM_METRIC_FP32_UTIL,
                          pynvml.NVML_GPM_METRIC_FP16_UTIL, pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                          pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC,
                          pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
                          pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC)


# -- GRAPHICS_UTIL: ~1.2 ms of the driver's time on an H200, so at most once every 10 s -----------

def asked(s: Stepped, index: int = 0, gi: int | None = None) -> list[tuple[float, tuple[int, ...]]]:
    """(the collector's clock, metric ids) of each GPM evaluation the fake answered for one GPU
    or MIG instance (the fake records its own clock, which Stepped shares with the collector)."""
    return [(t, ids) for t, i, g, ids in s.backend.gpm_asked if i == index and g == gi]


def test_graphics_util_is_asked_once_every_10_s_of_the_collectors_clock_the_others_every_pair():
    s = Stepped("shared8", step_s=1.0)
    for _ in range(35):  # a pair every tick (the first one's too), 1 s apart
        s.tick()
    for index, gi in ((0, None), (6, None), (7, 1), (7, 5)):  # whole GPUs and MIG instances
        asks = asked(s, index, gi)  # a MIG instance's pairs start a tick later (the sampler finds it)
        first = asks[0][0]
        assert [t for t, _ in asks] == [first + k for k in range(len(asks))] and len(asks) >= 34
        assert all(ids[-len(FAST_IDS):] == FAST_IDS for _, ids in asks)
        with_graphics = [t for t, ids in asks if GRAPHICS_UTIL in ids]
        assert with_graphics == [first, first + 10, first + 20, first + 30]
        assert all(ids == METRIC_IDS for t, ids in asks if t in with_graphics)
        assert all(ids == FAST_IDS for t, ids in asks if t not in with_graphics)


def test_graphics_util_evaluations_are_at_least_10_s_apart_whatever_the_interval():
    s = Stepped("single", step_s=0.3)
    for _ in range(120):  # 36 s of pairs 0.3 s apart
        s.tick()
    times = [t for t, ids in asked(s) if GRAPHICS_UTIL in ids]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(times) == 4 and all(GRAPHICS_EVERY_S <= g < GRAPHICS_EVERY_S + 0.3 for g in gaps)
    assert s.collector._gpus[0].gpm.graphics_evaluations == 4


def test_the_devices_graphics_value_is_the_latest_evaluation_held_between_evaluations():
    s = Stepped("single", step_s=1.0)
    held = None
    changed = 0
    for _ in range(25):
        before = len(s.backend.gpm_asked)
        gpm = s.tick().devices[0].gpm
        evaluated = GRAPHICS_UTIL in s.backend.gpm_asked[-1][3] and len(s.backend.gpm_asked) > before
        if evaluated:  # the fake's graphics is 100 × load over the pair, its SM util 95 × load
            assert gpm.graphics_util_pct == pytest.approx(gpm.sm_util_pct / 0.95)
            held = gpm.graphics_util_pct
        else:
            assert gpm.graphics_util_pct == held
            changed += gpm.sm_util_pct != pytest.approx(held * 0.95)
    assert held is not None and held > 0 and changed >= 15  # the other means moved meanwhile


def test_graphics_util_the_gpu_does_not_offer_is_null_and_the_other_means_are_not():
    s = Stepped(scenario("single", gpm_not_offered=frozenset({GRAPHICS_UTIL})))
    for _ in range(13):
        gpm = s.tick().devices[0].gpm
        assert gpm.graphics_util_pct is None and gpm.sm_util_pct is not None


def test_a_failed_evaluation_leaves_graphics_util_due_for_the_next_pair(monkeypatch):
    s = Stepped("single", step_s=1.0)
    answers = s.backend.gpm_metrics
    s.tick()  # the first pair: GRAPHICS_UTIL evaluated
    for _ in range(9):
        s.tick()  # 10 s later it is due again, and that call fails
    monkeypatch.setattr(s.backend, "gpm_metrics",
                        lambda *a: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)))
    assert s.tick().devices[0].gpm is None
    monkeypatch.setattr(s.backend, "gpm_metrics", answers)
    gpm = s.tick().devices[0].gpm
    assert asked(s)[-1][1] == METRIC_IDS and asked(s)[-1][0] == s.now
    assert gpm.graphics_util_pct == pytest.approx(gpm.sm_util_pct / 0.95)


def test_a_gpu_lost_and_back_evaluates_graphics_util_with_its_first_new_pair(monkeypatch):
    s = Stepped("shared8", step_s=1.0)
    s.tick()
    s.tick()
    answers = s.backend.gpm_metrics

    def lost_on_gpu1(first, second, ids):
        out = answers(first, second, ids)
        if second.index == 1:
            out[-1] = out[-1]._replace(code=pynvml.NVML_ERROR_GPU_IS_LOST)
        return out

    monkeypatch.setattr(s.backend, "gpm_metrics", lost_on_gpu1)
    assert s.tick().devices[1].lost
    monkeypatch.setattr(s.backend, "gpm_metrics", answers)
    s.tick()  # a new pair starts
    gpm = s.tick().devices[1].gpm  # 4 s after the last evaluation, yet evaluated again
    assert asked(s, 1)[-1][1] == METRIC_IDS
    assert gpm.graphics_util_pct == pytest.approx(gpm.sm_util_pct / 0.95)
    assert asked(s, 0)[-1][1] == FAST_IDS  # GPU 0 keeps its own schedule
