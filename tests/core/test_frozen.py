"""positional_constructor: the same objects as the dataclass's own constructor, or that constructor."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from gpuflow.core.frozen import positional_constructor
from gpuflow.core.snapshot import Attachment, Device, Process, SnapshotPart, Workload

DEVICE = (3, "GPU-1", "NVIDIA H200", "00000000:19:00.0", False, 87, 41, 1 << 34, 150754820096,
          63, 609.5, 700.0, 1980, 3201, 1_290_000_000, 5_600_000, "disabled", None, (), None, None,
          "gpu-node-3")


@pytest.mark.parametrize("cls, values", [
    (Device, DEVICE),
    (Attachment, (0, "GPU-1", "compute+graphics", None, 99, None)),
    (Process, (42, "python", "alice", "python", (Attachment(0, "GPU-1"),), "gpu-node-3",
               Workload(container_id="ab" * 32, pod_uid="5a1c3e2f-8b4d-4f0e-9c6a-1d2e3f405161"))),
    (SnapshotPart, ("nvml", None, (Device(0, "GPU-0"),), (), (), (), (), (), False)),
])
def test_same_object_as_the_constructor(cls, values):
    make = positional_constructor(cls)
    assert make is not cls  # the snapshot's classes are frozen, slotted, without __post_init__
    built, reference = make(*values), cls(*values)
    assert type(built) is cls
    assert built == reference and hash(built) == hash(reference) and repr(built) == repr(reference)
    assert dataclasses.astuple(built) == dataclasses.astuple(reference)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.__setattr__(dataclasses.fields(cls)[0].name, None)


def test_every_field_is_required_and_positional():
    make = positional_constructor(Attachment)
    with pytest.raises(TypeError):
        make(0, "GPU-1")  # no defaults: the tick passes every field


@dataclass(frozen=True, slots=True)
class _Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@dataclass(frozen=True)
class _NoSlots:
    value: int


@dataclass(slots=True)
class _Mutable:
    value: int


@dataclass(frozen=True, slots=True)
class _Derived:
    value: int
    twice: int = field(init=False, default=0)


@pytest.mark.parametrize("cls", [_Checked, _NoSlots, _Mutable, _Derived, tuple])
def test_falls_back_to_the_constructor_where_bypassing_would_differ(cls):
    assert positional_constructor(cls) is cls
    with pytest.raises(ValueError):
        positional_constructor(_Checked)(-1)  # __post_init__ still runs
