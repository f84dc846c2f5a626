"""positional_constructor, both twins (the compiled slot store and the generated descriptor calls):
the same objects as the dataclass's own constructor, or that constructor; the compiled one refuses
what it cannot store and holds no reference it should not (every object freed)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from gpuflow.core import frozen
from gpuflow.core.frozen import positional_constructor, positional_constructor_py
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
@pytest.mark.parametrize("twin", [
    positional_constructor_py,
    pytest.param(positional_constructor, id="compiled",
                 marks=pytest.mark.skipif(not frozen.USING_EXTENSION, reason="the compiled twin is not in use"))])
def test_same_object_as_the_constructor(cls, values, twin):
    make = twin(cls)
    assert make is not cls  # the snapshot's classes are frozen, slotted, without __post_init__
    if twin is positional_constructor:
        assert type(make) is frozen.SlotMaker
    built, reference = make(*values), cls(*values)
    assert type(built) is cls
    assert built == reference and hash(built) == hash(reference) and repr(built) == repr(reference)
    assert dataclasses.astuple(built) == dataclasses.astuple(reference)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.__setattr__(dataclasses.fields(cls)[0].name, None)


@pytest.mark.parametrize("twin", [positional_constructor_py, positional_constructor])
def test_every_field_is_required_and_positional(twin):
    make = twin(Attachment)
    with pytest.raises(TypeError):
        make(0, "GPU-1")  # no defaults: the tick passes every field
    with pytest.raises(TypeError):
        make(0, "GPU-1", None, None, None, None, "one too many")


@pytest.mark.skipif(not frozen.USING_EXTENSION, reason="the compiled twin is not in use")
def test_the_compiled_twin_holds_each_value_once_and_frees_the_object():
    import gc
    import sys
    import weakref

    class Value:
        pass
    value = Value()
    before = sys.getrefcount(value)
    made = positional_constructor(Attachment)(0, "GPU-1", value, None, 99, None)
    after = sys.getrefcount(value)
    assert after == before + 1   # the slot's reference, and no other
    assert made.kind is value
    ref = weakref.ref(value)
    del made, value
    gc.collect()
    assert ref() is None   # the object gave its values back


@pytest.mark.skipif(frozen.SlotMaker is None, reason="the compiled twin is not built")
def test_the_compiled_twin_refuses_what_is_not_a_writable_object_slot():
    @dataclass(frozen=True, slots=True)
    class Plain:
        a: int
    with pytest.raises(TypeError, match="not a slot"):
        frozen.SlotMaker(Plain, ["a", "b"])
    with pytest.raises(TypeError, match="not a slot"):
        frozen.SlotMaker(Plain, ["__init__"])
    assert frozen.SlotMaker(Plain, ["a"])(5) == Plain(5)


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
    assert positional_constructor(cls) is cls and positional_constructor_py(cls) is cls
    with pytest.raises(ValueError):
        positional_constructor(_Checked)(-1)  # __post_init__ still runs


def test_the_compiled_twin_is_used_where_built_and_no_extensions_picks_the_generated_one():
    """Under GPUFLOW_REQUIRE_EXTENSIONS=1 or CI=true a missing build fails here instead of every
    snapshot object being made the slow way."""
    import os
    import subprocess
    import sys
    if os.environ.get("GPUFLOW_REQUIRE_EXTENSIONS") or os.environ.get("CI") == "true":
        assert frozen.SlotMaker is not None
    code = ("from gpuflow.core import frozen; from gpuflow.core.snapshot import Device; "
            "print(frozen.USING_EXTENSION, type(frozen.positional_constructor(Device)).__name__)")
    env = {k: v for k, v in os.environ.items() if k != "GPUFLOW_NO_EXTENSIONS"}
    picked = [subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                             check=True).stdout.strip() for extra in ({}, {"GPUFLOW_NO_EXTENSIONS": "1"})]
    assert picked == [("True SlotMaker" if frozen.SlotMaker is not None else "False function"), "False function"]
