"""The page's reader of the stream (gpuflow/ui/stream.js) states the compact form's constants as
the agent does: read from the module's text, each must equal its Python definition (wire.py, and
the snapshot's schema and kernel order), and the module may state no other.

The module writes each constant as ``export const NAME = <literal>;`` on a line of its own; its
literal is read here as a Python literal. tests/ui/test_stream_reader.py checks the same values
as the browser sees them, and that both readers give the same plain frames.
"""

from __future__ import annotations

import ast
import functools
import random
import re

import pytest

from gpuflow.core.snapshot import SCHEMA_VERSION, KernelStat, kernel_order
from gpuflow.transport import wire
from gpuflow.transport.ui import UI_DIR

STREAM_JS = UI_DIR / "stream.js"
CONSTANT = re.compile(r"^export const ([A-Z][A-Z0-9_]*) = (.+);$", re.MULTILINE)

#: each of the module's constants, and what it must equal on the Python side
PYTHON = {
    "PLAIN_SCHEMA": SCHEMA_VERSION,
    "STREAM_SCHEMA": wire.WIRE_SCHEMA,
    "COMPACT_SCHEMAS": list(wire.COMPACT_SCHEMAS),
    "FULL": wire.FULL,
    "DELTA": wire.DELTA,
    "SPAN_KINDS": list(wire.KINDS),
    "DIRECTIONS": list(wire.DIRECTIONS),
    "OMITTABLE": list(wire.OMITTABLE),
}


def page_constants() -> dict[str, object]:
    """The module's one-line literal constants, by name."""
    text = STREAM_JS.read_text()
    found = {}
    for name, literal in CONSTANT.findall(text):
        assert name not in found, f"{name} is stated twice in stream.js"
        found[name] = ast.literal_eval(literal)
    return found


def test_every_constant_of_the_page_reader_is_the_agents():
    found = page_constants()
    assert set(found) == set(PYTHON) | {"KERNEL_ORDER"}, "a constant without a Python counterpart"
    for name, value in PYTHON.items():
        assert found[name] == value, name


def test_the_module_states_no_constant_twice_nor_outside_the_one_line_form():
    text = STREAM_JS.read_text()
    for name in set(PYTHON) | {"KERNEL_ORDER"}:
        assert len(re.findall(rf"\b(?:const|let|var)\s+{name}\b", text)) == 1, name
    # a span-kind or direction array spelled out anywhere else would be a second definition
    for literal in ("'memcpy', 'memset'", "'h2d', 'd2h'", "'traced_retired'"):
        assert text.count(literal) == 1, literal


def sort_by_page_order(kernels: list[KernelStat], order) -> list[KernelStat]:
    """``kernels`` sorted as the page's comparator does, given its KERNEL_ORDER."""
    def compare(a: KernelStat, b: KernelStat) -> int:
        for field, direction in order:
            x, y = getattr(a, field), getattr(b, field)
            if x != y:
                return (-1 if x < y else 1) * (-1 if direction == "desc" else 1)
        return 0
    return sorted(kernels, key=functools.cmp_to_key(compare))


@pytest.mark.parametrize("seed", range(20))
def test_the_page_orders_a_kernel_table_as_the_agent_does(seed):
    order = page_constants()["KERNEL_ORDER"]
    assert {d for _, d in order} <= {"asc", "desc"}
    rng = random.Random(seed)
    # few distinct values, so that every key of the order breaks some tie
    kernels = [KernelStat(name=rng.choice("ab"), mangled=f"_Z{i}", count=rng.randint(1, 2),
                          total_ns=rng.choice((100, 200)), min_ns=None, max_ns=None)
               for i in range(12)]
    rng.shuffle(kernels)
    assert sort_by_page_order(kernels, order) == sorted(kernels, key=kernel_order)


def test_an_order_that_differs_from_the_agents_is_caught():
    # the check above can fail: a page that sorted by count first would be told
    kernels = [KernelStat("a", "_Z1", 1, 300, None, None), KernelStat("b", "_Z2", 5, 100, None, None)]
    swapped = [["count", "desc"], ["total_ns", "desc"], ["name", "asc"], ["mangled", "asc"]]
    assert sort_by_page_order(kernels, swapped) != sorted(kernels, key=kernel_order)
