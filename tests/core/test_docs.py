"""The documented contract matches the code: every hook documented and tested, every field in the schema."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import pytest

from gpuflow.core import hookspecs, snapshot

ROOT = Path(__file__).resolve().parents[2]
HOOKS = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
               if hasattr(fn, "gpuflow_spec"))


def test_there_are_hooks():
    assert HOOKS == ["answer_for_host", "child_environment", "declare_options", "doctor_checks",
                     "process_exited", "produce_snapshot", "query_history", "query_window",
                     "start_collecting", "stop_collecting", "watch_hosts"]


def signature_text(fn) -> str:
    """``name(param: Type, ...) -> Return`` as docs/plugins.md writes it, from the spec itself."""
    sig = inspect.signature(fn)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"`{fn.__name__}({params}) -> {sig.return_annotation}`"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_signature(hook):
    fn = getattr(hookspecs, hook)
    doc = inspect.getdoc(fn)
    params = inspect.signature(fn).parameters
    assert doc and ":returns:" in doc
    assert all(f":param {name}:" in doc for name in params), f"{hook}: a parameter is not described"
    plugins_md = (ROOT / "docs" / "plugins.md").read_text()
    assert signature_text(fn) in plugins_md, f"docs/plugins.md lacks {signature_text(fn)}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_exercised_by_a_test(hook):
    used = "".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py") if p.name != "test_docs.py")
    assert f"def {hook}(" in used, f"no test implements the hook {hook}"


SCHEMA_CLASSES = [snapshot.HostInfo, snapshot.Problem, snapshot.Device, snapshot.Attachment, snapshot.Process,
                  snapshot.TracedProcess, snapshot.KernelStat, snapshot.TransferStat, snapshot.Lane, snapshot.Span,
                  snapshot.RetiredTraced, snapshot.Snapshot, snapshot.GpmReadings, snapshot.LinkReadings,
                  snapshot.NvLink, snapshot.HealthReadings, snapshot.FleetHost, snapshot.Workload,
                  snapshot.TracedDevice, snapshot.CopyRate]


@pytest.mark.parametrize("cls", SCHEMA_CLASSES, ids=lambda c: c.__name__)
def test_every_snapshot_field_is_in_the_schema_doc(cls):
    doc = (ROOT / "docs" / "snapshot.md").read_text()
    missing = [f.name for f in fields(cls) if f"`{f.name}`" not in doc]
    assert not missing, f"docs/snapshot.md does not document {cls.__name__}.{missing}"
