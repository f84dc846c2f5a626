"""A followed host's kernel tables and launch entries: each entry checked once, kept as its object.

An agent's delta carries, of a traced process's kernel table and of its kernel launch entries,
only the entries that changed since its base frame (docs/snapshot.md, "Delta frames"); the
stream's reader fills in the rest from the frame before. The hub used to rebuild each table as
plain dicts every frame, sort it through a KernelStat made for every entry, and check every entry
again (parse.py): for a program of hundreds of kernels the largest cost of a host, ten times a
second while a page watches it.

:class:`CheckedTables` is the hub's ``StreamReader(tables=...)``: it keeps each of those parts as
a :class:`CheckedTable`, the entries as the snapshot's objects (KernelStat, KernelLaunch), each
checked by parse.py's own converter when it came, in the snapshot's order (``kernel_order``;
launch entries by mangled name). Every entry a frame carries is checked, whatever it says (an
entry a delta repeats unchanged is checked again); an entry a delta leaves out is the very object
checked when it came, which is what the reader filled it in from before: nothing of an agent's
is taken unchecked, and nothing it claims is believed beyond what the stream's form says (an
entry left out of a delta is its base frame's). A delta that carries no entry of a part gives
the table before itself, so the traced process's kernels are the same tuple, which the page's
frame encoder then finds unchanged by identity. parse.py takes a table's items as they are (its
``Checked``; nothing an agent's JSON makes can be one).

A full frame's (or a new process's) table is kept in the snapshot's order whatever order it came
in, one entry per name (the last, as a delta's update would); an honest agent sends it so.

Bounds: a table holds at most its part's cap of parse.LIST_CAPS (16,384 kernels; 4,096 launch
entries): a frame, full or delta, that would make it larger is refused (FrameRefused), as parse.py
refused a plain table that long, so a hostile agent that sends new names in every delta is
dropped at the cap. The tables live in the reader's last frame (one of each part per traced
process of the connection, replaced by each frame's, gone with the connection or the host):
per entry, its object, its order key and a slot in the table's name index.

Constraints: pure; on the hub's network thread; a table is never changed once made.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Callable

from gpuflow.collectors.fleet import parse
from gpuflow.collectors.fleet.parse import DEFAULT_CAP, LIST_CAPS, Checked, FrameRefused
from gpuflow.core.snapshot import KernelLaunch, KernelStat, kernel_order


class CheckedTable(Checked):
    """One part's entries (``items``, in order), their order keys (``orders``, ascending, one per
    entry) and, by name, each entry's order key (``by_key``)."""

    __slots__ = ("orders", "by_key")

    def __init__(self, items: tuple, orders: list[tuple], by_key: dict[Any, tuple]) -> None:
        super().__init__(items)
        self.orders, self.by_key = orders, by_key

    def __len__(self) -> int:
        return len(self.items)


def _kernel_key(k: KernelStat) -> tuple[str, str]:
    return (k.name, k.mangled)


def _launch_key(x: KernelLaunch) -> str:
    return x.mangled


def _launch_order(x: KernelLaunch) -> tuple[str]:
    return (x.mangled,)


#: per part: its entries' check, an entry's name, its order key (unique per name), the cap
PARTS: dict[str, tuple[Callable[..., Any], Callable[[Any], Any], Callable[[Any], tuple], int]] = {
    "kernels": (parse.converter(KernelStat), _kernel_key, kernel_order, LIST_CAPS["kernels"]),
    "kernel_launches": (parse.converter(KernelLaunch), _launch_key, _launch_order,
                        LIST_CAPS.get("kernel_launches", DEFAULT_CAP)),
}


class CheckedTables:
    def whole(self, part: str, entries: list[dict[str, Any]], index: int) -> CheckedTable:
        """A full frame's entries of ``part``, each checked."""
        check, key_of, order_of, cap = PARTS[part]
        at = f"traced[{index}].{part}"
        if len(entries) > cap:
            raise FrameRefused(f"{at}: more than {cap} entries")
        by_key: dict[Any, tuple] = {}
        for j, entry in enumerate(entries):
            item = check(entry, f"{at}[{j}]")
            by_key[key_of(item)] = (order_of(item), item)
        pairs = sorted(by_key.values())   # order keys are unique per name: no two items compared
        return CheckedTable(tuple([item for _o, item in pairs]), [o for o, _item in pairs],
                            {key: pair[0] for key, pair in by_key.items()})

    def updated(self, part: str, before: CheckedTable, changed: list[dict[str, Any]], index: int) -> CheckedTable:
        """``before`` with the entries a delta carries (each checked) in place of their names'."""
        if not changed:
            return before
        if type(before) is not CheckedTable:
            raise ValueError(f"no kept table of {part} to update")
        check, key_of, order_of, cap = PARTS[part]
        at = f"traced[{index}].{part}"
        if len(changed) > cap:
            raise FrameRefused(f"{at}: more than {cap} entries")
        new = {}
        for j, entry in enumerate(changed):
            item = check(entry, f"{at}[{j}]")
            new[key_of(item)] = item
        if len(before.by_key) + len(new) > cap and len(before.by_key.keys() | new.keys()) > cap:
            raise FrameRefused(f"{at}: more than {cap} entries")
        orders, items, by_key = list(before.orders), list(before.items), dict(before.by_key)
        for key, item in new.items():
            old = by_key.get(key)
            if old is not None:   # its entry before goes: found by its order key
                i = bisect_left(orders, old)
                del orders[i], items[i]
            order = by_key[key] = order_of(item)
            i = bisect_left(orders, order)
            orders.insert(i, order)
            items.insert(i, item)
        return CheckedTable(tuple(items), orders, by_key)
