"""What the core hands every collector: the agent's configuration, its options, a wake-up call.

Constraints: created once per agent, inside the process that serves requests (and by ``gpuflow
doctor`` without an agent); shared by the frame thread and the collectors' own threads, so
``notify`` is thread-safe and cheap (it only sets an event) and :meth:`plugin_options` is
computed once per plugin under a lock.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from gpuflow.core.gc_policy import AGENT_GC_YOUNG_THRESHOLD
from gpuflow.core.gil import AGENT_SWITCH_INTERVAL_S
from gpuflow.core.options import PluginOptions

DEFAULT_INTERVAL_S = 1.0


@dataclass(frozen=True)
class AgentConfig:
    """What the agent is configured with. Built by the CLI or by ``get_app()`` from the environment.

    Only what the core itself and every collector share lives here; each plugin's own settings
    are in ``options[<the plugin's key>]`` (docs/plugins.md, "Options"), declared and checked by
    that plugin.
    """

    interval_s: float = DEFAULT_INTERVAL_S  #: NVML polling period; also the frame loop's idle wake-up
    show_cmdline: bool = False  #: full command lines (else the executable only)
    #: the interpreter's switch interval while the agent runs, at most (gpuflow.core.gil)
    switch_interval_s: float = AGENT_SWITCH_INTERVAL_S
    #: the cyclic garbage collector's young threshold while the agent runs; 0: the interpreter's
    #: policy untouched (gpuflow.core.gc_policy)
    gc_young_threshold: int = AGENT_GC_YOUNG_THRESHOLD
    #: per plugin key, the option values given on the command line or in code
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class CollectorContext:
    """Passed to every hook. ``slots`` holds per-agent collector state, keyed by plugin name."""

    def __init__(self, config: AgentConfig, wake: threading.Event | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.slots: dict[str, Any] = {}
        self._wake = wake if wake is not None else threading.Event()
        self._environ = os.environ if environ is None else environ
        self._options: dict[str, Mapping[str, Any]] = {}
        self._options_lock = threading.Lock()

    def plugin_options(self, declared: PluginOptions) -> Mapping[str, Any]:
        """The values of a plugin's options (given, else environment, else default).

        Computed once per plugin key and agent. Raises
        :class:`~gpuflow.core.options.OptionError` naming the flag, variable or key that is wrong.
        """
        with self._options_lock:
            values = self._options.get(declared.plugin)
            if values is None:
                given = self.config.options.get(declared.plugin, {})
                values = self._options[declared.plugin] = declared.resolve(given, self._environ)
            return values

    def notify(self) -> None:
        """Tell the core a collector has new data; a frame follows within 50 ms."""
        self._wake.set()

    @property
    def wake_event(self) -> threading.Event:
        return self._wake
