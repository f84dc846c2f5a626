"""The NVML collector's history, ticked with a fake clock: what it keeps at the polling rate, its
minute roll-ups (exact for the samples they stand for), how an answer joins the two, NaN for
"not available", a lost GPU, processes coming and going within the budget, the bytes after a day."""

from __future__ import annotations

import math
import threading
from collections import defaultdict

import pytest

from gpuflow.collectors.nvml.fake_scenarios import CHURN_FIRST_PID, Scenario
from gpuflow.collectors.nvml.history import MAX_FINE_TICKS, ROLLUP_S, HistoryBudget
from gpuflow.collectors.nvml.history_track import DEVICE_METRICS, PROCESS_METRICS

from .ticked import EPOCH, NAN, Ticked, minute_stats, reading, same, samples


def by_resolution(part, resolution):
    return {(s.entity, s.metric): s for s in part.series if s.resolution_s == resolution}


def check_fine(series, parts):
    """Every sample equals what the part stamped with its time said (NaN where the entity was
    not in it: a process away from that GPU for a while)."""
    at = dict(parts)
    assert len(series.t_s) == len(series.value) > 0
    assert list(series.t_s) == sorted(series.t_s)
    for t, v in zip(series.t_s, series.value):
        expected = reading(at[t], series.entity, series.metric)
        assert same(v, NAN if expected is None else expected), (series.entity, series.metric, t)


def check_rolled(series, parts):
    """Each roll-up's mean, minimum and maximum are exactly those of the samples of its minute."""
    minutes = defaultdict(list)
    for t, v in samples(parts, series.entity, series.metric):
        minutes[int(t // ROLLUP_S)].append(v)
    assert series.min_value is not None and series.max_value is not None
    for t, mean, low, high in zip(series.t_s, series.value, series.min_value, series.max_value):
        assert t % ROLLUP_S == 0
        expected = minute_stats(minutes[int(t // ROLLUP_S)])
        assert all(same(a, b) for a, b in zip((mean, low, high), expected)), (
            series.entity, series.metric, t, (mean, low, high), expected)


def test_samples_at_the_polling_rate_are_the_snapshots_readings():
    run = Ticked("shared8")
    run.tick(100)
    answer = run.query()
    assert answer.source == "nvml" and answer.problems == ()
    assert (answer.retained_from_s, answer.retained_to_s) == (EPOCH, EPOCH + 99)
    fine = by_resolution(answer, 1.0)
    assert by_resolution(answer, ROLLUP_S) == {}  # nothing has left the polling rate yet
    uuids = [d.uuid for d in run.parts[0][1].devices]
    for uuid in uuids:
        for metric, _ in DEVICE_METRICS:
            series = fine[(("device", uuid), metric)]
            assert list(series.t_s) == [t for t, _ in run.parts]
            check_fine(series, run.parts)
    held = {(str(p.pid), a.device_uuid) for _, part in run.parts for p in part.processes
            for a in p.attachments}
    assert {e[1:] for e, _ in fine if e[0] == "process"} == held
    for (entity, metric), series in fine.items():
        check_fine(series, run.parts)
    units = {metric: s.unit for (_, metric), s in fine.items()}
    assert units["power_draw_w"] == "W" and units["pcie_rx_bytes_per_s"] == "bytes/s"
    assert units["sm_util_pct"] == "%" and units["memory_used_bytes"] == "bytes"


@pytest.mark.parametrize("scenario", ["shared8", "lost", "vanishing"])
def test_roll_ups_are_exact_and_join_the_polling_rate_without_overlap_or_gap(scenario):
    run = Ticked(scenario, fine_s=300)  # 300 samples kept at the polling rate
    run.tick(800)  # 13 minutes and a bit
    answer = run.query()
    rolled, fine = by_resolution(answer, ROLLUP_S), by_resolution(answer, 1.0)
    assert rolled and set(rolled) <= set(fine) | set(rolled)
    first_minute = int(EPOCH // ROLLUP_S)
    assert answer.retained_from_s == first_minute * ROLLUP_S  # the partial first minute's start
    assert answer.retained_to_s == run.parts[-1][0]
    for key, series in rolled.items():
        check_rolled(series, run.parts)
    for key, series in fine.items():
        check_fine(series, run.parts)
    # the join: roll-ups up to the oldest whole minute still at the polling rate, samples from it
    device = ("device", run.parts[0][1].devices[0].uuid)
    r, f = rolled[(device, "utilization_gpu_pct")], fine[(device, "utilization_gpu_pct")]
    join = r.t_s[-1] + ROLLUP_S
    assert f.t_s[0] == join and join % ROLLUP_S == 0
    assert list(r.t_s) == [m * ROLLUP_S for m in range(first_minute, int(join // ROLLUP_S))]
    oldest_kept = run.parts[-300][0]
    assert join - ROLLUP_S < oldest_kept <= join  # the minute before the join is partly gone
    assert list(f.t_s) == [t for t, _ in run.parts if t >= join]


def test_not_available_is_nan_in_samples_and_roll_ups_never_zero():
    run = Ticked("notsupported", fine_s=300)
    run.tick(500)
    answer = run.query()
    for s in answer.series:
        columns = [s.value] + ([s.min_value, s.max_value] if s.min_value is not None else [])
        if s.metric in ("memory_used_bytes",):
            assert all(v > 0 for c in columns for v in c)
        else:  # every optional field answered NotSupported
            assert all(math.isnan(v) for c in columns for v in c), (s.entity, s.metric)


def test_a_lost_gpu_keeps_its_readings_until_it_was_lost_then_nan():
    run = Ticked("lost", fine_s=300)
    run.tick(400)
    lost = run.parts[0][1].devices[2].uuid
    answer = run.query()
    fine = by_resolution(answer, 1.0)[(("device", lost), "utilization_gpu_pct")]
    assert all(math.isnan(v) for v in fine.value)  # lost since its 4th poll
    rolled = by_resolution(answer, ROLLUP_S)[(("device", lost), "power_draw_w")]
    assert not math.isnan(rolled.value[0]) and rolled.min_value[0] > 0  # 3 answers in minute 1
    assert all(math.isnan(v) for v in rolled.value[1:])
    check_rolled(rolled, run.parts)
    # its process's attachment on GPU 2 ends with it; the others go on
    gpu2 = [s for s in answer.series if s.entity == ("process", "4500", lost)]
    assert gpu2 and all(s.resolution_s == ROLLUP_S for s in gpu2)
    assert any(s.entity[0] == "process" and s.resolution_s == 1.0 for s in answer.series)


def test_ranges_inside_across_and_outside_what_is_kept():
    run = Ticked("single", fine_s=300)
    run.tick(1000)
    first, last = run.parts[0][0], run.parts[-1][0]
    inside = run.query(last - 100.5, last - 50)
    assert {s.resolution_s for s in inside.series} == {1.0}
    assert all(list(s.t_s) == [t for t, _ in run.parts if last - 100.5 <= t < last - 50]
               for s in inside.series)
    across = run.query(first + 125, last)  # starts inside minute 3, ends at the newest sample
    rolled = by_resolution(across, ROLLUP_S)
    assert all(s.t_s[0] == (first + 125) // ROLLUP_S * ROLLUP_S for s in rolled.values())
    assert all(s.t_s[-1] < last for s in by_resolution(across, 1.0).values())  # [from, to)
    for when in ((1.0, 2.0), (first - 3600, first - 61), (last + 1, last + 3600)):
        outside = run.query(*when)
        assert outside.series == ()
        assert (outside.retained_from_s, outside.retained_to_s) == (first // 60 * 60, last)


def test_processes_come_and_go_within_the_budget_the_oldest_gone_first():
    churn = Scenario("churn2", "2 GPUs, a job every 10 polls for 25", gpus=2, churn_every=10,
                     churn_life=25)
    run = Ticked(churn, processes=5)
    last_seen = {}
    for _ in range(200):
        part = run.tick()
        for p in part.processes:
            last_seen[p.pid] = len(run.parts)
        live = {p.pid for p in part.processes}
        answer = run.query()
        kept = {int(s.entity[1]) for s in answer.series if s.entity[0] == "process"}
        gone = sorted((pid for pid in last_seen if pid not in live), key=lambda pid: -last_seen[pid])
        assert kept == live | set(gone[:5 - len(live)])  # those that left last stay longest
        assert answer.problems == ()
    assert max(last_seen) - CHURN_FIRST_PID >= 19  # 20 processes came and went through 5 slots
    for s in run.query().series:
        check_fine(s, run.parts)


def test_beyond_the_budget_new_processes_are_not_kept_and_the_answer_says_so():
    churn = Scenario("churn3", "1 GPU, jobs overlapping", gpus=1, churn_every=5, churn_life=50)
    run = Ticked(churn, processes=3)
    live = len(run.tick(40).processes)
    assert live > 3
    answer = run.query()
    kept = sorted({int(s.entity[1]) for s in answer.series if s.entity[0] == "process"})
    assert kept == [CHURN_FIRST_PID, CHURN_FIRST_PID + 1, CHURN_FIRST_PID + 2]  # the first came
    (problem,) = answer.problems
    assert problem.severity == "info"
    assert problem.message.startswith(f"{live - 3} GPU process series are not in the history")
    assert "GPUFLOW_NVML_HISTORY_PROCESSES" in problem.message


@pytest.mark.slow
def test_the_store_keeps_to_its_budget_through_a_day_of_processes_coming_and_going():
    churn = Scenario("churn-day", "2 GPUs, a job every 3 polls for 30", gpus=2, churn_every=3,
                     churn_life=30)
    run = Ticked(churn, interval_s=10.0)  # a day is 8,640 ticks
    budget = run.store.budget
    run.tick()
    assert run.store.nbytes < budget.nbytes(2) / 10  # the rings grow as they fill ...
    pids = set()
    for _ in range(8_640):
        part = run.tick()
        pids.update(p.pid for p in part.processes)
    assert len(pids) > 8 * budget.processes  # far more processes than slots came and went
    assert run.store.nbytes == budget.nbytes(2)  # ... to their budget, and no further
    run.tick(360)
    assert run.store.nbytes == budget.nbytes(2)
    # 8 GPUs at 1 s: 3,600 samples and 1,440 roll-ups of 9 readings, 32 slots of 2: about 8 MiB
    one_second = HistoryBudget(interval_s=1.0)
    assert one_second.fine_ticks == 3_600 and one_second.coarse_minutes == 1_440
    assert one_second.nbytes(8) == 8 * (3_600 * (1 + 136) + 1_440 * 3 * 136 + 136) < 9 * 2**20
    answer = run.query()
    assert answer.retained_from_s >= run.now - 86_400 - ROLLUP_S
    assert len({s.entity for s in answer.series if s.entity[0] == "process"}) <= budget.processes


def test_answers_taken_while_it_ticks_are_consistent():
    churn = Scenario("churn4", "2 GPUs, a job every 7 polls for 20", gpus=2, churn_every=7,
                     churn_life=20)
    run = Ticked(churn, fine_s=300, processes=3)  # the ring wraps, slots change hands
    run.tick()
    errors, answers = [], []
    stop = threading.Event()

    def ask():
        while not stop.is_set():
            try:
                answer = run.query(run.now - 400, run.now)
                for s in answer.series:
                    assert len(s.t_s) == len(s.value)
                    assert all(a < b for a, b in zip(s.t_s, s.t_s[1:]))
                answers.append(answer)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    reader = threading.Thread(target=ask)
    reader.start()
    try:
        run.tick(800)
    finally:
        stop.set()
        reader.join()
    assert errors == [] and len(answers) > 5
    parts = run.parts
    for answer in answers[-3:]:
        for s in answer.series:
            if s.resolution_s == 1.0:
                check_fine(s, parts)
            else:
                check_rolled(s, parts)


def test_a_clock_stepped_back_never_sends_times_backwards():
    run = Ticked("single")
    run.tick(10)
    run.now -= 100.0
    run.tick(5)
    (series,) = [s for s in run.query().series if s.metric == "temperature_c"]
    assert list(series.t_s) == sorted(series.t_s) and len(series.t_s) == 15
    assert series.t_s[-1] == series.t_s[9] == EPOCH + 9


def test_the_budget_follows_the_interval_within_its_bounds():
    assert HistoryBudget(interval_s=0.5).fine_ticks == 7_200
    assert HistoryBudget(interval_s=0.001).fine_ticks == MAX_FINE_TICKS  # an hour at 10 Hz
    assert HistoryBudget(interval_s=5.0, coarse_s=7 * 86_400).coarse_minutes == 10_080
    with pytest.raises(ValueError, match="at least 180 s"):
        HistoryBudget(interval_s=1.0, fine_s=100)


def test_another_set_of_gpus_starts_the_history_over():
    run = Ticked("shared8")
    run.tick(5)
    other = Ticked("single")
    part = other.tick()
    run.store.record(run.now, part.devices, part.processes)
    answer = run.query()
    assert {s.entity for s in answer.series if s.entity[0] == "device"} == {
        ("device", part.devices[0].uuid)}
    assert answer.retained_from_s == answer.retained_to_s == run.now


def test_metrics_and_units_are_the_snapshots():
    from gpuflow.core.snapshot import Attachment, Device

    device_fields = {f for f in Device.__dataclass_fields__}
    assert {m for m, _ in DEVICE_METRICS} <= device_fields
    assert {m for m, _ in PROCESS_METRICS} <= set(Attachment.__dataclass_fields__)


def test_a_process_away_from_a_gpu_for_a_while_has_nan_there_not_its_last_reading():
    from gpuflow.core.snapshot import Attachment, Process

    run = Ticked("single")
    devices = run.tick().devices
    uuid = devices[0].uuid
    t = run.now

    def job(memory):
        return (Process(77, "python", "alice", "python",
                        (Attachment(0, uuid, "compute", memory, 50, 10),)),)

    for i, processes in enumerate((job(1 << 30), job(2 << 30), (), (), job(3 << 30))):
        run.store.record(t + i, devices, processes)
    answer = run.query(t, t + 10)
    (memory,) = [s for s in answer.series if s.entity == ("process", "77", uuid)
                 and s.metric == "memory_used_bytes"]
    assert list(memory.t_s) == [t + i for i in range(5)]
    assert [v if v == v else None for v in memory.value] == [1 << 30, 2 << 30, None, None, 3 << 30]
