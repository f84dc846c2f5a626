"""The plugin-manager factory: hookspecs, blocked names, entry points, built-ins, --plugin modules.

Never builds a manager at import time (entry points can have side effects, and collectors must
start inside the serving process). Order, as pluggy's and tox's hosts do it:

1. ``add_hookspecs``;
2. block the names in ``GPUFLOW_DISABLED_PLUGINS`` (comma-separated), so neither an entry point
   nor a built-in of that name is registered (e.g. ``GPUFLOW_DISABLED_PLUGINS=cupti``);
3. third-party collectors from the entry-point group ``gpuflow.collectors`` (skipped when
   ``GPUFLOW_DISABLE_PLUGIN_AUTOLOAD=1``);
4. the built-ins in ``DEFAULT_PLUGINS``, registered exactly the way third-party ones are;
5. modules named with ``--plugin MODULE`` (import names);
6. ``check_pending`` — a misspelled hook name fails loudly here, not silently later.

:func:`declared_options` asks every plugin for its options (the ``declare_options`` hook), for the
command line to offer their flags before any agent exists.
"""

from __future__ import annotations

import importlib
import os
from typing import Iterable

import pluggy

from gpuflow.core import hookspecs
from gpuflow.core.options import PluginOptions

ENTRY_POINT_GROUP = "gpuflow.collectors"

#: Built-in collectors: (plugin name, module). None is essential; each can be disabled by name.
DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("nvml", "gpuflow.collectors.nvml.plugin"),
    ("cupti", "gpuflow.collectors.cupti.plugin"),
    ("pmsampling", "gpuflow.collectors.pmsampling.plugin"),
    ("recording", "gpuflow.collectors.recording.plugin"),
    ("fleet", "gpuflow.collectors.fleet.plugin"),
)


class PluginLoadError(Exception):
    """A ``--plugin`` module could not be imported or is not a valid collector."""


def disabled_plugin_names(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    return [n.strip() for n in env.get("GPUFLOW_DISABLED_PLUGINS", "").split(",") if n.strip()]


def _import(module_name: str, failure: str):
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure becomes one clear line
        raise PluginLoadError(f"{failure}: {type(exc).__name__}: {exc}") from exc


def get_plugin_manager(
    extra_modules: Iterable[str] = (),
    environ: dict[str, str] | None = None,
) -> pluggy.PluginManager:
    env = os.environ if environ is None else environ
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for name in disabled_plugin_names(env):
        pm.set_blocked(name)
    if env.get("GPUFLOW_DISABLE_PLUGIN_AUTOLOAD") != "1":
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for name, module_name in DEFAULT_PLUGINS:
        if pm.is_blocked(name):
            continue
        pm.register(_import(module_name, f"built-in collector {name!r} ({module_name}) is broken"), name=name)
    for module_name in extra_modules:
        if pm.is_blocked(module_name):
            continue
        module = _import(module_name, f"cannot import collector module {module_name!r}")
        if pm.is_registered(module):
            continue
        marker = f"{hookspecs.PROJECT_NAME}_impl"
        if not any(hasattr(getattr(module, attr, None), marker) for attr in dir(module)):
            raise PluginLoadError(f"{module_name!r} is not a GPUFlow collector: it defines no "
                                  "@gpuflow.hookimpl function (see docs/plugins.md)")
        pm.register(module, name=module_name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginLoadError(str(exc)) from exc
    return pm


def declared_options(pm: pluggy.PluginManager) -> list[PluginOptions]:
    """Every plugin's declared options, in plugin-name order; PluginLoadError names a broken one.

    Two plugins may not declare the same key, flag or environment variable: each setting has one
    owner.
    """
    found: list[PluginOptions] = []
    owners: dict[str, str] = {}
    impls = sorted(pm.hook.declare_options.get_hookimpls(), key=lambda impl: impl.plugin_name)
    for impl in impls:
        try:
            declared = impl.function()
        except Exception as exc:  # noqa: BLE001 - any failure becomes one clear line
            raise PluginLoadError(f"collector {impl.plugin_name!r} failed to declare its options: "
                                  f"{type(exc).__name__}: {exc}") from exc
        if declared is None:
            continue
        if not isinstance(declared, PluginOptions):
            raise PluginLoadError(f"collector {impl.plugin_name!r} declared its options as a "
                                  f"{type(declared).__name__}, not gpuflow.core.options.PluginOptions")
        names = [f"key {declared.plugin}"] + [f"{kind} {value}" for o in declared.options
                                              for kind, value in (("flag", o.flag), ("variable", o.env))
                                              if value]
        for name in names:
            if name in owners:
                raise PluginLoadError(f"collectors {owners[name]!r} and {impl.plugin_name!r} both "
                                      f"declare the {name}")
            owners[name] = impl.plugin_name
        found.append(declared)
    return found
