"""Pure-Python twin of ``_kernel_table_c``: a traced process's kernel table brought up to date from
the decoder's aggregates, ready to be put in kernel order.

What it is for: the readable statement of what the compiled helper does, and the helper where the
extension is not built. The snapshot's kernel table is a tuple of frozen KernelStat objects, and
every build (up to 20 a second per traced process) must give each kernel whose figures moved a new
one: under bench/agent_rss.py that is ~200 names x 8 processes a build, and a frozen dataclass
costs microseconds to make in Python. :func:`refresh` makes only the changed ones, each a copy of
the one it replaces with the new figures (every other field, those other issues add included,
kept), and gives each kernel its sort key.

``refresh(rows, shown)``: ``rows`` are the decoder's ``(name_id, count, timed, total_ns, min_ns,
max_ns)`` (``RingDecoder.kernels``), or the same packed in one array (``RingDecoder.kernel_rows``,
what the builder passes: the compiled helper then makes no tuple or int for a shown kernel's row,
and keeps a figure's int where it did not move); ``shown`` maps the name ids shown by their own name to their
current KernelStat, and is updated in place (a kernel whose figures differ from its row gets its
new KernelStat there). The answer is ``(stats, ids, unknown)``: the KernelStats of the rows of
shown names and their name ids, in ``rows``' order, and the rows of names not in ``shown``, in
order, for the caller to admit or count among the others. ``ordered(stats, ids)`` puts a table in
``kernel_order`` (total time descending, launches descending, name, mangled name), a tie broken
by the name id (:func:`sort_key`), so two stats are never compared.

Constraints: byte-for-byte the same answer and the same ``shown`` as ``_kernel_table_c``
(tests/cupti/test_kernel_table.py); a changed KernelStat is ``dataclasses.replace`` of the old
one with the five figures, so its type and other fields are kept.
"""

from __future__ import annotations

from array import array
from dataclasses import replace
from typing import Any

is_compiled = False


def sort_key(stat: Any, name_id: int) -> tuple:
    """A kernel's place in its table: ``kernel_order`` (total time descending, then launches
    descending, then name and mangled name), then the name id, then the stat."""
    return (-stat.total_ns, -stat.count, stat.name, stat.mangled, name_id, stat)


def rows_of(packed: array) -> list[tuple]:
    """A decoder's packed ``kernel_rows()`` as its ``kernels()`` rows (min and max None while a
    name has no timed launch)."""
    if packed.typecode != "Q":
        raise TypeError(f"packed kernel rows are an array('Q'), not array({packed.typecode!r})")
    if len(packed) % 6:
        raise ValueError(f"packed kernel rows hold 6 values a row, not {len(packed)} values")
    return [(nid, count, timed, total, mn if timed else None, mx if timed else None)
            for nid, count, timed, total, mn, mx in zip(*[iter(packed)] * 6)]


def refresh(rows: list[tuple] | array, shown: dict[int, Any]) -> tuple[list[Any], list[int], list[tuple]]:
    """Bring ``shown`` up to date with ``rows`` (a decoder's ``kernels()``, or its packed
    ``kernel_rows()``); the shown kernels' stats and name ids, and the rows of the others (see the
    module's opening)."""
    if type(rows) is array:
        rows = rows_of(rows)
    stats, ids, unknown = [], [], []
    for row in rows:
        name_id, count, timed, total, mn, mx = row
        stat = shown.get(name_id)
        if stat is None:
            unknown.append(row)
            continue
        if not (stat.count == count and stat.total_ns == total and stat.timed == timed
                and stat.min_ns == mn and stat.max_ns == mx):
            stat = shown[name_id] = replace(stat, count=count, total_ns=total, min_ns=mn, max_ns=mx,
                                            timed=timed)
        stats.append(stat)
        ids.append(name_id)
    return stats, ids, unknown


def ordered(stats: list[Any], ids: list[int]) -> tuple[Any, ...]:
    """``stats`` (with their name ids) in kernel order, a tie broken by the name id."""
    return tuple(key[5] for key in sorted(map(sort_key, stats, ids)))
