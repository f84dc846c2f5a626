"""GET /api/history's ``metrics=`` and ``points=``: what a view that draws history small asks for
(the page's sparklines and timeline, issue 18), through a real agent and app with a plugin that
answers like a collector: only the named metrics; every series of more than ``points`` points
reduced to at most that many, each bucket the exact mean (fsum over the available values), least
and greatest of what it holds (a roll-up's own min and max included), null where nothing was
available, at bucket starts aligned to the bucket width (the same buckets whatever range asked);
a series that fits comes back untouched; bad values are 400s naming the parameter."""

from __future__ import annotations

import math
from array import array

import pluggy
import pytest
from falcon import testing

import gpuflow
from gpuflow.core import hookspecs
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.recorded import HistoryPart, Series
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.recorded_api import MAX_METRICS, MAX_POINTS, reduce_series, series_json

NAN = float("nan")
#: a second of samples every 0.1 s from t=1000: utilization 0, 10, ..., 90 with two unavailable
UTIL = [0.0, 10.0, NAN, 30.0, 40.0, 50.0, 60.0, NAN, 80.0, 90.0]
TIMES = [1000.0 + i / 10 for i in range(10)]


def within(series: Series, start: float, end: float) -> Series | None:
    """The part of ``series`` a collector answers for [start, end): the points whose stretch
    (``t`` to ``t + resolution_s``) overlaps it, as the NVML collector answers roll-ups."""
    keep = [i for i, t in enumerate(series.t_s) if t + series.resolution_s > start and t < end]
    if not keep:
        return None
    pick = lambda a: None if a is None else array("d", [a[i] for i in keep])  # noqa: E731
    return Series(entity=series.entity, metric=series.metric, unit=series.unit,
                  resolution_s=series.resolution_s, t_s=pick(series.t_s), value=pick(series.value),
                  min_value=pick(series.min_value), max_value=pick(series.max_value))


KEPT = (
    Series(entity=("device", "GPU-0"), metric="utilization_gpu_pct", unit="%", resolution_s=0.1,
           t_s=array("d", TIMES), value=array("d", UTIL)),
    Series(entity=("device", "GPU-0"), metric="memory_used_bytes", unit="bytes", resolution_s=0.1,
           t_s=array("d", TIMES[:2]), value=array("d", [5.0, 6.0])),
    Series(entity=("process", "42", "GPU-0"), metric="sm_util_pct", unit="%", resolution_s=60.0,
           t_s=array("d", [900.0, 960.0, 1020.0]), value=array("d", [50.0, 20.0, NAN]),
           min_value=array("d", [10.0, 0.0, NAN]), max_value=array("d", [90.0, 70.0, NAN])),
)


class Kept:
    """Answers what a collector keeping readings would: the samples above for one GPU, a few of
    its memory, and three roll-ups with their own min and max, each for the range asked."""

    @gpuflow.hookimpl
    def query_history(self, context, start_s, end_s):
        series = tuple(s for s in (within(k, start_s, end_s) for k in KEPT) if s is not None)
        return HistoryPart(source="kept", retained_from_s=900.0, retained_to_s=1000.9, series=series)


def client():
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    pm.register(Kept(), name="kept")
    agent = Agent(AgentConfig(), pm)
    app = create_app(agent, settings=AppSettings(start_agent=False))
    return testing.TestClient(app, headers={"Host": "localhost"})


def history(**params):
    r = client().simulate_get("/api/history", params={k: str(v) for k, v in params.items()})
    assert r.status_code == 200, r.text
    return {(tuple(s["entity"]), s["metric"]): s for s in r.json["series"]}


def mean(xs):
    got = [x for x in xs if not math.isnan(x)]
    return math.fsum(got) / len(got) if got else None


def test_points_reduce_a_series_to_bucket_means_with_their_least_and_greatest():
    # [1000, 1001) in 5 points: buckets of 0.25 s at multiples of 0.25 s
    doc = history(**{"from": 1000, "to": 1001, "points": 5})
    util = doc[(("device", "GPU-0"), "utilization_gpu_pct")]
    assert util["resolution_s"] == 0.25
    assert util["t"] == [1000.0, 1000.25, 1000.5, 1000.75]
    groups = [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9]]   # samples at .0-.2, .3-.4, .5-.7, .8-.9
    assert util["value"] == [mean([UTIL[i] for i in g]) for g in groups]
    assert util["min"] == [0.0, 30.0, 50.0, 80.0] and util["max"] == [10.0, 40.0, 60.0, 90.0]
    assert len(util["t"]) <= 5
    # a series that already fits is answered as it is: no min and max appear
    memory = doc[(("device", "GPU-0"), "memory_used_bytes")]
    assert memory == {"entity": ["device", "GPU-0"], "metric": "memory_used_bytes", "unit": "bytes",
                      "resolution_s": 0.1, "t": TIMES[:2], "value": [5.0, 6.0]}


def test_nothing_available_in_a_bucket_is_null_and_roll_ups_keep_their_extremes():
    doc = history(**{"from": 900, "to": 1080, "points": 2})   # one bucket of 180 s from 900
    (sm,) = [s for key, s in doc.items() if key[1] == "sm_util_pct"]
    assert sm["t"] == [900.0] and sm["value"] == [35.0] and sm["min"] == [0.0] and sm["max"] == [90.0]
    # roll-ups that began before the range count in its first bucket
    doc = history(**{"from": 1000, "to": 1000.5, "points": 2})   # buckets of 0.5 s from 1000
    (sm,) = [s for key, s in doc.items() if key[1] == "sm_util_pct"]
    assert sm["t"] == [960.0] and sm["resolution_s"] == 60.0   # one roll-up overlaps: it fits as it is
    doc = history(**{"from": 950, "to": 1030, "points": 2})   # buckets of 80 s: from 880 and 960
    (sm,) = [s for key, s in doc.items() if key[1] == "sm_util_pct"]   # roll-ups at 900, 960, 1020
    assert sm["t"] == [880.0, 960.0] and sm["value"] == [50.0, 20.0]
    assert sm["min"] == [10.0, 0.0] and sm["max"] == [90.0, 70.0]
    samples = Series(entity=("device", "GPU-1"), metric="utilization_gpu_pct", unit="%", resolution_s=1.0,
                     t_s=array("d", [1.0, 2.0, 3.0]), value=array("d", [NAN, NAN, NAN]))
    reduced = series_json(reduce_series(samples, 0.0, 4.0, 2))
    assert reduced["value"] == [None] and reduced["min"] == [None] and reduced["max"] == [None]


def test_buckets_are_aligned_so_an_overlapping_range_gives_the_same_points():
    a = history(**{"from": 1000, "to": 1001, "points": 5})[(("device", "GPU-0"), "utilization_gpu_pct")]
    b = history(**{"from": 1000.25, "to": 1001.25, "points": 5})[(("device", "GPU-0"), "utilization_gpu_pct")]
    shared = [t for t in a["t"] if t in b["t"]]
    assert shared == [1000.25, 1000.5, 1000.75]
    for t in shared:
        i, j = a["t"].index(t), b["t"].index(t)
        assert (a["value"][i], a["min"][i], a["max"][i]) == (b["value"][j], b["min"][j], b["max"][j])


def test_never_more_points_than_asked():
    for points in (2, 3, 4, 7, 9, 10):
        for start in (999.95, 1000.0, 1000.05):
            doc = history(**{"from": start, "to": start + 0.97, "points": points})
            for s in doc.values():
                assert len(s["t"]) <= points, (points, start, s)


def test_metrics_keep_only_the_named_series():
    doc = history(**{"from": 900, "to": 1100, "metrics": "sm_util_pct,memory_used_bytes"})
    assert sorted(key[1] for key in doc) == ["memory_used_bytes", "sm_util_pct"]
    assert history(**{"from": 900, "to": 1100, "metrics": "temperature_c"}) == {}


@pytest.mark.parametrize("params,named", [
    ({"points": "1"}, "points must be between 2 and"),
    ({"points": "0"}, "points must be between 2 and"),
    ({"points": str(MAX_POINTS + 1)}, "points must be between 2 and"),
    ({"points": "1e3"}, "points must be a whole number"),
    ({"points": "-5"}, "points must be a whole number"),
    ({"metrics": ""}, "metrics must be a comma-separated list"),
    ({"metrics": "Utilization"}, "metrics must be a comma-separated list"),
    ({"metrics": "a,,b"}, "metrics must be a comma-separated list"),
    ({"metrics": "x" * 65}, "metrics must be a comma-separated list"),
    ({"metrics": ",".join(f"m{i}" for i in range(MAX_METRICS + 1))}, "at most 32"),
    ({"metrics": "util</script>"}, "metrics must be a comma-separated list"),
])
def test_bad_reduction_parameters_are_400_naming_the_parameter_never_echoing_it(params, named):
    r = client().simulate_get("/api/history", params={"from": "1", "to": "2", **params})
    assert r.status_code == 400
    assert named in r.json["error"]
    for value in params.values():
        if len(value) > 2:
            assert value not in r.text


def test_the_window_route_takes_no_reduction_parameters():
    r = client().simulate_get("/api/window", params={"from": "1", "to": "2", "points": "5"})
    assert r.status_code == 400 and "unknown parameter" in r.json["error"]
