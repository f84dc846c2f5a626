"""Name chunks out of order, overlapping, oversized, lost, doubled, interleaved and redefined, split
across the ring's end and across drains — against a reference model of the documented rules.

The model (docs/decoder.md, "Names" and the ``bad_name_chunk`` / ``incomplete_name`` /
``name_conflict`` rows) is written out here from the documentation: a name is text assembled
from chunks that each start where the text so far ends, all carrying the same ``total_len``
(at most 4096), the last one flagged; anything else is counted by reason and the partial text is
discarded. A record that uses a name not completely defined is ``undefined_name``.
"""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringfuzz as F

from gpuflow.collectors.cupti._layout import LIMIT_CAPS

#: the rules of the format itself, with the decoder's caps (docs/decoder.md, "Caps") out of reach
UNCAPPED = LIMIT_CAPS._asdict()
KEEP = F.FLAG_NAME_TRUNCATED | F.FLAG_NAME_STREAM


def model(records: list[bytes]) -> tuple[dict[int, tuple[bytes, int]], Counter, int, set[int]]:
    """(names, invalid reasons, pending count, kernel ids counted) for chunks and kernel records."""
    names: dict[int, tuple[bytes, int]] = {}
    partial: dict[int, tuple[bytes, int]] = {}  # id -> (text so far, total_len)
    invalid: Counter = Counter()
    counted: set[int] = set()
    for rec in records:
        rtype = int.from_bytes(rec[:2], "little")
        if rtype == F.REC_KERNEL:
            nid = F.KERNEL_PAYLOAD.unpack_from(rec, 32)[1]
            if nid == 0 or nid in names:
                counted.add(nid)
            else:
                invalid["undefined_name"] += 1
            continue
        _t, flags, nid, offset, total, text = F.NAME.unpack(rec)
        if not 0 < nid < F.NAME_ID_LIMIT:
            invalid["bad_name_chunk"] += 1
            continue
        so_far = partial.pop(nid, None)  # any chunk for an id ends what was pending, unless it fits
        starts_fresh = so_far is None
        fits = total <= F.NAME_MAX and (offset < total or offset == total == 0) and (
            offset == 0 if starts_fresh else (so_far[1] == total and offset == len(so_far[0])))
        if not fits:
            invalid["bad_name_chunk"] += 1
            continue
        got = (b"" if starts_fresh else so_far[0]) + text[:min(48, total - offset)]
        if not flags & F.FLAG_NAME_LAST:
            partial[nid] = (got, total)
        elif len(got) != total:
            invalid["incomplete_name"] += 1
        elif nid in names and names[nid] != (got, flags & KEEP):
            invalid["name_conflict"] += 1
        else:
            names.setdefault(nid, (got, flags & KEEP))
    return names, invalid, len(partial), counted


texts = st.one_of(st.sampled_from([b"", b"k", b"_Z6kernelPfi", b"a" * 48, b"b" * 49, b"c" * 96, b"d" * 4096,
                                   b"e" * 4097]), st.binary(max_size=300))
mangles = st.sampled_from(["none", "shuffle", "overlap", "oversize", "lose", "double", "flip_last", "total",
                           "interleave", "redefine"])


@st.composite
def name_programs(draw) -> list[bytes]:
    recs: list[bytes] = []
    used = []
    for nid in range(1, draw(st.integers(1, 6)) + 1):
        nid = draw(st.sampled_from([nid, nid, nid, 0, F.NAME_ID_LIMIT, F.NAME_ID_LIMIT - 1]))
        text = draw(texts)
        chunks = F.name_chunks(nid, text, draw(st.sampled_from([0, F.FLAG_NAME_STREAM])))
        how = draw(mangles)
        if how == "shuffle":
            chunks = draw(st.permutations(chunks))
        elif how == "overlap":
            i = draw(st.integers(0, len(chunks) - 1))
            _t, f, n, off, total, txt = F.NAME.unpack(chunks[i])
            shift = draw(st.sampled_from([-47, -24, -1, 1, 24, 47]))
            chunks.insert(i + 1, F.NAME.pack(F.REC_NAME_CHUNK, f & ~F.FLAG_NAME_LAST, n, max(0, off + shift), total, txt))
        elif how == "oversize":
            i = draw(st.integers(0, len(chunks) - 1))
            _t, f, n, off, total, txt = F.NAME.unpack(chunks[i])
            chunks[i] = F.NAME.pack(F.REC_NAME_CHUNK, f, n, draw(st.sampled_from([off, total, total + 48, 1 << 31])),
                                    draw(st.sampled_from([total, F.NAME_MAX + 1, 1 << 31, (1 << 32) - 1])), txt)
        elif how == "lose" and len(chunks) > 1:
            del chunks[draw(st.integers(0, len(chunks) - 1))]
        elif how == "double":
            i = draw(st.integers(0, len(chunks) - 1))
            chunks.insert(i, chunks[i])
        elif how == "flip_last":
            i = draw(st.integers(0, len(chunks) - 1))
            _t, f, n, off, total, txt = F.NAME.unpack(chunks[i])
            chunks[i] = F.NAME.pack(F.REC_NAME_CHUNK, f ^ F.FLAG_NAME_LAST, n, off, total, txt)
        elif how == "total":
            i = draw(st.integers(0, len(chunks) - 1))
            _t, f, n, off, total, txt = F.NAME.unpack(chunks[i])
            chunks[i] = F.NAME.pack(F.REC_NAME_CHUNK, f, n, off, max(0, total + draw(st.sampled_from([-1, 1, 48]))), txt)
        elif how == "interleave" and recs:
            i = draw(st.integers(0, len(chunks)))
            other = draw(st.integers(1, 6))
            chunks[i:i] = F.name_chunks(other, draw(texts))
        elif how == "redefine":
            chunks += F.name_chunks(nid, draw(st.sampled_from([text, text + b"!", b""])),
                                    draw(st.sampled_from([0, F.FLAG_NAME_STREAM])))
        recs += chunks
        used.append(nid)
        recs += [F.kernel(n) for n in draw(st.lists(st.sampled_from(used + [0, 99]), max_size=3))]
    return recs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=name_programs(), start=st.integers(0, 1023), batches=st.lists(st.integers(1, 9), max_size=8))
def test_names_follow_the_documented_rules_whatever_the_chunks(twin, recs, start, batches):
    names, invalid, pending, counted = model(recs)
    steps = [("drain", n) for n in batches] + [("drain", None)]
    out = F.run_case(twin, F.Case(tail0=1024 + start, records=recs, steps=steps, caps=UNCAPPED))[-2]
    assert out["names"] == {nid: (text.decode("utf-8", "replace"), flags) for nid, (text, flags) in names.items()}
    assert out["counters"]["invalid"] == dict(invalid)
    assert out["counters"]["pending_names"] == pending
    assert {k[0] for k in out["kernels"]} == counted


def test_chunks_claiming_a_long_name_cost_what_arrived_not_what_they_claim(twin):
    """A ring of first chunks that each announce a 4096-byte name: memory follows the 48 bytes
    received, not the 4096 claimed (the compiled twin used to allocate the whole name up front:
    a 4 MiB ring of such chunks cost 261 MB)."""
    cap = 1 << 14
    recs = [F.chunk(i + 1, 0, F.NAME_MAX, b"a" * 48, 0) for i in range(cap)]
    buf = F.Case(capacity=cap, records=recs).build()

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    dec = twin(buf, max_names=cap, max_pending_names=cap)  # each a name of its own, all pending
    before = rss()
    assert dec.drain() == cap
    grown = rss() - before
    assert dec.counters()["pending_names"] == cap
    assert grown < 12 << 20, f"{grown / 2**20:.1f} MiB for {cap} pending names"  # was 64 MiB (compiled)
    dec.detach()


def test_random_name_traffic_across_many_drains():
    """A deterministic long run of the model against both twins (when built) with many names."""
    from gpuflow.collectors.cupti import decoder as D

    rng = random.Random(11)
    recs: list[bytes] = []
    for nid in range(1, 400):
        chunks = F.name_chunks(nid, rng.randbytes(rng.randrange(0, 500)))
        if rng.random() < 0.3:
            rng.shuffle(chunks)
        recs += chunks + [F.kernel(nid)]
    recs = recs[:4096]
    names, invalid, pending, counted = model(recs)
    steps = [("drain", rng.randrange(1, 50)) for _ in range(300)] + [("drain", None)]
    for cls in filter(None, (D.RingDecoderC, D.RingDecoderPy)):
        out = F.run_case(cls, F.Case(capacity=4096, tail0=4096 * 5 + 77, records=recs, steps=steps,
                                     caps=UNCAPPED))[-2]
        assert len(out["names"]) == len(names) and out["counters"]["invalid"] == dict(invalid)
        assert {k[0] for k in out["kernels"]} == counted and out["counters"]["pending_names"] == pending
