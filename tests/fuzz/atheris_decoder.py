"""Coverage-guided fuzzing of the ring decoder with atheris (libFuzzer for Python): both twins.

    pip install atheris
    PYTHONPATH=tests/support python tests/fuzz/atheris_decoder.py -runs=500000 -max_len=8192 [corpus_dir]

libFuzzer's bytes become a ring: a few bytes choose the header (valid, or each field taken from the
input), the start position (anywhere, near a wrap, near 2^64) and the drain batches; the rest
are the records, 64 raw bytes each, optionally with a valid producer-shaped prelude so the
mutations reach deep states (names being reassembled, lanes, kernels) quickly. Each input is
played against the compiled and the Python twin with tests/support/ringfuzz.py; any difference, any
undocumented exception and any broken invariant is an AssertionError, which libFuzzer reports as
a crash and saves the input for replay (the same command with ``crash-<hash>`` as its argument).

Coverage feedback comes from the Python code (the pure twin, the shared header checks, which
mirror the compiled twin's branches one for one); the compiled twin is not instrumented (that
would need clang's -fsanitize=fuzzer), but a fault in it still ends the run as a crash.

Constraints: not a pytest test (it runs until told to stop); needs atheris, the compiled
decoder, and tests/support on PYTHONPATH for the fuzz engine.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["gpuflow.collectors.cupti", "ringfuzz"]):
    import ringfuzz as F
    from gpuflow.collectors.cupti.decoder import RingDecoderC, RingDecoderPy

PRELUDE = ([F.context(0, 1, 7), F.clock_sync(1_000, 2_000)] + F.name_chunks(1, b"_Z6kernelPfi")
           + F.name_chunks(2, b"compute", F.FLAG_NAME_STREAM) + [F.stream_name(2), F.kernel(1)]
           + F.name_chunks(3, b"a" * 100))
FIELDS = ("magic", "version", "header_size", "record_size", "capacity", "head", "tail", "status",
          "producer_exited", "dropped_ring")


def case_from(data: bytes) -> F.Case:
    fdp = atheris.FuzzedDataProvider(data)
    cap = 1024 << fdp.ConsumeIntInRange(0, 2)
    where = fdp.ConsumeIntInRange(0, 3)
    tail0 = (0, cap - fdp.ConsumeIntInRange(0, 63), fdp.ConsumeIntInRange(0, (1 << 64) - 1),
             (1 << 64) - 1 - fdp.ConsumeIntInRange(0, 4 * cap))[where]
    header: dict[str, int] = {}
    if fdp.ConsumeIntInRange(0, 7) == 0:  # one damaged header field in eight inputs
        name = FIELDS[fdp.ConsumeIntInRange(0, len(FIELDS) - 1)]
        header[name] = fdp.ConsumeIntInRange(0, (1 << (8 * F.WIDTH.get(name, 4))) - 1)
    lane_cap = (0, 1, 3, 512)[fdp.ConsumeIntInRange(0, 3)]
    batches = [fdp.ConsumeIntInRange(0, 70) for _ in range(fdp.ConsumeIntInRange(0, 5))]
    prelude = PRELUDE if fdp.ConsumeBool() else []
    later = fdp.ConsumeIntInRange(0, 8)  # records held back and published after the first drain
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    records = prelude + [body[i:i + 64].ljust(64, b"\0") for i in range(0, len(body), 64)]
    records = records[:cap]
    held = records[len(records) - later:] if later and later < len(records) else []
    records = records[:len(records) - len(held)]
    steps = [("drain", n or None) for n in batches]
    if held:
        steps.insert(min(1, len(steps)), ("publish", held))
    steps.append(("drain", None))
    return F.Case(capacity=cap, tail0=tail0 & F.U64_MAX, records=records, header=header, lane_span_cap=lane_cap,
                  steps=steps)


def test_one_input(data: bytes) -> None:
    F.compare((RingDecoderC, RingDecoderPy), case_from(data))


def main() -> None:
    if RingDecoderC is None:
        sys.exit("the compiled decoder is not built; nothing to compare the Python twin with")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
