"""``check``'s values: the policy a check judges by (:class:`Policy`) and its verdict (:class:`CheckResult`,
``patchguard.check/1``).

The policy is read from its ``[tool.patchguard]`` table here (:meth:`Policy.from_table`: every unusable value
a :class:`~patchguard.config.ConfigError` naming the key); finding the file and reading it is
:func:`patchguard.deploy.check.policy.load_policy`'s. The gate that makes the verdict is
:mod:`patchguard.deploy.check.gate`.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import KNOWN_KEYS, Config, ConfigError, config_of
from ..model import Finding, Report, Severity, Violation, json_name_or_none
from ..rulebook import FILE_RULES, RULES, known_rule

__all__ = ["CHECK_SCHEMA", "CheckResult", "Policy"]

CHECK_SCHEMA = "patchguard.check/1"

_IGNORE_KEYS = {"path", "rule", "distribution"}


@dataclass(frozen=True, slots=True)
class Policy:
    """What a check tolerates. The default policy fails on ``high`` findings only."""

    fail_on: Severity | None = Severity.HIGH  # None: never
    allowed_sets: tuple[str, ...] = ()
    required_sets: tuple[str, ...] = ()
    expected_files: tuple[str, ...] = ()
    ignore: tuple[dict[str, str], ...] = ()
    path: str | None = None
    patches: str | None = None  # where the sets live, relative to the policy file
    running: str = "ignore"  # a stale server process: "fail" the check, "warn" on stderr, or "ignore"
    frameworks: tuple[str, ...] = ()  # framework = "vllm": what serves
    architectures: tuple[str, ...] = ()  # arch = ["DeepseekV3ForCausalLM"]
    model_config: str | None = None  # a config.json whose architectures are served
    settings: Config = field(default_factory=Config)  # where pristine wheels come from (wheelhouse, …)

    @classmethod
    def from_table(cls, table: dict[str, Any], path: str | None) -> Policy:
        """The policy of a ``[tool.patchguard]`` table; every unusable value is a :class:`ConfigError`."""
        unknown = sorted(set(table) - KNOWN_KEYS)
        if unknown:
            raise ConfigError(
                f"unknown policy key {unknown[0]!r}",
                path=path,
                hint=f"known keys: {', '.join(sorted(KNOWN_KEYS))}",
            )
        patches = table.get("patches")
        if patches is not None and not isinstance(patches, str):
            raise ConfigError("patches must be a path", path=path)
        if patches and path:
            patches = os.path.join(os.path.dirname(os.path.abspath(path)), patches)
        if patches and not os.path.isdir(patches):
            raise ConfigError(f"patches: no such directory {patches}", path=path, hint="fix the path")
        running = table.get("running", "ignore")
        if running not in ("fail", "warn", "ignore"):
            raise ConfigError(f"running = {running!r}: expected fail, warn or ignore", path=path)
        model_config = table.get("model_config")
        if model_config is not None and not isinstance(model_config, str):
            raise ConfigError("model_config must be the path of a config.json", path=path)
        if model_config and path:
            model_config = os.path.join(os.path.dirname(os.path.abspath(path)), model_config)
        return cls(
            _fail_on(table.get("fail_on", "high"), path),
            _names(table, "allowed_sets", path),
            _names(table, "required_sets", path),
            _names(table, "expected_files", path),
            _ignore_rules(table.get("ignore", []), path),
            path,
            patches,
            running,
            _one_or_many(table, "framework", path),
            _one_or_many(table, "arch", path),
            model_config,
            config_of(path, table) if path else Config(),
        )

    @property
    def wanted_sets(self) -> frozenset[str]:
        """The sets the policy wants in place or accepts: no hint ever suggests reverting them."""
        return frozenset((*self.allowed_sets, *self.required_sets))

    def check_set_names(self, known: Sequence[str], where: str) -> None:
        """An ``allowed_sets`` name that is no set of ``known`` is a typo: an error with a suggestion (a
        missing required set is a violation of the check, said there)."""
        for name in self.allowed_sets:
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=1)
                hint = (
                    f"did you mean {close[0]!r}?"
                    if close
                    else f"sets in {where}: {', '.join(known) or 'none'}"
                )
                raise ConfigError(
                    f"allowed_sets names {name!r}, which is no patch set", path=self.path, hint=hint
                )

    def ignores(self, f: Finding) -> bool:
        for rule in self.ignore:
            if "rule" in rule and rule["rule"] != f.rule:
                continue
            if "distribution" in rule and rule["distribution"] != f.distribution:
                continue
            if "path" in rule and not fnmatch.fnmatchcase(f.path, rule["path"]):
                continue
            return True
        if any(fnmatch.fnmatchcase(f.path, g) for g in self.expected_files):
            return True  # declared expected: the file and what is in it
        return f.patch_set is not None and f.patch_set_exact and f.patch_set in self.allowed_sets

    def violates(self, f: Finding) -> bool:
        return self.fail_on is not None and f.severity >= self.fail_on and not self.ignores(f)


def _fail_on(text: object, path: str | None) -> Severity | None:
    """``fail_on``: a severity label, or ``"never"`` (``None``)."""
    if text == "never":
        return None
    try:
        fail_on = Severity.parse(text) if isinstance(text, str) else None
    except ValueError:
        fail_on = None
    if fail_on is None or fail_on is Severity.NONE:
        raise ConfigError(f"fail_on = {text!r}: expected high, moderate, minor, info or never", path=path)
    return fail_on


def _one_or_many(table: dict[str, Any], key: str, path: str | None) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a name or a list of names", path=path)
    return tuple(value)


def _names(table: dict[str, Any], key: str, path: str | None) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings", path=path)
    return tuple(value)


def _ignore_rules(ignore: object, path: str | None) -> tuple[dict[str, str], ...]:
    """``ignore``: tables of ``path`` / ``rule`` / ``distribution`` strings."""
    if not isinstance(ignore, list):
        raise ConfigError('ignore must be a list of tables like {rule = "print"}', path=path)
    rules: list[dict[str, str]] = []
    for i, item in enumerate(ignore):
        if not isinstance(item, dict) or not item:
            raise ConfigError(f"ignore[{i}] must be a table with path, rule and/or distribution", path=path)
        bad = sorted(set(item) - _IGNORE_KEYS)
        if bad:
            raise ConfigError(
                f"ignore[{i}]: unknown key {bad[0]!r} (use path, rule, distribution)", path=path
            )
        if not all(isinstance(v, str) for v in item.values()):
            raise ConfigError(f"ignore[{i}]: values must be strings", path=path)
        if "rule" in item and not known_rule(item["rule"]):
            close = difflib.get_close_matches(item["rule"], [*RULES, *FILE_RULES], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"ignore[{i}]: unknown rule {item['rule']!r}",
                path=path,
                hint=f"{hint}the rule ids are listed in the README",
            )
        rules.append(dict(item))
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict of a check: ``passed``, every violation (one line each), and the scan behind it."""

    passed: bool
    violations: tuple[str, ...]
    report: Report
    policy: Policy = field(default_factory=Policy)
    # The violations as objects, in the same order.
    details: tuple[Violation, ...] = ()
    warnings: tuple[str, ...] = ()  # said on stderr, not violations (policy running = "warn")

    def to_json(self) -> dict[str, Any]:
        """``patchguard.check/1``, the report behind it included: ``violations`` one line each for people,
        ``details`` the same as objects for programs (a set's name in the JSON name encoding, like the
        policy's path; the finding is the report's)."""
        return {
            "schema": CHECK_SCHEMA,
            "passed": self.passed,
            "violations": list(self.violations),
            "details": [d.to_json() for d in self.details],
            "policy": json_name_or_none(self.policy.path),
            "report": self.report.to_json(),
        }
