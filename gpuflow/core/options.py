"""Collector options: how a plugin declares its own settings, and how their values are found.

A plugin owns its options, as a datasette plugin owns its ``plugin_config``: it declares them in
one :class:`PluginOptions` (under a key of its own choosing, e.g. ``"cupti"``) returned from the
``declare_options`` hook, and reads them with ``context.plugin_options(OPTIONS)``. Each
:class:`Option` may offer a command-line flag (``gpuflow watch``/``run`` add it to their parser,
so ``gpuflow --help`` lists it) and an environment variable (read by the CLI and by ``get_app()``
under gunicorn alike). An option's value is, in this order:

1. the value given in ``AgentConfig.options[<key>][<name>]`` — the CLI puts a flag there when it
   was given on the command line; code (tests, embedders) puts values there directly;
2. else its environment variable, when set and not empty;
3. else its default.

Every given or environment value goes through the option's own ``convert`` (text or an already
typed value in, the value out, ``ValueError`` with a plain reason otherwise), so the plugin that
owns an option is the one that validates it. Defaults are trusted and not converted.

Constraints: pure (no I/O besides reading the mapping it is given as the environment); importable
without starting anything; names no collector.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: The ``gpuflow`` subcommands a flag can be offered on.
COMMANDS = ("watch", "run", "open", "hub")


class OptionError(ValueError):
    """A value of a plugin option is wrong; the message names where it came from."""


@dataclass(frozen=True)
class Option:
    """One setting of a plugin.

    :param name: the key in the plugin's options (``ring_capacity``).
    :param convert: text or a typed value → the value; ``ValueError`` with a reason otherwise.
    :param default: the value when nothing is given (not converted).
    :param help: one line for ``--help`` and the docs.
    :param flag: the command-line flag (``--ring-capacity``), or None for none.
    :param env: the environment variable (``GPUFLOW_RING_CAPACITY``), or None for none.
    :param metavar: how ``--help`` names the flag's value.
    :param commands: the subcommands that offer the flag (a subset of :data:`COMMANDS`; by default
        ``watch`` and ``run``).
    :param switch: the flag takes no value and turns the option on (``True``).
    :param repeatable: the flag may be given more than once; ``convert`` then gets the list of
        the texts given (and, from the environment, the variable's text as it is).
    """

    name: str
    convert: Callable[[Any], Any]
    default: Any
    help: str
    flag: str | None = None
    env: str | None = None
    metavar: str | None = None
    commands: tuple[str, ...] = ("watch", "run")
    switch: bool = False
    repeatable: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"option name {self.name!r} is not an identifier")
        if self.flag is not None and not (self.flag.startswith("--") and len(self.flag) > 2):
            raise ValueError(f"option {self.name!r}: flag {self.flag!r} must start with '--'")
        unknown = set(self.commands) - set(COMMANDS)
        if unknown:
            raise ValueError(f"option {self.name!r}: unknown commands {sorted(unknown)}")
        if self.switch and self.repeatable:
            raise ValueError(f"option {self.name!r}: a switch cannot be repeatable")


@dataclass(frozen=True)
class PluginOptions:
    """Everything one plugin can be configured with, under its own key of ``AgentConfig.options``."""

    plugin: str
    options: tuple[Option, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"plugin {self.plugin!r} declares an option twice: {names}")

    def resolve(self, given: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
        """The value of every option (given, else environment, else default); OptionError if wrong."""
        unknown = sorted(set(given) - {o.name for o in self.options})
        if unknown:
            raise OptionError(f"{self.plugin}: unknown option(s) {', '.join(unknown)}; it has "
                              f"{', '.join(o.name for o in self.options) or 'none'}")
        values: dict[str, Any] = {}
        for option in self.options:
            if option.name in given:
                where, raw = option.flag or f"{self.plugin} option {option.name}", given[option.name]
            elif option.env and environ.get(option.env, "").strip():
                where, raw = option.env, environ[option.env].strip()
            else:
                values[option.name] = option.default
                continue
            try:
                values[option.name] = option.convert(raw)
            except (TypeError, ValueError) as exc:
                raise OptionError(f"{where}: {exc}") from None
        return values


def boolean(value: Any) -> bool:
    """A switch: a bool, or ``1/0``, ``true/false``, ``yes/no``, ``on/off`` as text."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"expected 1/0, true/false, yes/no or on/off, got {value!r}")

