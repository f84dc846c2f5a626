"""The export package imports only the core (and itself): the web app and the command line both use
it, and neither may come to need a collector, the transport or the command line through it."""

from __future__ import annotations

import ast
from pathlib import Path

EXPORT = Path(__file__).resolve().parents[2] / "gpuflow" / "export"


def gpuflow_imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return {m for m in found if m.split(".")[0] == "gpuflow"}


def test_the_export_package_imports_only_the_core_and_itself():
    seen = {}
    for path in sorted(EXPORT.glob("*.py")):
        seen[path.name] = gpuflow_imports(path.read_text())
    # the compiled twin's imports, from its Python-level lines
    pyx = (EXPORT / "_slices_c.pyx").read_text()
    seen["_slices_c.pyx"] = {line.split()[1] for line in pyx.splitlines() if line.startswith("from gpuflow")}
    assert seen["perfetto.py"] and seen["_slices_c.pyx"]
    wrong = {name: sorted(m for m in mods if not m.startswith(("gpuflow.core", "gpuflow.export")))
             for name, mods in seen.items()}
    assert not any(wrong.values()), wrong
