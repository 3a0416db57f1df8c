"""``[tool.patchguard]`` in the nearest ``pyproject.toml``, or a ``patchguard.toml``.

Configuration comes from the operator, never from the environment under inspection: ``$PATCHGUARD_CONFIG``
(a file), else the current directory upwards — unless the current directory is inside a Python environment
(a venv or conda prefix, a ``site-packages``), where anyone who can write the environment could plant
``fail_on = "never"`` — else ``/etc/patchguard.toml``. The first file that has a patchguard table wins.
Unknown keys and values of the wrong type are errors naming the file and the key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._fs import parse_toml, read_input
from .errors import PatchguardError

__all__ = [
    "KNOWN_KEYS",
    "POLICY_KEYS",
    "SETTING_KEYS",
    "Config",
    "ConfigError",
    "config_of",
    "find_config",
    "load_config",
    "patchguard_table",
    "read_toml",
]

# Every key of [tool.patchguard], defined once. Policy keys are validated by patchguard.deploy.check.policy.
POLICY_KEYS = frozenset(
    {
        "fail_on",
        "allowed_sets",
        "required_sets",
        "expected_files",
        "ignore",
        "running",
        "framework",
        "arch",
        "model_config",
    }
)
SETTING_KEYS = frozenset(
    {
        "wheelhouse",
        "patches",
        "keep_backups",
        "offline",
        "index_url",
        "extra_index_url",
        "find_links",
        "profiles",
    }
)
KNOWN_KEYS = POLICY_KEYS | SETTING_KEYS


class ConfigError(PatchguardError):
    """A configuration or TOML file that cannot be used as it is."""


@dataclass(frozen=True, slots=True)
class Config:
    """The settings patchguard reads from configuration (paths already made absolute)."""

    path: str | None = None
    wheelhouse: list[str] = field(default_factory=list)
    patches: str | None = None
    keep_backups: int | None = None  # how many committed transactions keep their backups
    offline: bool = False  # never fetch a pristine wheel from an index
    index_url: str | None = None
    extra_index_url: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)  # framework profile files (TOML)


def read_toml(path: str) -> dict[str, Any]:
    """Parse a TOML file; a syntax error is a :class:`ConfigError` naming the file and line."""
    try:
        return parse_toml(read_input(path))
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror or exc})", path=path) from None
    except ValueError as exc:  # syntax, encoding, nesting
        raise ConfigError(f"invalid TOML ({exc})", path=path, hint="fix the syntax") from None


def patchguard_table(doc: dict[str, Any], path: str, default: dict[str, Any] | None) -> dict[str, Any] | None:
    """``[tool.patchguard]`` of a parsed TOML document (``default`` when there is none)."""
    tool = doc.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError("'tool' must be a table", path=path)
    table = tool.get("patchguard", default)
    if table is not None and not isinstance(table, dict):
        raise ConfigError("[tool.patchguard] must be a table", path=path)
    return table


SYSTEM_CONFIG = "/etc/patchguard.toml"


def find_config(start: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """The operator's file holding patchguard settings, with its table (see the module docstring)."""
    explicit = os.environ.get("PATCHGUARD_CONFIG", "").strip()
    if explicit:
        if not os.path.isfile(explicit):
            raise ConfigError(
                "$PATCHGUARD_CONFIG names no file", path=explicit, hint="fix or unset $PATCHGUARD_CONFIG"
            )
        return _settings_of(explicit)
    here = os.path.abspath(start or os.getcwd())
    found = None if inside_an_environment(here) else _nearest(here)
    if found is None and os.path.isfile(SYSTEM_CONFIG):
        found = _settings_of(SYSTEM_CONFIG)
    return found


def inside_an_environment(path: str) -> bool:
    """Whether ``path`` lies in a Python environment: below a ``site-packages``/``dist-packages``
    directory, or below a directory holding ``pyvenv.cfg`` or ``conda-meta``."""
    real = os.path.realpath(path)
    if {"site-packages", "dist-packages"} & set(real.split(os.sep)):
        return True
    here = real
    while True:
        if os.path.isfile(os.path.join(here, "pyvenv.cfg")) or os.path.isdir(
            os.path.join(here, "conda-meta")
        ):
            return True
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent


def _settings_of(path: str) -> tuple[str, dict[str, Any]]:
    """A file named on purpose: a ``pyproject.toml``'s patchguard table (empty if none), else the file."""
    doc = read_toml(path)
    if os.path.basename(path) == "pyproject.toml":
        return path, patchguard_table(doc, path, default=None) or {}
    table = patchguard_table(doc, path, default=doc)
    return path, table if table is not None else doc


def _nearest(here: str) -> tuple[str, dict[str, Any]] | None:
    """The nearest file, from ``here`` upwards, holding patchguard settings."""
    while True:
        own = os.path.join(here, "patchguard.toml")
        if os.path.isfile(own):
            doc = read_toml(own)
            table = patchguard_table(doc, own, default=doc)
            return own, table if table is not None else doc
        project = os.path.join(here, "pyproject.toml")
        if os.path.isfile(project):
            table = patchguard_table(read_toml(project), project, default=None)
            if table is not None:
                return project, table
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def load_config(start: str | None = None) -> Config:
    found = find_config(start)
    if found is None:
        return Config()
    return config_of(*found)


def config_of(path: str, table: dict[str, Any]) -> Config:
    """The settings of one ``[tool.patchguard]`` table (or patchguard.toml) read from ``path``."""
    base = os.path.dirname(os.path.abspath(path))
    extra = sorted(set(table) - KNOWN_KEYS - {"tool"})
    if extra:
        raise ConfigError(
            f"unknown key{'s' if len(extra) > 1 else ''} in [tool.patchguard]: {', '.join(extra)}",
            path=path,
            hint=f"known keys: {', '.join(sorted(KNOWN_KEYS))}",
        )
    wheelhouse = table.get("wheelhouse", [])
    wheelhouse = [wheelhouse] if isinstance(wheelhouse, str) else wheelhouse
    _check(path, "wheelhouse", wheelhouse, _texts, "a path or a list of paths")
    patches = _check(path, "patches", table.get("patches"), _text_or_none, "a path")
    keep = table.get("keep_backups")
    _check(path, "keep_backups", keep, _count_or_none, "a whole number, 0 or more")
    offline = _check(path, "offline", table.get("offline", False), _flag, "true or false")
    index_url = _check(path, "index_url", table.get("index_url"), _text_or_none, "a URL")
    return Config(
        path=path,
        wheelhouse=[os.path.join(base, w) for w in wheelhouse],
        patches=os.path.join(base, patches) if patches else None,
        keep_backups=keep,
        offline=offline,
        index_url=index_url,
        extra_index_url=_strings(table, "extra_index_url", path),
        find_links=[_local(base, w) for w in _strings(table, "find_links", path)],
        profiles=[os.path.join(base, p) for p in _strings(table, "profiles", path)],
    )


def _check(path: str, key: str, value: Any, ok: Callable[[object], bool], says: str) -> Any:
    """``value`` of ``key`` when ``ok`` says it has the right type, else :class:`ConfigError` saying what
    it must be."""
    if not ok(value):
        raise ConfigError(f"{key} must be {says}", path=path)
    return value


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _count_or_none(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _flag(value: object) -> bool:
    return isinstance(value, bool)


def _strings(table: dict[str, Any], key: str, path: str) -> list[str]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a string or a list of strings", path=path)
    return value


def _local(base: str, location: str) -> str:
    """A find-links entry: a URL as it is, a path relative to the configuration file."""
    return location if "://" in location else os.path.join(base, location)
