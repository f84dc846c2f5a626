"""The layering, enforced: the core knows no collector, the transport or the command line; the
command line reaches collectors only through the plugin manager.

Read from the source (ast), not from what happens to be imported at run time, so an import inside
a function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from gpuflow.core import snapshot

PACKAGE = Path(__file__).resolve().parents[2] / "gpuflow"
FORBIDDEN = {
    "core": ("gpuflow.collectors", "gpuflow.transport", "gpuflow.cli"),
    "cli": ("gpuflow.collectors",),
}
#: The snapshot schema's field names describe the data, not a collector (cupti_status, ...).
SCHEMA_FIELDS = {f.name for cls in vars(snapshot).values()
                 if isinstance(cls, type) and dataclasses.is_dataclass(cls) for f in dataclasses.fields(cls)}


def modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def imported(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from ... import`` in this file names, made absolute."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_it_must_not_know(layer):
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
           for path in modules(layer) for line, name in imported(path)
           if name.startswith(FORBIDDEN[layer])]
    assert not bad, "\n".join(bad)


def code_names(path: Path) -> list[tuple[int, str]]:
    """Identifiers and string constants of a module's code: docstrings and comments left out."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.arg):
            found.append((node.lineno, node.arg))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.append((node.lineno, node.name))
    return found


def default_plugin_lines() -> range:
    """The lines of core/plugins.py's DEFAULT_PLUGINS: the one place the core names collectors."""
    tree = ast.parse((PACKAGE / "core" / "plugins.py").read_text())
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == "DEFAULT_PLUGINS" for t in targets):
            return range(node.lineno, node.end_lineno + 1)
    raise AssertionError("core/plugins.py has no DEFAULT_PLUGINS")


def test_the_core_names_no_collector_outside_the_default_plugin_list():
    allowed = default_plugin_lines()
    bad = []
    for path in modules("core"):
        for line, text in code_names(path):
            if text in SCHEMA_FIELDS or (path.name == "plugins.py" and line in allowed):
                continue
            if any(word in text.lower() for word in ("nvml", "cupti", "collectors.")):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}")
    assert not bad, "\n".join(bad)


def test_no_test_module_imports_another_folders_conftest():
    """Shared test helpers live in tests/support and shared fixtures in tests/conftest.py."""
    tests = PACKAGE.parent / "tests"
    bad = []
    for path in sorted(tests.rglob("*.py")):
        folder = path.relative_to(tests).parts[0]
        for line, name in imported(path, root=PACKAGE.parent):
            parts = name.split(".")
            if parts[0] == "tests" and len(parts) > 1 and parts[1] not in (folder, "conftest"):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name}")
    assert not bad, "\n".join(bad)


def test_the_checks_see_what_they_are_meant_to(tmp_path):
    """The walkers find an import inside a function, a relative one, and a name in code only."""
    module = tmp_path / "gpuflow" / "core" / "sample.py"
    module.parent.mkdir(parents=True)
    module.write_text('"""Mentions NVML in its docstring only."""\n'
                      "def f():\n    from gpuflow.collectors.nvml import plugin\n"
                      "from ..transport import app\n"
                      "SOURCE = 'cupti'\n")
    names = [name for _, name in imported(module, root=tmp_path)]
    assert "gpuflow.collectors.nvml" in names and "gpuflow.transport.app" in names
    texts = [text for _, text in code_names(module)]
    assert "cupti" in texts and not any("NVML" in t for t in texts)
