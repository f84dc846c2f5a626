"""The snapshot's plain form (``json_value``, ``to_json_dict``) as each class's own plain-maker
writes it is exactly the generic walk's: the same members in the same order, on the richest
objects the agent makes without a GPU (every fake scenario's devices, with their NVLinks, GPM and
health readings, lost and unsupported fields, and processes), and on values of the types a walk
must not take as they are (a str subclass, a nested tuple)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from gpuflow.collectors.nvml.fake_backend import scenario_names
from gpuflow.core import snapshot as S
from gpuflow.core.snapshot import Snapshot


def walk(obj):
    """The generic walk the plain-makers replace (gpuflow.core.snapshot before them)."""
    if isinstance(obj, tuple):
        return [walk(x) for x in obj]
    cls = type(obj)
    if cls is S.Span:
        return S._span_json(obj)
    if cls is S._span_columns():
        return obj.to_json_list()
    if cls is S.KernelStat:
        return S._kernel_json(obj)
    if hasattr(cls, "__dataclass_fields__"):
        return {name: walk(getattr(obj, name)) for name in S._field_names(cls)}
    return obj


def text(doc) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)   # members in their order


@pytest.mark.parametrize("scenario", [s for s in scenario_names() if s not in ("nodriver", "hang")])
def test_every_scenarios_devices_and_processes_are_the_walks(manual, scenario):
    m = manual(scenario, seed=3)
    for _ in range(3):   # a few ticks: readings move, GPM pairs fill in, processes come and go
        part = m.tick()
        assert part.devices or scenario == "lost"
        for d in part.devices:
            made, walked = S.json_value(d), walk(d)
            assert made == walked and text(made) == text(walked)   # lists, not tuples; the order too
        for p in part.processes:
            made, walked = S.json_value(p), walk(p)
            assert made == walked and text(made) == text(walked)
        snap = Snapshot(seq=1, timestamp=1.0, host=part.host, devices=part.devices,
                        processes=part.processes)
        doc = snap.to_json_dict()
        assert text(doc["devices"]) == text(walk(part.devices))


class Tag(str):
    pass


@dataclass(frozen=True, slots=True)
class Inner:
    tag: str
    pairs: tuple


@dataclass(frozen=True, slots=True)
class Outer:
    name: str
    inner: Inner | None
    many: tuple
    flag: bool = False
    ratio: float | None = None


def test_values_not_of_a_plain_type_go_through_the_walk():
    o = Outer(name=Tag("x"), inner=Inner(tag="t", pairs=((1, 2), (3, (4,)))), many=(Inner("a", ()), None, 5),
              flag=True, ratio=float("nan"))
    made = S.json_value(o)
    assert made == walk(o) and text(made) == text(walk(o))
    assert made["inner"]["pairs"] == [[1, 2], [3, [4]]] and made["many"][0] == {"tag": "a", "pairs": []}
    assert S.json_value(Outer("y", None, ())) == {"name": "y", "inner": None, "many": [], "flag": False, "ratio": None}
