"""Health and link readings through the collector and the fake backend: each one present with
plausible values in shared8, null (never 0) where NVML cannot give it, a failing call costing
only its own field, XID events counted, NVLink peers found, the collector's own state in host."""

from __future__ import annotations

import pynvml
import pytest

from gpuflow.collectors.nvml.readings import clock_event_names, pcie_peak_bytes_per_s
from gpuflow.core.snapshot import HealthReadings, LinkReadings

from .test_gpm import Stepped

HEALTH_FIELDS = tuple(f for f in HealthReadings.__dataclass_fields__)
LINK_PCIE = ("pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "pcie_peak_bytes_per_s")


def test_pcie_peak_per_direction_from_generation_and_width():
    assert pcie_peak_bytes_per_s(5, 16) == pytest.approx(63.015e9, rel=1e-4)  # 32 GT/s × 128/130 × 16 / 8
    assert pcie_peak_bytes_per_s(3, 16) == pytest.approx(15.754e9, rel=1e-4)
    assert pcie_peak_bytes_per_s(2, 8) == pytest.approx(4e9)
    assert pcie_peak_bytes_per_s(None, 16) is None and pcie_peak_bytes_per_s(5, 0) is None
    assert pcie_peak_bytes_per_s(9, 16) is None  # a generation this table does not know


def test_clock_event_names_and_unknown_bits():
    assert clock_event_names(0) == ()
    assert clock_event_names(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert clock_event_names(0x40 | 0x10000) == ("hw_thermal_slowdown", "0x10000")


def test_shared8_shows_every_health_family_with_plausible_values():
    s = Stepped("shared8")
    for _ in range(6):
        part = s.tick()
    for d in part.devices:
        h = d.health
        present = [f for f in HEALTH_FIELDS if f != "xid_last"]  # no XID yet: no last code
        assert all(getattr(h, f) is not None for f in present), d.index
        assert 3_600_000 < h.energy_joules < 3_700_000
        assert 30 <= h.memory_temperature_c <= 80
        assert h.memory_reserved_bytes == 474 << 20
        assert h.memory_free_bytes == d.memory_total_bytes - d.memory_used_bytes - h.memory_reserved_bytes
    gpu = part.devices
    assert (gpu[5].health.xid_errors, gpu[5].health.xid_last) == (1, 31)  # after 4 polls
    assert gpu[0].health.xid_errors == 0 and gpu[0].health.xid_last is None
    h3 = gpu[3].health
    assert (h3.ecc_corrected_volatile, h3.ecc_uncorrected_volatile) == (2, 0)
    assert (h3.ecc_corrected_aggregate, h3.remapped_rows_correctable) == (14, 1)
    assert h3.remap_pending is False and h3.remap_failure is False
    assert gpu[2].health.pcie_replays == 3
    assert (gpu[6].health.encoder_util_pct, gpu[6].health.decoder_util_pct) == (12, 7)
    assert gpu[7].health.clock_events == ("gpu_idle",) and gpu[7].health.clock_event_mask == 1


def test_xid_events_are_counted_once_and_kept():
    s = Stepped("shared8")
    seen = [s.tick().devices[5].health.xid_errors for _ in range(8)]
    assert seen[0] == 0 and seen[-1] == 1 and sorted(seen) == seen


def test_energy_counter_grows_by_the_power_drawn_between_ticks():
    s = Stepped("single")
    s.tick()
    a = s.tick().devices[0]
    b = s.tick().devices[0]
    # the fake integrates each poll's power over one second, and the sampler's sweep (before each
    # poll) reads the counter: it moves by the power the poll before drew
    assert b.health.energy_joules - a.health.energy_joules == pytest.approx(a.power_draw_w)


def test_the_energy_counter_is_read_by_the_sampler_not_the_tick():
    # nvmlDeviceGetTotalEnergyConsumption took 3.2 ms (median) on the H200: out of the tick
    s = Stepped("shared8")
    s.tick()
    before = s.backend.calls["energy"]
    for _ in range(3):
        s.collector.poll_once()
    assert s.backend.calls["energy"] == before
    s.collector.sample_once()
    assert s.backend.calls["energy"] == before + 8  # once per GPU and sweep
    assert s.collector.poll_once().devices[0].health.energy_joules > 3_600_000


def test_links_pcie_and_nvlink_topology():
    s = Stepped("shared8")
    for _ in range(3):
        part = s.tick()
    gpu0 = part.devices[0]
    assert (gpu0.links.pcie_gen_max, gpu0.links.pcie_width_max) == (5, 16)
    assert gpu0.links.pcie_peak_bytes_per_s == pytest.approx(63.015e9, rel=1e-4)
    assert (gpu0.links.pcie_gen, gpu0.links.pcie_width) == (5, 16)
    assert part.devices[7].links.pcie_gen == 1  # idle: the link drops to gen 1
    assert [n.link for n in gpu0.links.nvlinks] == [0, 1, 2, 3]
    assert {n.remote_device_index for n in gpu0.links.nvlinks} == {1}
    assert gpu0.links.nvlinks[0].remote_pci_bus_id == part.devices[1].pci_bus_id
    assert {n.remote_device_index for n in part.devices[6].links.nvlinks} == {7}
    down = part.devices[3].links.nvlinks[3]
    assert down.state == "down" and down.tx_bytes_per_s == 0
    up = gpu0.links.nvlinks[0]
    assert up.state == "up" and up.tx_bytes_total > 0 and up.rx_bytes_per_s > 0


def test_nvlink_rate_is_the_counter_difference_over_the_sweeps_time():
    s = Stepped("shared8", step_s=2.0)
    s.tick()
    before = s.tick().devices[0].links.nvlinks[0]
    after = s.tick().devices[0].links.nvlinks[0]
    assert after.rx_bytes_per_s == pytest.approx((after.rx_bytes_total - before.rx_bytes_total) / 2.0)


def test_a_gpu_without_nvlink_has_none_and_no_link_calls_after_init():
    s = Stepped("single")
    for _ in range(3):
        d = s.tick().devices[0]
    assert d.links.nvlinks == ()
    assert "nvlink_throughput" not in s.backend.calls
    assert s.backend.calls["nvlink_state"] == pynvml.NVML_NVLINK_MAX_LINKS  # once per link, at init


def test_notsupported_every_new_reading_is_null_never_zero():
    s = Stepped("notsupported")
    for _ in range(3):
        part = s.tick()
    for d in part.devices:
        h = d.health
        nulls = [f for f in HEALTH_FIELDS if f not in ("memory_free_bytes", "memory_reserved_bytes")]
        assert all(getattr(h, f) is None for f in nulls), [f for f in nulls if getattr(h, f) is not None]
        assert h.memory_free_bytes is not None  # memory is answered in that scenario
        assert all(getattr(d.links, f) is None for f in LINK_PCIE)
        assert d.links.nvlinks == () and d.links.pcie_rate_source is None
        assert d.gpm is None
    assert part.problems == ()  # not supported is not a problem


def test_oldgpu_has_no_row_remapping_and_no_memory_temperature_but_its_other_health():
    s = Stepped("oldgpu")
    for _ in range(3):
        d = s.tick().devices[0]
    assert d.health.remapped_rows_correctable is None and d.health.remap_pending is None
    assert d.health.memory_temperature_c is None
    assert d.health.ecc_corrected_volatile == 0 and d.health.energy_joules is not None
    assert [n.remote_device_index for n in d.links.nvlinks] == [1] * 6


def test_a_failing_health_call_costs_only_its_own_field(monkeypatch):
    s = Stepped("single")
    s.tick()

    def timeout(*args):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    monkeypatch.setattr(s.backend, "ecc_counts", timeout)
    monkeypatch.setattr(s.backend, "energy", timeout)
    d = s.tick().devices[0]
    assert d.health.ecc_corrected_volatile is None and d.health.energy_joules is None
    assert d.health.pcie_replays == 0 and d.power_draw_w is not None and not d.lost


def test_a_lost_gpu_has_no_links_health_or_gpm():
    s = Stepped("lost")
    for _ in range(6):
        part = s.tick()
    gpu2 = part.devices[2]
    assert gpu2.lost and (gpu2.links, gpu2.health, gpu2.gpm, gpu2.gpm_instances) == (None, None, None, ())
    assert part.devices[1].health is not None


def test_host_carries_the_collectors_own_state():
    s = Stepped("single")
    part = s.tick()
    assert part.host.nvml_up is True and part.host.nvml_polls >= 1
    assert part.host.nvml_poll_seconds == 0.0 and part.host.nvml_poll_errors == 0


def test_host_says_nvml_is_down_when_init_fails():
    s = Stepped("nodriver")
    part = s.tick()
    assert part.host.nvml_up is False and part.host.nvml_polls is None
