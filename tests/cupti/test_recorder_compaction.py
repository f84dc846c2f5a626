"""Compaction of the flight recorder's chunks, against the model of every record (both twins).

The drain's pass writes each timed execution as a raw row; after the pass, ``Retention.compact``
turns each sealed chunk into its columns and distinct shapes (docs/recorder.md, "What is kept").
Compaction must change no answer (windows, buckets, figures but the bytes), count exactly what
_retain_layout's formulas say for each form, keep the twins equal however drains and compactions
interleave, and never disturb a reader that is reading the raw rows it replaces.
"""

from __future__ import annotations

import threading
import time

import pytest
import ringfuzz as F

from gpuflow.collectors.cupti import _retain_layout as RL

from .test_recorder import (CUPTI, OFFSET, WALL, Execution, check_window, drained, in_window, make_ring,
                            retention_for)


def answers(dec, model, widths=(None, 7, 1000)):
    """Every window the tests ask, over the whole run and a stretch of it, in exact and reduced form."""
    first, last = model[0].start_us, model[-1].start_us + 1
    return [dec.window(a, b, OFFSET, width) for a, b in ((first, last), (first + 20_000, first + 90_000))
            for width in widths]


def without_bytes(figures: dict) -> dict:
    return {key: value for key, value in figures.items() if key != "bytes"}


def test_compaction_changes_no_answer_and_counts_each_form_exactly(decoder_impl):
    buf, model = make_ring(9_000, seed=11, long_every=61, jump_every=2_000)
    retention = retention_for(decoder_impl.cls, 1 << 30, 1024)
    dec = drained(decoder_impl.cls, buf, retention, step=500)
    raw_answers, raw_figures = answers(dec, model), dec.retained()
    budget = retention.figures()
    # all but the chunk being written are sealed and raw, each counting its raw rows
    assert budget["raw_chunks"] == budget["chunks"] - 1
    assert budget["used_bytes"] == raw_figures["bytes"] == budget["chunks"] * RL.raw_chunk_bytes(1024)
    assert retention.compact() == budget["chunks"] - 1
    assert retention.figures()["raw_chunks"] == 0 and retention.compact() == 0
    assert answers(dec, model) == raw_answers
    assert without_bytes(dec.retained()) == without_bytes(raw_figures)
    check_window(dec, model, model[0].start_us, model[-1].start_us + 1)
    # each compacted chunk counts its records, long durations and distinct shapes; the one being
    # written still counts its raw rows
    sealed, written = model[:-(len(model) % 1024 or 1024)], len(model) % 1024 or 1024
    assert written + len(sealed) == len(model)
    chunks = [sealed[i:i + 1024] for i in range(0, len(sealed), 1024)]
    expected = RL.raw_chunk_bytes(1024) + sum(RL.compact_chunk_bytes(
        len(chunk), sum(e.end - e.start >= RL.DUR_LONG for e in chunk), len({shape(e) for e in chunk}))
        for chunk in chunks)
    assert retention.figures()["used_bytes"] == dec.retained()["bytes"] == expected


def shape(e: Execution) -> tuple:
    """What a retained record's shape is made of (everything but its time, seq and grid x)."""
    return (e.lane, e.kind, e.name_id, e.grid[1:], e.block, e.nbytes, e.direction, e.launch)


def test_a_detached_decoders_last_chunk_is_sealed_and_compacted(decoder_impl):
    buf, model = make_ring(1_500, seed=12)
    retention = retention_for(decoder_impl.cls, 1 << 30, 1024)
    dec = drained(decoder_impl.cls, buf, retention)
    retention.compact()
    assert retention.figures()["raw_chunks"] == 0 and dec.retained()["chunks"] == 2
    before = answers(dec, model)
    dec.detach()
    assert retention.figures()["raw_chunks"] == 1   # no record will come: the last chunk is sealed
    assert retention.compact() == 1
    assert answers(dec, model) == before
    assert retention.figures()["used_bytes"] < 2 * RL.raw_chunk_bytes(1024)


def test_seq_jumps_beyond_sixteen_bits_are_exact_in_both_forms(decoder_impl):
    """Executions with 70,000 untimed kernels between them: a gap a 16-bit delta cannot hold seals
    the chunk; every seq stays exact, raw and compacted."""
    records = [F.clock_sync(CUPTI, WALL), *F.name_chunks(1, b"_Z4gemmv")]
    model = []
    t = CUPTI + 1_000_000
    for i in range(6):
        for _ in range(70_000 if i % 2 else 3):
            records.append(F.kernel(1, 0, 1, 13, t, t + 5, F.FLAG_NO_TIMING, (1, 1, 1), (32, 1, 1)))
        seq = len(records)
        records.append(F.kernel(1, 0, 1, 13, t, t + 700, 0, (64, 2, 1), (128, 1, 1)))
        model.append(Execution(seq, (0, 1, 13), 0, t, t + 700, 1, (64, 2, 1), (128, 1, 1), launch=0))
        t += 10_000
    buf = F.Case(capacity=1 << 18, records=records).build()
    retention = retention_for(decoder_impl.cls, 1 << 30, 1024)
    dec = drained(decoder_impl.cls, buf, retention)
    assert dec.retained()["chunks"] == 4   # sealed at each of the three jumps
    first, last = model[0].start_us, model[-1].start_us + 1
    check_window(dec, model, first, last)
    retention.compact()
    check_window(dec, model, first, last)
    assert [e.seq for e in model][-1] > 200_000


def test_the_twins_compact_alike_however_drains_and_compactions_interleave(both_impls):
    buf, _model = make_ring(12_000, seed=13, long_every=300, jump_every=4_000)
    lo, hi = (CUPTI + OFFSET) // 1000, (CUPTI + OFFSET) // 1000 + 400_000_000
    seen = []
    for cls in both_impls:
        retention = retention_for(cls, 150_000, 256)
        dec = cls(bytearray(buf), retention=retention)
        steps = []
        for i, step in enumerate((700, 1_300, 64, 2_000, 5_000, 9_000)):
            steps.append((dec.drain(step), dec.retained(), retention.figures()))
            if i % 2:
                steps.append((retention.compact(), retention.figures(), dec.window(lo, hi, OFFSET, 50)))
        steps.append((dec.window(lo, hi, OFFSET), retention.compact(), dec.window(lo, hi, OFFSET)))
        seen.append(steps)
    assert seen[0] == seen[1]


@pytest.mark.c_extension
def test_a_reader_of_raw_rows_keeps_its_answer_while_they_are_compacted(both_impls):
    """A window query on another thread while the drain thread drains and compacts: every answer
    holds what was published when it pinned its chunks, each record exactly as the model has it."""
    cls = both_impls[0]
    buf, model = make_ring(30_000, seed=14, long_every=500, capacity=1 << 16)
    retention = retention_for(cls, 1 << 30, 1024)
    dec = cls(buf, retention=retention)
    first, last = model[0].start_us, model[-1].start_us + 1
    by_seq = {e.seq: e for e in model}
    done = threading.Event()
    failures: list[str] = []
    answered = [0]

    def read() -> None:
        while not done.is_set():
            for device, context, stream, executions, columns, _names, _buckets in dec.window(first, last, OFFSET):
                seqs = list(columns[0])
                expected = [e.seq for e in in_window(model, first, last)[(device, context, stream)]]
                if seqs != expected[:len(seqs)] or len(seqs) != executions:   # a prefix, in ring order
                    failures.append(f"lane {stream}: {len(seqs)} seqs, not the model's first ones")
                starts = [by_seq[q].start_us for q in seqs]
                if list(columns[1]) != starts or list(columns[2]) != [by_seq[q].end - by_seq[q].start for q in seqs]:
                    failures.append(f"lane {stream}: a start or a duration differs")
            answered[0] += 1

    reader = threading.Thread(target=read)
    reader.start()
    try:
        while dec.drain(61):
            time.sleep(0.001)   # the reader's turn: it pins the chunk just sealed, raw, and reads it...
            retention.compact()   # ...while it is compacted, in the same moment or so
    finally:
        done.set()
        reader.join()
    assert not failures, failures[:3]
    assert answered[0] > 3
    retention.compact()
    check_window(dec, model, first, last)
