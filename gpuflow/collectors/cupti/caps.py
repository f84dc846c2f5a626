"""The caps a traced process hit, as Problems: which cap, its setting, and what became of the rest.

docs/decoder.md ("Caps") states the caps on what one ring can make the agent hold: the decoders'
(``max_names``, ``max_name_bytes``, ``max_lanes``, ``max_pending_names``, counted in their
``counters()``), the snapshot budget of the traced-process builder (``names_over_budget``,
``spans_over_budget``) and its demangling (``names_past_demangled_budget``, and ``demangling``
off once the demangler ran out of time). Each one a process reached becomes one Problem for it,
keyed by cap and pid, saying which cap, the option (environment variable) that sets it, and what
happened to what lay beyond (counted together, exactly, under ``(other kernel names)``; cut;
counted on no lane; dropped; shown mangled), so that a user can tell a hostile or unusual program
from a complete view, and raise a cap when the program is theirs.

Constraints: pure (no I/O, no state); called by the collector when a ring's figures change, never
per record. A message changes only when the state it describes does (counts of what was cut or
folded are not in the steadily growing ones), so a part is not rebuilt for it on every pass.
"""

from __future__ import annotations

from typing import Any

from gpuflow.collectors.cupti._layout import Caps
from gpuflow.collectors.cupti.demangle import START_TIMEOUT_S, TIMEOUT_S
from gpuflow.collectors.cupti.traced_builder import (
    KERNEL_TABLE_BYTES, LANES_BYTES, OTHER_KERNELS, PROCESS_JSON_BYTES, TracedBuilder,
)

#: the environment variable of each cap's option (gpuflow.collectors.cupti.options)
VARIABLES = {"max_names": "GPUFLOW_MAX_NAMES", "max_name_bytes": "GPUFLOW_MAX_NAME_BYTES",
             "max_lanes": "GPUFLOW_MAX_LANES", "max_pending_names": "GPUFLOW_MAX_PENDING_NAMES"}


def figures(counters: dict[str, Any], builder: TracedBuilder | None) -> dict[str, Any]:
    """What the cap Problems are made from: the decoder's counters and the builder's budget figures."""
    out = {key: counters.get(key, 0) for key in ("names_folded", "names_cut", "names_unfinished", "lane_overflow")}
    if builder is not None:
        out["names_over_budget"] = builder.names_over_budget
        out["spans_over_budget"] = builder.spans_over_budget > 0
        out["lanes_bytes"] = builder.lanes_bytes if out["spans_over_budget"] else None
        out["lane_share_bytes"] = builder.lane_share_bytes if out["spans_over_budget"] else None
        out["demangled_budget"] = builder.demangled_budget if builder.names_past_demangled_budget else None
        out["demangle_timeout"] = not builder.demangling
    return out


def _cap(name: str, value: int) -> str:
    return f"the {name} cap, {value:,}; {VARIABLES[name]} sets it"


def problems(pid: int, seen: dict[str, Any], caps: Caps) -> list[tuple[str, str, str]]:
    """(key, message, severity) for every cap ``seen`` (:func:`figures`) shows was reached."""
    out = []
    if seen.get("names_folded"):
        out.append(("cap-names", f"pid {pid}: more distinct names than {_cap('max_names', caps.max_names)}: the "
                    f"kernels of the names beyond it are counted together, exactly, as '{OTHER_KERNELS}'",
                    "warning"))
    if seen.get("names_cut"):
        out.append(("cap-name-bytes", f"pid {pid}: names longer than {_cap('max_name_bytes', caps.max_name_bytes)} "
                    "bytes: they are shown cut there, ending in '…'", "info"))
    if seen.get("lane_overflow"):
        out.append(("lanes", f"pid {pid}: executions on more streams than {_cap('max_lanes', caps.max_lanes)}: "
                    "they are in the totals but on no lane", "info"))
    if seen.get("names_unfinished"):
        out.append(("cap-pending", f"pid {pid}: names announced and never finished, beyond "
                    f"{_cap('max_pending_names', caps.max_pending_names)} at once or older than a ring's worth of "
                    "records: dropped; records naming them count as undefined", "warning"))
    if seen.get("names_over_budget"):
        out.append(("budget-kernels", f"pid {pid}: its kernel names fill the {KERNEL_TABLE_BYTES / 2**20:g} MiB the "
                    f"snapshot gives a process's kernel table: the rest are counted together, exactly, as "
                    f"'{OTHER_KERNELS}'", "warning"))
    if seen.get("spans_over_budget"):
        out.append(("budget-lanes", f"pid {pid}: its lanes fill the {seen['lanes_bytes']:,} bytes of JSON the "
                    f"snapshot gives them (at most {LANES_BYTES / 2**20:g} MiB, within the "
                    f"{PROCESS_JSON_BYTES / 2**20:g} MiB of a process with its kernel table): each lane shows its "
                    f"newest spans within {seen['lane_share_bytes']:,} bytes", "info"))
    if seen.get("demangled_budget"):
        out.append(("budget-demangled", f"pid {pid}: its demangled kernel names reached the "
                    f"{seen['demangled_budget']:,} characters a process's names may have: its further names are "
                    "shown mangled", "info"))
    if seen.get("demangle_timeout"):
        out.append(("demangle-time", f"pid {pid}: the demangler did not answer in time ({TIMEOUT_S:g} s for a "
                    f"name, {START_TIMEOUT_S:g} s to start): this process's names from then on are shown mangled",
                    "info"))
    return out
