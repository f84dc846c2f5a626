"""Both decoder twins are exactly the RingDecoder protocol (the same public members, the same
parameters), and the compiled twin's stub types it by that protocol, so callers typed against the
protocol see every call whichever twin runs."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from gpuflow.collectors.cupti import _decoder_py, decoder, protocol

STUB = Path(protocol.__file__).with_name("_decoder_c.pyi")


def protocol_members() -> dict[str, list[str] | None]:
    """Public member → parameter names (None for a property or attribute), from the protocol."""
    members: dict[str, list[str] | None] = {}
    for name, value in vars(protocol.RingDecoder).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(value, property) or not callable(value):
            members[name] = None
        else:
            members[name] = list(inspect.signature(value).parameters)
    members.update({name: None for name in protocol.RingDecoder.__annotations__})
    return members


def stub_declarations() -> dict[str, str]:
    """Name → annotation text of the compiled twin's stub's module-level declarations."""
    tree = ast.parse(STUB.read_text())
    return {n.target.id: ast.unparse(n.annotation) for n in tree.body if isinstance(n, ast.AnnAssign)}


def twin_members(cls: type) -> dict[str, list[str] | None]:
    members: dict[str, list[str] | None] = {}
    for name in dir(cls):
        if name.startswith("_") and name != "__init__":
            continue
        value = inspect.getattr_static(cls, name)
        if name == "__init__":
            members[name] = list(inspect.signature(cls.__init__).parameters)
        elif callable(value) and not isinstance(value, (bool, property)) and not inspect.isdatadescriptor(value):
            members[name] = list(inspect.signature(value).parameters)
        else:
            members[name] = None
    return members


def test_the_stub_types_the_compiled_twin_by_the_protocol():
    """The stub restates nothing: its RingDecoder is a class implementing the protocol."""
    declared = stub_declarations()
    assert declared["RingDecoder"] == "type[_RingDecoderProtocol]"
    assert "from gpuflow.collectors.cupti.protocol import RingDecoder as _RingDecoderProtocol" in STUB.read_text()


@pytest.mark.c_extension
def test_the_stubs_other_names_exist_in_the_compiled_module(both_impls):
    from gpuflow.collectors.cupti import _decoder_c

    assert all(hasattr(_decoder_c, name) for name in stub_declarations())


def test_the_python_twin_is_the_protocol():
    assert twin_members(_decoder_py.RingDecoder) == protocol_members()


@pytest.mark.c_extension
def test_the_compiled_twin_has_the_protocols_members(both_impls):
    compiled = decoder.RingDecoderC
    expected = protocol_members()
    public = {name for name in dir(compiled) if not name.startswith("_")}
    assert public == set(expected) - {"__init__"}
    for name, params in expected.items():
        if params is not None and name != "__init__":
            try:
                got = list(inspect.signature(getattr(compiled, name)).parameters)
            except (TypeError, ValueError):  # a Cython build without signatures: names only
                continue
            assert got == params, name


def test_a_twin_instance_satisfies_the_runtime_protocol(decoder_impl, rings):
    p = rings.producer()
    assert isinstance(decoder_impl.cls(rings.mapping(p)), protocol.RingDecoder)
