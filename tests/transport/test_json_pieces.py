"""json_pieces.encode: the same text as one json.dumps, made of small encoder calls.

The agent's JSON bodies are encoded in pieces so that another thread (a /healthz, the page) gets
the GIL between them; the pieces must join to exactly what json.dumps gives, for every shape the
agent writes and for the corners json itself has (non-string keys, non-finite floats, tuples,
unicode), and no one call may get a whole large document.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from gpuflow.transport import json_pieces
from gpuflow.transport.frames import dumps


def reference(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def random_doc(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 4 else 5)
    if kind == 0:
        return rng.randrange(-10**12, 10**12)
    if kind == 1:
        return rng.random() * 10 ** rng.randrange(-5, 20)
    if kind == 2:
        return "".join(rng.choice('ab"\\\n\u00e9\u4e2d\U0001f600 <>&') for _ in range(rng.randrange(12)))
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return []
    if kind in (5, 6):
        sizes = [0, 1, 3, 255, 256, 257, 600] if depth == 3 else [0, 1, 3, 7]   # long lists of scalars
        return [random_doc(rng, depth + 1) for _ in range(rng.choice(sizes))]
    if kind == 7:
        return tuple(random_doc(rng, depth + 1) for _ in range(rng.randrange(300 if depth == 3 else 5)))
    keys = [rng.choice(["a", "é", 'q"', 1, 2.5, True, None]) for _ in range(rng.randrange(6))]
    return {k: random_doc(rng, depth + 1) for k in keys}


def test_generated_documents_reach_every_branch():
    """The generator makes long flat lists (chunked), nested ones (split item by item) and dicts
    holding containers, within the seeds the comparison runs."""
    docs = [random_doc(random.Random(seed)) for seed in range(300)]
    text = "".join(reference(d) for d in docs)
    assert len(text) < 20_000_000
    def walk(o, found):
        if isinstance(o, (list, tuple)):
            found.add("long" if len(o) > json_pieces.PIECE_ITEMS else "short")
            if json_pieces._holds_containers(o):
                found.add("nested list")
            for v in o:
                walk(v, found)
        elif isinstance(o, dict):
            if json_pieces._holds_containers(o):
                found.add("nested dict")
            for v in o.values():
                walk(v, found)
        return found
    found = set()
    for d in docs:
        walk(d, found)
    assert found == {"long", "short", "nested list", "nested dict"}


@pytest.mark.parametrize("seed", range(300))
def test_pieces_join_to_exactly_what_json_dumps_gives(seed):
    doc = random_doc(random.Random(seed))
    assert json_pieces.encode(doc) == reference(doc)


def snapshot_like(processes: int, kernels: int) -> dict:
    return {"timestamp": 1.5, "devices": [{"index": i, "util": 50} for i in range(8)],
            "traced": [{"pid": p, "kernels": [{"name": "k" * 900 + str(i), "count": i, "mean_ns": 1.5}
                                              for i in range(kernels)],
                        "lanes": [{"stream": s, "spans": [[i, i + 1, 3] for i in range(500)]} for s in range(4)]}
                       for p in range(processes)]}


def test_a_large_snapshot_is_encoded_in_small_calls(monkeypatch):
    """A 4 MB document: every encoder call gets at most PIECE_ITEMS kernels' worth (~240 KB)."""
    doc = snapshot_like(1, 4000)
    whole = reference(doc)
    assert len(whole) > 3_500_000
    sizes: list[int] = []
    real = json_pieces._ENCODE

    def counting(obj):
        text = real(obj)
        sizes.append(len(text))
        return text
    monkeypatch.setattr(json_pieces, "_ENCODE", counting)
    assert json_pieces.encode(doc) == whole
    assert max(sizes) < 300_000 and len(sizes) > 15


def test_non_finite_floats_raise_as_json_does_and_dumps_turns_them_into_null():
    doc = {"a": [1.0] * 40 + [math.inf], "b": {"c": [math.nan]}}
    with pytest.raises(ValueError):
        json_pieces.encode(doc)
    assert json.loads(dumps(doc)) == {"a": [1.0] * 40 + [None], "b": {"c": [None]}}


def test_the_members_that_hold_no_container_go_in_one_call(monkeypatch):
    """A device's two dozen readings beside its links are one encoder call, not one a reading (a
    hub's page had a host's eight devices in some 300 calls, 2.2 ms against json.dumps' 0.45)."""
    device = {"index": 0, "uuid": "GPU-a", **{f"reading_{i}": i * 1.5 for i in range(24)}, "gpm": {"sm": 1.0},
              "links": {"pcie_gen": 5, "nvlinks": [{"link": k, "state": "up"} for k in range(4)]}, "host": "h"}
    doc = {"devices": [device] * 8}
    calls: list[str] = []
    real = json_pieces._ENCODE
    monkeypatch.setattr(json_pieces, "_ENCODE", lambda obj: calls.append(real(obj)) or calls[-1])
    assert json_pieces.encode(doc) == reference(doc)
    assert len(calls) <= 8 * 6 + 2
