"""Positional constructors for the snapshot's frozen dataclasses that skip ``__init__``'s setattr calls.

A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__`` (it must get
past the frozen ``__setattr__``): ~90 ns a field, so ~1.6 µs for a 17-field
:class:`~gpuflow.core.snapshot.Device`. Collectors that make many snapshot objects per frame (a
poll tick's devices and processes, a traced process's new spans) use these instead. :func:`positional_constructor` returns a function taking the fields in declaration
order that creates the object with ``object.__new__`` and stores each field through its slot
descriptor directly (~45 ns a field). The result is the same object ``cls(*args)`` builds:
same class, same slot values, so equal, same hash and repr.

It falls back to ``cls`` itself (the ordinary constructor) for any class where that would not
hold: not a dataclass, not frozen, without slots, with a ``__post_init__``, or with fields that
are not all ``__init__`` parameters.

The compiled twin (``_slots_c.SlotMaker``) stores each field at its slot's offset instead of
calling the descriptor (~5 ns a field against ~140: a hub makes ~110 fields' objects a GPU of
every agent's frame); it is used when it loads and accepts the class, unless
``GPUFLOW_NO_EXTENSIONS`` is set, as the other twins are picked. :func:`positional_constructor_py`
is the pure-Python one, always.

Constraints: on collectors' hot paths; the function is generated once per class at import (as
dataclasses generates ``__init__``), never per call; no defaults: every field is passed, in order.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable

NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"
try:
    from gpuflow.core._slots_c import SlotMaker  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the build
    SlotMaker = None
USING_EXTENSION = SlotMaker is not None and not NO_EXTENSIONS


def positional_constructor(cls: type) -> Callable[..., Any]:
    """``make(*values)`` equivalent to ``cls(*values)`` (every field, in order), built faster."""
    if USING_EXTENSION and _can_bypass(cls):
        try:
            return SlotMaker(cls, [f.name for f in dataclasses.fields(cls)])
        except TypeError:   # a field that is not a plain object slot: the twin's way
            pass
    return positional_constructor_py(cls)


def positional_constructor_py(cls: type) -> Callable[..., Any]:
    """The pure-Python twin: a generated function calling each field's slot descriptor."""
    if not _can_bypass(cls):
        return cls
    names = [f.name for f in dataclasses.fields(cls)]
    params = ", ".join(names)
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = [f"def make({params}):", "    obj = _new(_cls)"]
    for i, name in enumerate(names):
        env[f"_set{i}"] = cls.__dict__[name].__set__
        lines.append(f"    _set{i}(obj, {name})")
    lines.append("    return obj")
    exec("\n".join(lines), env)  # noqa: S102 - fixed text built from the dataclass's own field names
    make = env["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__doc__ = f"{cls.__name__}({params}), without __init__'s setattr calls."
    return make


def _can_bypass(cls: type) -> bool:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__post_init__"):
        return False
    fields = dataclasses.fields(cls)
    slots = set(getattr(cls, "__slots__", ()))
    for f in fields:
        if not f.init or f.name not in slots or not hasattr(cls.__dict__.get(f.name), "__set__"):
            return False
    return True
