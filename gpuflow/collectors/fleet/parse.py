"""An agent's frame, read into the plain form, checked and turned into the snapshot's objects.

Everything an agent sends is untrusted: each value is checked against the type the snapshot
declares for its field (an int is an int and not a bool, within 64 bits; a number is finite;
text is at most :data:`MAX_TEXT` characters; a list at most its cap in :data:`LIST_CAPS`), and
the first value that is not raises :class:`FrameRefused` with the place (``devices[3].health``),
never the value. Fields the hub does not know are ignored (a newer agent may send more); a field
an object needs and the frame lacks is refused. Every item is tagged with the name the hub gives
the host, whatever the frame says, so an agent cannot put items under another host's name.

The converters are made once, at import, from the snapshot's own field types
(``typing.get_type_hints``), so a field added to the snapshot is checked here without an edit:
one plan per class (:func:`_plan`: each field a scalar checked inline, a fixed tuple of scalars,
or a check of its own), from which both twins are made. The pure-Python twin
(:func:`converter_py`) is code of its own per class, one inline test per scalar field; the
compiled twin (``_checks_c``, picked unless ``GPUFLOW_NO_EXTENSIONS`` is set, as the other twins
are) runs the same plan in C and builds the place of a refusal only for the value refused, where
the pure-Python twin builds every value's.

Constraints: pure; runs on the hub's network thread for every frame of every agent, so a
converter is a flat list of per-field checks built once; both twins give the same objects and
the same refusals on every input (tests/fleet/test_check_twins.py).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import types
import typing
from typing import Any, Callable

from gpuflow.core.frozen import positional_constructor
from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import (
    Device, HostInfo, KernelStat, Lane, Problem, Process, RetiredTraced, Span, TracedProcess,
)

#: the longest text kept from an agent (a demangled kernel name can be this long)
MAX_TEXT = 65_536
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
#: the most items of each list the hub takes from one host, by field name
LIST_CAPS = {
    "devices": 256, "processes": 4096, "traced": 256, "traced_retired": 256, "problems": 256,
    "attachments": 256, "gpm_instances": 64, "nvlinks": 64, "clock_events": 64,
    "kernels": 16_384, "transfers": 16, "lanes": 4096, "spans": 65_536,
}
DEFAULT_CAP = 4096


class FrameRefused(ValueError):
    """A frame the hub does not take; the message says where, never what was there."""


#: as the other twins are picked: GPUFLOW_NO_EXTENSIONS=1 (any non-empty value) keeps the
#: pure-Python checks below even where ``_checks_c`` is built
NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"
try:
    from gpuflow.collectors.fleet import _checks_c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _checks_c = None


Check = Callable[[Any, str], Any]


def _int(v: Any, at: str) -> int:
    if type(v) is not int or not INT_MIN <= v <= INT_MAX:
        raise FrameRefused(f"{at}: expected a whole number")
    return v


def _float(v: Any, at: str) -> float:
    t = type(v)
    if t is float:
        if not math.isfinite(v):
            raise FrameRefused(f"{at}: expected a finite number")
        return v
    if t is int and INT_MIN <= v <= INT_MAX:
        return v
    raise FrameRefused(f"{at}: expected a number")


def _str(v: Any, at: str) -> str:
    if type(v) is not str or len(v) > MAX_TEXT:
        raise FrameRefused(f"{at}: expected text of at most {MAX_TEXT} characters")
    return sys.intern(v)


def _bool(v: Any, at: str) -> bool:
    if type(v) is not bool:
        raise FrameRefused(f"{at}: expected true or false")
    return v


def _optional(check: Check) -> Check:
    def optional(v: Any, at: str) -> Any:
        return None if v is None else check(v, at)
    return optional


def _items(check: Check, cap: int) -> Check:
    def items(v: Any, at: str) -> tuple:
        if type(v) is not list:
            raise FrameRefused(f"{at}: expected a list")
        if len(v) > cap:
            raise FrameRefused(f"{at}: more than {cap} entries")
        return tuple([check(x, f"{at}[{i}]") for i, x in enumerate(v)])
    return items


def _fixed(checks: list[Check]) -> Check:
    """A tuple of fixed length (a grid, a compute capability): a list of exactly those values."""
    n = len(checks)

    def fixed(v: Any, at: str) -> tuple:
        if type(v) is not list or len(v) != n:
            raise FrameRefused(f"{at}: expected a list of {n} values")
        return tuple([check(x, at) for check, x in zip(checks, v)])
    return fixed


class Checked:
    """A list field's items already checked into the snapshot's objects by this module's own
    converters (the hub's kernel tables, kernel_tables.py, keep a traced process's entries so from
    frame to frame): taken as they are. Nothing an agent sends can make one (a frame's plain form
    holds only what its JSON reading makes), so it is no way around a check."""

    __slots__ = ("items",)

    def __init__(self, items: tuple) -> None:
        self.items = items


#: the list fields that take a Checked (a traced process's kernel table and launch entries)
CHECKED_PARTS = frozenset({"kernels", "kernel_launches"})


def _or_checked(check: Check) -> Check:
    def checked(v: Any, at: str) -> Any:
        return v.items if isinstance(v, Checked) else check(v, at)
    return checked


def _or_columns(check: Check) -> Check:
    """A lane's spans: a SpanColumns as it is (only the hub's own row reader, lane_columns.py,
    makes one in a frame's plain form, and it checks every value as the Span check does), else
    each span checked into a Span."""
    def spans(v: Any, at: str) -> Any:
        return v if type(v) is SpanColumns else check(v, at)
    return spans


_SCALARS: dict[Any, Check] = {int: _int, float: _float, str: _str, bool: _bool}
#: the scalar types by the number the compiled checks know them by
SCALAR_KINDS = (int, float, str, bool)


class _Kit:
    """What a twin makes each kind of check with: parse.py's own closures, or ``_checks_c``'s."""

    def __init__(self, compiled: bool) -> None:
        self.compiled = compiled

    def scalar(self, tp: Any) -> Check:
        return _checks_c.Scalar(SCALAR_KINDS.index(tp)) if self.compiled else _SCALARS[tp]

    def optional(self, check: Check) -> Check:
        return _checks_c.Optional(check) if self.compiled else _optional(check)

    def items(self, check: Check, cap: int) -> Check:
        return _checks_c.Items(check, cap) if self.compiled else _items(check, cap)

    def taken(self, check: Check, kind: type) -> Check:
        """``check``, or an object of ``kind`` the hub made itself taken as it is (a Checked's
        items, a SpanColumns whole)."""
        if self.compiled:
            return _checks_c.Taken(check, kind, kind is Checked)
        return _or_checked(check) if kind is Checked else _or_columns(check)

    def fixed(self, checks: list[Check]) -> Check:
        if self.compiled:   # no snapshot field needs it (fixed tuples of scalars are checked inline)
            raise TypeError("no compiled check of a fixed tuple of that kind")
        return _fixed(checks)

    def converter(self, cls: type) -> Check:
        return _converter_c(cls) if self.compiled else converter_py(cls)


_PY, _C = _Kit(False), _Kit(True)


def _check_for(tp: Any, name: str, kit: _Kit = _PY) -> Check:
    """The check of a value whose declared type is ``tp`` (a field named ``name``)."""
    if tp in _SCALARS:
        return kit.scalar(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        columns = SpanColumns in rest
        if columns:   # a lane's spans: columns as the hub's row reader made them, else Span objects
            rest = [a for a in rest if a is not SpanColumns]
        inner = _check_for(rest[0] if len(rest) == 1 else typing.Union[tuple(rest)], name, kit)
        inner = kit.taken(inner, SpanColumns) if columns else inner
        return kit.optional(inner) if type(None) in args else inner
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            items = kit.items(_check_for(args[0], name, kit), LIST_CAPS.get(name, DEFAULT_CAP))
            return kit.taken(items, Checked) if name in CHECKED_PARTS else items
        if args and Ellipsis not in args:
            return kit.fixed([_check_for(a, name, kit) for a in args])
    if dataclasses.is_dataclass(tp):
        return kit.converter(tp)
    raise TypeError(f"no check for the type {tp!r} of {name}")   # a snapshot type not handled here


#: the inline check of a scalar field, as code ({x}: the value, {where}: its place); None allowed
#: where the field is optional
_INLINE = {
    int: ("type({x}) is not _int or not _MIN <= {x} <= _MAX", "expected a whole number"),
    str: ("type({x}) is not _str or len({x}) > _TEXT", f"expected text of at most {MAX_TEXT} characters"),
    bool: ("type({x}) is not _bool", "expected true or false"),
    float: ("not ((type({x}) is _float and _finite({x})) or (type({x}) is _int and _MIN <= {x} <= _MAX))",
            "expected a finite number"),
}


def _scalar(tp: Any) -> tuple[Any, bool] | None:
    """(the scalar type, whether None is allowed) of a field checked inline, or None."""
    if tp in _INLINE:
        return tp, False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) == 1 and rest[0] in _INLINE and type(None) in typing.get_args(tp):
            return rest[0], True
    return None


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """(``T``, True) for ``T | None`` (None then passes as it is), else (``tp``, False)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return tp, False


#: how a field is checked (the compiled checks know them by these numbers): a scalar inline, a
#: fixed tuple of scalars inline, or a check of its own
SCALAR, FIXED, CHECK = 0, 1, 2


def _plan(cls: type, kit: _Kit) -> list[tuple[str, Any, int, Any, bool]]:
    """Per field of ``cls``: (its name, its default or MISSING, how it is checked, what with (a
    scalar type, a tuple of them, a check of ``kit``'s), whether None passes). Both twins' converters
    are made from it."""
    hints = typing.get_type_hints(cls, localns={"SpanColumns": SpanColumns})
    plan = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = dataclasses.MISSING
        scalar = _scalar(hints[f.name])
        if scalar is not None:
            plan.append((f.name, default, SCALAR, scalar[0], scalar[1]))
            continue
        inner, optional = _unwrap_optional(hints[f.name])
        args = typing.get_args(inner)
        if typing.get_origin(inner) is tuple and args and all(a in _INLINE for a in args):
            # a grid, a block, a compute capability: every span has two, so inline too
            plan.append((f.name, default, FIXED, args, optional))
        else:
            plan.append((f.name, default, CHECK, _check_for(inner, f.name, kit), optional))
    return plan


_CONVERTERS: dict[type, Check] = {}
_CONVERTERS_C: dict[type, Check] = {}


def converter(cls: type) -> Check:
    """The check that turns a plain dict into a ``cls`` (``check(v, at, host=...)``), of the twin
    in use."""
    return _KIT.converter(cls)


def _converter_c(cls: type) -> Check:
    """The compiled twin's, or the pure-Python one's for a class it cannot check (a field of a
    kind it has no check for; no snapshot class has one)."""
    made = _CONVERTERS_C.get(cls)
    if made is None:
        try:
            plan = [(name, default, how, SCALAR_KINDS.index(w) if how == SCALAR else
                     tuple(SCALAR_KINDS.index(a) for a in w) if how == FIXED else w, optional)
                    for name, default, how, w, optional in _plan(cls, _C)]
            made = _checks_c.Converter(positional_constructor(cls), plan)
        except TypeError:
            made = converter_py(cls)
        _CONVERTERS_C[cls] = made
    return made


def converter_py(cls: type) -> Check:
    """The pure-Python twin: made once per class as code of its own (one inline test per scalar
    field, a call per nested one), as dataclasses makes ``__init__``."""
    made = _CONVERTERS.get(cls)
    if made is not None:
        return made
    env: dict[str, Any] = {"_make": positional_constructor(cls), "_R": FrameRefused, "_M": dataclasses.MISSING,
                           "_dict": dict, "_list": list, "_int": int, "_str": str, "_bool": bool, "_float": float,
                           "_finite": math.isfinite, "_MIN": INT_MIN, "_MAX": INT_MAX, "_TEXT": MAX_TEXT,
                           "_intern": sys.intern}
    lines = ["def convert(v, at, host=_M):", "    if type(v) is not _dict:",
             "        raise _R(at + ': expected an object')", "    g = v.get"]
    plan = _plan(cls, _PY)
    for i, (name, default, how, w, optional) in enumerate(plan):
        x = f"x{i}"
        # an item's host is the one the hub gives it, whatever the frame says
        lines.append(f"    {x} = g({name!r}, _M) if host is _M else host" if name == "host" else
                     f"    {x} = g({name!r}, _M)")
        lines.append(f"    if {x} is _M:")
        if default is not dataclasses.MISSING:
            env[f"_d{i}"] = default
            lines.append(f"        {x} = _d{i}")
        else:
            lines.append(f"        raise _R(at + '.{name}: missing')")
        if how == SCALAR:
            test, says = _INLINE[w]
            test = test.format(x=x)
            lines.append(f"    elif {f'{x} is not None and ({test})' if optional else test}:")
            lines.append(f"        raise _R(at + '.{name}: {says}')")
            if w is str:   # one copy of each text however many hosts and frames say it
                lines.append(f"    elif {x} is not None:" if optional else "    else:")
                lines.append(f"        {x} = _intern({x})")
            continue
        lines.append(f"    elif {x} is not None:" if optional else "    else:")
        if how == FIXED:
            tests = [_INLINE[a][0].format(x=f"{x}[{k}]") for k, a in enumerate(w)]
            lines.append(f"        if type({x}) is not _list or len({x}) != {len(w)} or "
                         + " or ".join(f"({t})" for t in tests) + ":")
            lines.append(f"            raise _R(at + '.{name}: expected a list of {len(w)} values')")
            lines.append(f"        {x} = tuple({x})")
        else:
            env[f"_c{i}"] = w
            lines.append(f"        {x} = _c{i}({x}, at + '.{name}')")
    lines.append("    return _make(" + ", ".join(f"x{i}" for i in range(len(plan))) + ")")
    exec("\n".join(lines), env)  # noqa: S102 - code made from the dataclass's own field names
    convert = env["convert"]
    convert.__qualname__ = convert.__name__ = f"convert_{cls.__name__}"
    _CONVERTERS[cls] = convert
    return convert


#: the twin in use: the compiled checks where they are built, unless GPUFLOW_NO_EXTENSIONS
_KIT = _C if _checks_c is not None and not NO_EXTENSIONS else _PY
USING_EXTENSION = _KIT is _C
if _checks_c is not None:
    _checks_c.configure(FrameRefused, MAX_TEXT, [_INLINE[t][1] for t in SCALAR_KINDS], dataclasses.MISSING)


def _tagged(convert: Callable[..., Any], items: Any, name: str, host: str) -> tuple:
    """Each item of ``items`` converted, tagged with ``host`` (the pure-Python twin's)."""
    cap = LIST_CAPS.get(name, DEFAULT_CAP)
    if type(items) is not list:
        raise FrameRefused(f"{name}: expected a list")
    if len(items) > cap:
        raise FrameRefused(f"{name}: more than {cap} entries")
    return tuple([convert(x, f"{name}[{i}]", host) for i, x in enumerate(items)])


def _host_list(cls: type, name: str, kit: _Kit) -> Callable[[Any, str], tuple]:
    """``check(items, host)``: a frame's list ``name`` of ``cls``, each item tagged with ``host``."""
    convert = kit.converter(cls)
    if kit.compiled and isinstance(convert, _checks_c.Check):   # not a class it fell back on
        items = _checks_c.Items(convert, LIST_CAPS.get(name, DEFAULT_CAP))
        return lambda v, host: items.tagged(v, name, host)
    return lambda v, host: _tagged(convert, v, name, host)


_HOST, _PROBLEM = converter(HostInfo), converter(Problem)
_KERNEL, _LANE, _SPAN = converter(KernelStat), converter(Lane), converter(Span)
_PROBLEMS = _check_for(tuple[Problem, ...], "problems", _KIT)
_DEVICES, _PROCESSES = _host_list(Device, "devices", _KIT), _host_list(Process, "processes", _KIT)
_TRACED, _RETIRED = _host_list(TracedProcess, "traced", _KIT), _host_list(RetiredTraced, "traced_retired", _KIT)


def host_info(frame: dict[str, Any]) -> tuple[HostInfo, tuple[Problem, ...]]:
    """The frame's host object and its problems."""
    host = frame.get("host")
    if type(host) is not dict:
        raise FrameRefused("host: expected an object")
    problems = _PROBLEMS(host.get("problems", []), "host.problems")
    return _HOST(host, "host"), problems


def devices(items: Any, host: str) -> tuple[Device, ...]:
    return _DEVICES(items, host)


def processes(items: Any, host: str) -> tuple[Process, ...]:
    return _PROCESSES(items, host)


def traced(items: Any, host: str) -> tuple[TracedProcess, ...]:
    return _TRACED(items, host)


def retired(items: Any, host: str) -> tuple[RetiredTraced, ...]:
    return _RETIRED(items, host)
