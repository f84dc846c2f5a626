"""Launch configurations (ring version 3), as the decoders read them: LAUNCH records, the launch id
each kernel record carries, ``launches()`` (per kernel name, its latest kernel's configuration),
and what is malformed about them, in both twins and with rings written by the compiled producer.
"""

from __future__ import annotations

import pytest
from ringproducer import pack_record

from gpuflow.collectors.cupti import _layout as L

import ringfuzz as F

CONFIG = dict(registers=64, static_shared=4096, dynamic_shared=8192, shared_executed=65536, cluster=(2, 1, 1),
              shared_config=1, shmem_limit_config=1, carveout=50, cache_config=0x21)
TUPLE = (64, 4096, 8192, 65536, 1, 1, 50, 0x21, (2, 1, 1))


def test_each_kernel_name_has_its_latest_launch_configuration(decoder_impl, rings):
    p = rings.producer()
    p.kernel_launch(0, 1, 13, 10, 20, "_Z1av", **CONFIG)
    p.kernel_launch(0, 1, 13, 30, 40, "_Z1bv", **CONFIG)
    p.kernel_launch(0, 1, 13, 50, 60, "_Z1bv", **{**CONFIG, "dynamic_shared": 0, "carveout": None,
                                                  "registers": 40})
    p.kernel(0, 1, 13, 70, 80, "_Z1cv")   # no configuration known: not in launches()
    p.kernel(0, 1, 13, 90, 99, "_Z1av")   # keeps _Z1av's latest known one
    d = decoder_impl.cls(rings.mapping(p))
    assert d.drain() == p.head
    names = {text: nid for nid, (text, _f) in d.names().items()}
    assert d.launches() == {names["_Z1av"]: TUPLE,
                            names["_Z1bv"]: (40, 4096, 0, 65536, 1, 1, None, 0x21, (2, 1, 1))}
    assert d.counters()["invalid"] == {} and sum(k[1] for k in d.kernels()) == 5


@pytest.mark.parametrize("records, reason", [
    ([F.kernel(1, launch_id=3)], "undefined_launch"),                         # never defined
    ([F.launch(0)], "bad_launch"),                                            # id 0
    ([F.launch(L.LAUNCH_ID_LIMIT + 1)], "bad_launch"),                        # beyond the limit
    ([F.launch(1, static=1), F.launch(1, static=2)], "bad_launch"),           # defined again, differently
])
def test_malformed_launch_records_are_counted_and_change_nothing(decoder_impl, records, reason):
    recs = F.name_chunks(1, b"_Z1kv") + [F.launch(1, static=1)] * (reason != "undefined_launch") + records
    out = F.run_case(decoder_impl.cls, F.Case(records=recs))[-2]
    assert out["counters"]["invalid"] == {reason: 1}
    kernels_launched = [k for k in out["kernels"] if k[0] == 1]
    assert kernels_launched == [] and out["launches"] == {}


def test_the_same_definition_twice_is_harmless(decoder_impl):
    recs = F.name_chunks(1, b"_Z1kv") + [F.launch(1, static=1), F.launch(1, static=1), F.kernel(1, launch_id=1)]
    out = F.run_case(decoder_impl.cls, F.Case(records=recs))[-2]
    assert out["counters"]["invalid"] == {}
    assert out["launches"] == {1: (32, 1, 0, 0, 0, 0, None, 0, (0, 0, 0))}


def test_a_hostile_launch_id_costs_a_bounded_table(decoder_impl):
    """The highest id the decoder takes (65,536) makes it hold one table of that many entries at
    most; ids beyond are refused."""
    recs = F.name_chunks(1, b"_Z1kv") + [F.launch(L.LAUNCH_ID_LIMIT, static=7), F.kernel(1, launch_id=L.LAUNCH_ID_LIMIT),
                                         F.launch(L.LAUNCH_ID_LIMIT + 1), pack_record(9, device=(1 << 32) - 1)]
    out = F.run_case(decoder_impl.cls, F.Case(records=recs))[-2]
    assert out["counters"]["invalid"] == {"bad_launch": 2}
    assert out["launches"] == {1: (32, 7, 0, 0, 0, 0, None, 0, (0, 0, 0))}


def test_kernels_of_names_beyond_max_names_keep_their_configuration_under_other(decoder_impl):
    recs = (F.name_chunks(1, b"_Z1av") + F.name_chunks(2, b"_Z1bv") + [F.launch(1, dynamic=96)]
            + [F.kernel(1, launch_id=1), F.kernel(2, launch_id=1)])
    out = F.run_case(decoder_impl.cls, F.Case(records=recs, caps={**L.Caps()._asdict(), "max_names": 1}))[-2]
    assert set(out["launches"]) == {1, L.OTHER_NAME_ID}
    assert out["launches"][L.OTHER_NAME_ID][2] == 96
