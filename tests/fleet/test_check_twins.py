"""parse.py's two twins of the hub's frame checks, the pure-Python converters and the compiled
``_checks_c``, on the same inputs: every snapshot class's plain form made at random from its own
field types, valid and then made hostile one value at a time (a wrong type, a bool for a number,
a number past 64 bits, a text one character too long, NaN, a missing field, a list for an object
or an object for a list, a list past its cap). Each input gives both twins the same objects (their
texts interned) or the same refusal, word for word."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import types
import typing

import pytest

from gpuflow.collectors.fleet import parse
from gpuflow.core import snapshot as S
from gpuflow.core.recorded import SpanColumns

pytestmark = pytest.mark.c_extension
if parse._checks_c is None:
    pytest.skip("the compiled checks are not built", allow_module_level=True)

CLASSES = [S.Device, S.Process, S.TracedProcess, S.RetiredTraced, S.HostInfo, S.Problem, S.KernelStat,
           S.KernelLaunch, S.Lane, S.Span]
HOSTILE = [None, True, False, 0, -1, 2 ** 63, -(2 ** 63) - 1, 1.5, math.nan, math.inf, -math.inf, "",
           "x" * (parse.MAX_TEXT + 1), "text", [], [1], {}, {"a": 1}]


def _hints(cls: type) -> dict[str, typing.Any]:
    return typing.get_type_hints(cls, localns={"SpanColumns": SpanColumns})


def plain(tp: typing.Any, rng: random.Random, depth: int = 0) -> typing.Any:
    """A valid plain value of type ``tp``."""
    if tp is int:
        return rng.choice([0, 1, 7, -5, 2 ** 63 - 1, -(2 ** 63)])
    if tp is float:
        return rng.choice([0.0, 0.5, -2.25, 3, 1e300, 2 ** 63 - 1])
    if tp is str:
        return rng.choice(["", "a", "GPU-0", "über", "x" * parse.MAX_TEXT])
    if tp is bool:
        return rng.random() < 0.5
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None) and a is not SpanColumns]
        if type(None) in args and rng.random() < 0.3:
            return None
        return plain(rng.choice(rest), rng, depth)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return [plain(args[0], rng, depth + 1) for _ in range(rng.randint(0, 3 if depth < 2 else 1))]
        return [plain(a, rng, depth + 1) for a in args]
    if dataclasses.is_dataclass(tp):
        out = {}
        for f in dataclasses.fields(tp):
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            if has_default and rng.random() < 0.2:
                continue   # left out: its default
            out[f.name] = plain(_hints(tp)[f.name], rng, depth + 1)
        if rng.random() < 0.2:
            out["a_field_of_a_newer_agent"] = [1, {"x": 2}]
        return out
    raise AssertionError(f"no plain value for {tp!r}")


def places(doc: typing.Any, path: tuple = ()) -> list[tuple]:
    """Every place in ``doc`` (a key of an object, an index of a list)."""
    out = [path]
    if type(doc) is dict:
        for k, v in doc.items():
            out += places(v, path + (k,))
    elif type(doc) is list:
        for i, v in enumerate(doc):
            out += places(v, path + (i,))
    return out


def made_hostile(doc: typing.Any, rng: random.Random) -> typing.Any:
    """``doc`` with one place made hostile (a copy)."""
    import copy
    doc = copy.deepcopy(doc)
    path = rng.choice(places(doc))
    if not path:
        return rng.choice(HOSTILE)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if type(parent) is dict and rng.random() < 0.25:
        del parent[last]
    elif type(parent[last]) is list and rng.random() < 0.2:
        parent[last] = parent[last] * 20000 if parent[last] else [0] * 70000   # past any cap
    else:
        parent[last] = rng.choice(HOSTILE)
    return doc


def outcome(check, *args) -> tuple:
    try:
        return ("made", check(*args))
    except parse.FrameRefused as exc:
        return ("refused", str(exc))


def texts(o: typing.Any) -> list[str]:
    if isinstance(o, str):
        return [o]
    if isinstance(o, tuple):
        return [t for x in o for t in texts(x)]
    if dataclasses.is_dataclass(o):
        return [t for f in dataclasses.fields(o) for t in texts(getattr(o, f.name))]
    return []


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_both_twins_make_the_same_objects_or_refuse_in_the_same_words(cls):
    py, c = parse.converter_py(cls), parse._converter_c(cls)
    assert isinstance(c, parse._checks_c.Converter)
    rng = random.Random(cls.__name__)
    refused = 0
    for n in range(400):
        doc = plain(cls, rng)
        if n % 2:
            doc = made_hostile(doc, rng)
        host = () if rng.random() < 0.5 else ("node-h",)
        a, b = outcome(py, doc, "frame.x[2]", *host), outcome(c, doc, "frame.x[2]", *host)
        assert a == b, (doc, a, b)
        if a[0] == "made":
            assert type(a[1]) is type(b[1]) is cls
            assert all(sys.intern(t) is t for t in texts(b[1]))
        else:
            refused += 1
            assert a[1].startswith("frame.x[2]")
    assert 50 < refused < 400   # both kinds of input were tried


def test_fields_are_found_whatever_the_order_the_identity_or_the_number_of_the_keys():
    """The compiled converter finds fields by the order and identity of the keys it saw before
    (orjson gives a key's text the same object frame after frame), and by a lookup otherwise: the
    same objects or refusals as the pure-Python twin for keys in another order, parsed anew (the
    same objects) or made anew (others), not text, and for dicts of many more keys than fields."""
    import orjson
    py, c = parse.converter_py(S.Device), parse._converter_c(S.Device)
    rng = random.Random("key order")
    for n in range(300):
        doc = plain(S.Device, rng)
        if n % 3 == 1:
            doc = made_hostile(doc, rng)
        if type(doc) is not dict:
            assert outcome(py, doc, "d", "h") == outcome(c, doc, "d", "h")
            continue
        items = list(doc.items())
        try:
            parsed = [orjson.loads(orjson.dumps(doc)) for _ in range(2)]
        except TypeError:   # a number past 64 bits, which orjson does not write
            parsed = []
        variants = [doc, *parsed, dict(reversed(items)), dict(rng.sample(items, len(items))),
                    {"".join(k): v for k, v in items},   # equal keys, other objects
                    {**doc, 7: "not text", (1, 2): None},
                    {**{f"junk{i}": i for i in range(600)}, **doc},   # the lookup per field
                    {k: v for k, v in items[1:]}]   # one field fewer
        for v in variants:
            a, b = outcome(py, v, "d", "h"), outcome(c, v, "d", "h")
            assert a == b, (v, a, b)


@pytest.mark.parametrize("cls, name", [(S.Device, "devices"), (S.Process, "processes"), (S.TracedProcess, "traced"),
                                       (S.RetiredTraced, "traced_retired")])
def test_a_frames_lists_are_checked_and_tagged_alike(cls, name):
    py, c = parse._host_list(cls, name, parse._PY), parse._host_list(cls, name, parse._C)
    rng = random.Random(name)
    for n in range(200):
        items = [plain(cls, rng) for _ in range(rng.randint(0, 3))]
        if n % 2:
            items = made_hostile(items, rng)
        a, b = outcome(py, items, "node-h"), outcome(c, items, "node-h")
        assert a == b, (items, a, b)
        if a[0] == "made":
            assert all(getattr(o, "host", "node-h") == "node-h" for o in b[1])
    assert outcome(c, [{}] * (parse.LIST_CAPS[name] + 1), "h") == ("refused", f"{name}: more than "
                                                                   f"{parse.LIST_CAPS[name]} entries")


def test_what_the_hub_made_itself_is_taken_as_it_is_by_both():
    kernels = (S.KernelStat(name="k", mangled="_Z1kv", count=1, total_ns=5, min_ns=5, max_ns=5),)
    columns = SpanColumns.from_spans([S.Span(seq=1, start_us=10, dur_ns=5, kind="kernel", name="k")])
    for kit in (parse._PY, parse._C):
        check = parse._check_for(tuple[S.KernelStat, ...], "kernels", kit)
        assert check(parse.Checked(kernels), "t.kernels") is kernels
        assert parse._check_for(_hints(S.Lane)["spans"], "spans", kit)(columns, "l.spans") is columns
        with pytest.raises(parse.FrameRefused, match=r"^t.kernels\[0\]: expected an object$"):
            check([kernels[0]], "t.kernels")   # an object not made by the hub's own checks is no entry


def test_the_twin_in_use_is_the_compiled_one_unless_told_otherwise():
    assert parse.USING_EXTENSION is (not parse.NO_EXTENSIONS)
    assert isinstance(parse.converter(S.Device), parse._checks_c.Converter) is parse.USING_EXTENSION
