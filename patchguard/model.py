"""The types every stage speaks: :class:`Severity`, :class:`Kind`, :class:`Reach`, :class:`GateKind`,
:class:`Finding`, :class:`Report`.

Pure values, importing nothing else of patchguard: the bottom of the house. Formatting them is
:mod:`patchguard.formats`; the JSON shape (``schema: patchguard.report/1``, documented in
``docs/reference.md``) is the stable contract, and :meth:`Report.to_json` is its one definition.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PLAN_SCHEMA",
    "REPORT_SCHEMA",
    "AppliedSet",
    "CaptureDocument",
    "Environment",
    "EnvironmentStatus",
    "Finding",
    "GateKind",
    "Kind",
    "Loaded",
    "NoBaseline",
    "PlanVerdict",
    "PlannedEdit",
    "PlannedFile",
    "PlannedSet",
    "Reach",
    "Reinstall",
    "Report",
    "RestoreDocument",
    "RollbackResult",
    "RuleId",
    "SetChange",
    "SetFileChange",
    "SetState",
    "SetStatus",
    "Severity",
    "Upgrade",
    "UpgradePlan",
    "for_terminal",
    "from_json_name",
    "json_name",
    "json_name_or_none",
    "printable",
]

REPORT_SCHEMA = "patchguard.report/1"


class Severity(enum.IntEnum):
    """How bad a finding is; ordered, so ``report.worst >= Severity.HIGH`` reads as it should.

    ``NONE`` is never the severity of a finding: it is the :attr:`Report.worst` of a clean report.
    """

    NONE = 0
    INFO = 1
    MINOR = 2
    MODERATE = 3
    HIGH = 4

    @property
    def label(self) -> str:
        """The lowercase name used in JSON and on the command line (``"high"``)."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """``"moderate"`` → ``Severity.MODERATE``; raises ``ValueError`` for anything else."""
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}") from None


class Kind(str, enum.Enum):
    """What a finding is about (the ``kind`` field of the report JSON)."""

    MODIFIED = "modified"
    MISSING = "missing"
    UNEXPECTED = "unexpected"
    STARTUP_HOOK = "startup-hook"
    RECORD_INVALID = "record-invalid"
    UNVERIFIABLE = "unverifiable"
    INJECTED_CODE = "injected-code"
    FUNCTIONAL_CHANGE = "functional-change"
    COSMETIC_CHANGE = "cosmetic-change"
    DRIFT = "drift"


class Reach(str, enum.Enum):
    """Will the changed code run in the server (the ``reach`` field of the report JSON)?"""

    ACTIVE = "active"  # on the live path
    CONDITIONAL = "conditional"  # on the live path, behind a gate
    DORMANT = "dormant"  # not on the live path
    UNKNOWN = "unknown"  # nothing tells


class Loaded(str, enum.Enum):
    """Bytecode evidence: was the changed file imported since its edit? (``loaded`` in the report JSON)

    Separate from :class:`Reach`: a file not loaded since the edit is not dormant, its edit takes effect at
    the next restart.
    """

    SINCE_EDIT = "since-edit"  # bytecode compiled from the edited source
    BEFORE_EDIT = "before-edit"  # bytecode older than the edit: not loaded since
    NEVER = "never"  # no bytecode while its neighbours have some
    UNKNOWN = "unknown"  # nothing tells (no bytecode anywhere, a racy timestamp)

    @property
    def words(self) -> str:
        """The evidence in the words the table shows."""
        return _LOADED_WORDS[self]


_LOADED_WORDS = {
    Loaded.SINCE_EDIT: "loaded since the edit",
    Loaded.BEFORE_EDIT: "not loaded since the edit: takes effect at the next restart",
    Loaded.NEVER: "never loaded here: takes effect when something imports it",
    Loaded.UNKNOWN: "cannot tell whether it was loaded since the edit",
}


class GateKind(str, enum.Enum):
    """What guards a code finding (the ``gate.kind`` field of the report JSON)."""

    ENV = "env"  # an environment variable
    SHAPE = "shape"  # a tensor shape, size, numel() or len() compared with a literal
    FLAG = "flag"  # a module-level debug flag
    DEAD = "dead"  # code that cannot run (if False:, after return, if TYPE_CHECKING:)
    CONDITION = "condition"  # any other condition


@dataclass(frozen=True, slots=True)
class Gate:
    """What guards a code finding: the kind of its condition, and the condition as written (``not (…)`` in an
    ``else``; "unreachable" for dead code)."""

    kind: GateKind
    condition: str

    def to_json(self) -> dict[str, str]:
        """The report JSON's ``gate`` object."""
        return {"kind": self.kind.value, "condition": self.condition}


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing patchguard found wrong (or worth knowing) in the environment.

    ``path`` is POSIX and relative to the site-packages directory that holds the file, or absolute when the
    file lies outside every site directory (console scripts). ``distribution`` is ``None`` for files no
    distribution owns (a stray ``.pth``, ``sitecustomize.py``).
    """

    kind: Kind
    severity: Severity
    rule: RuleId
    path: str
    message: str
    distribution: str | None = None
    version: str | None = None
    line: int | None = None
    end_line: int | None = None
    function: str | None = None
    gate: Gate | None = None
    reach: Reach | None = None
    loaded: Loaded | None = None
    evidence: tuple[str, ...] = ()
    patch_set: str | None = None
    source: str | None = None  # the installed line a code finding points at
    # Whether the file's modification is exactly the patch set's (False: the set plus other changes).
    patch_set_exact: bool = True
    # ``sha256:<hex>`` of the file as it is now, for a finding about a changed file's bytes (modified,
    # unexpected, a startup hook, and the code findings of such a file); ``None`` otherwise.
    digest: str | None = None
    # (name, version) of the distribution whose copy of a file is installed, for a file two distributions
    # list (``overwritten``): this finding's distribution lost it to that one.
    owned_by: tuple[str, str] | None = None

    @property
    def baseline_none(self) -> bool:
        """A code finding of a file judged whole, with no pristine source: it may be upstream code."""
        return "baseline: none" in self.evidence

    def to_json(self) -> dict[str, Any]:
        """The finding as the stable JSON object (``patchguard.report/1``, ``findings``)."""
        doc: dict[str, Any] = {
            "kind": self.kind.value,
            "severity": self.severity.label,
            "rule": self.rule,
            "distribution": json_name_or_none(self.distribution),
            "version": json_name_or_none(self.version),
            "path": json_name(self.path),
            "digest": self.digest,
            "line": self.line,
            "end_line": self.end_line,
            "function": _text(self.function),
            "gate": _gate_json(self.gate),
            "reach": self.reach.value if self.reach is not None else None,
            "loaded": self.loaded.value if self.loaded is not None else None,
            "evidence": [printable(e) for e in self.evidence],
            "patch_set": json_name_or_none(self.patch_set),
            "message": printable(self.message),
            "source": printable(self.source) if self.source is not None else None,
        }
        if self.baseline_none:
            doc["baseline"] = "none"
        if self.owned_by is not None:
            name, version = self.owned_by
            doc["owned_by"] = {"distribution": json_name(name), "version": json_name(version)}
        return doc

    @property
    def sort_key(self) -> tuple[str, str, int]:
        return (self.distribution or "~", self.path, self.line or 0)


@dataclass(frozen=True, slots=True)
class NoBaseline:
    """A distribution with changed files and no pristine source: named once in the summary, with the one
    thing to do (``summary.no_baseline`` in the report JSON)."""

    distribution: str
    version: str
    reason: str
    hint: str

    def to_json(self) -> dict[str, str]:
        return {
            "distribution": json_name(self.distribution),
            "version": json_name(self.version),
            "reason": printable(self.reason),
            "hint": printable(self.hint),
        }


@dataclass(frozen=True, slots=True)
class Environment:
    """The interpreter and site directories a report is about."""

    python: str
    prefix: str
    site_packages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Violation:
    """One violation of a check, as an object for programs: what kind (``finding``, ``required-set``,
    ``lock``, ``running``), its line for people, and the finding or the set it is about."""

    kind: str
    text: str
    finding: Finding | None = None
    set_name: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``details`` object of ``patchguard.check/1``."""
        out: dict[str, Any] = {"type": self.kind, "text": self.text}
        if self.finding is not None:
            out["finding"] = self.finding.to_json()
        if self.set_name is not None:
            out["set"] = json_name(self.set_name)
        return out


@dataclass(frozen=True, slots=True)
class Report:
    """The result of a scan: what was checked and every finding, worst first within each distribution.

    >>> r = Report(environment=Environment("3.11.7", "/venv", ("/venv/lib/python3.11/site-packages",)),
    ...            distributions=(), files_checked=0, findings=())
    >>> r.worst >= Severity.HIGH
    False
    """

    environment: Environment
    distributions: tuple[tuple[str, str], ...]
    files_checked: int
    findings: tuple[Finding, ...]
    tool_version: str = ""
    seconds: float = 0.0
    files_hashed: int = 0
    recovered: tuple[str, ...] = ()  # files an interrupted transaction's rollback put back first
    # Who held the environment in trial states while it was read ("bisect (pid 4242)"): what the report
    # says is a trial state, not the environment (``None``: no session ran).
    trial: str | None = None
    no_baseline: tuple[NoBaseline, ...] = ()  # changed distributions no pristine source was found for
    host: str = ""  # the host the scan ran on (what ``fleet`` shows beside a document's file name)
    time: str = ""  # when it ran, ISO 8601 UTC (``2025-01-31T12:00:00Z``)
    applied_sets: tuple[tuple[str, str], ...] = ()  # the sets in place (name, digest), as a lock lists them

    @property
    def worst(self) -> Severity:
        """The highest severity among the findings, ``Severity.NONE`` when there are none."""
        return max((f.severity for f in self.findings), default=Severity.NONE)

    def at_or_above(self, threshold: Severity) -> list[Finding]:
        """Findings whose severity reaches ``threshold`` (what ``--fail-on`` counts)."""
        return [f for f in self.findings if f.severity >= threshold]

    def counts(self) -> dict[str, int]:
        """Number of findings per severity label, every label present."""
        c = Counter(f.severity for f in self.findings)
        return {s.label: c.get(s, 0) for s in reversed(Severity) if s is not Severity.NONE}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "tool": {"name": "patchguard", "version": self.tool_version},
            "host": json_name(self.host),
            "time": self.time,
            "environment": {
                "python": self.environment.python,
                "prefix": json_name(self.environment.prefix),
                "site_packages": [json_name(p) for p in self.environment.site_packages],
            },
            "summary": {
                "distributions": len(self.distributions),
                "files_checked": self.files_checked,
                "findings": self.counts(),
                **({"no_baseline": [n.to_json() for n in self.no_baseline]} if self.no_baseline else {}),
            },
            "distributions": [{"name": json_name(n), "version": json_name(v)} for n, v in self.distributions],
            "applied_sets": {json_name(name): printable(digest) for name, digest in self.applied_sets},
            "findings": [f.to_json() for f in self.findings],
        }


def json_name_or_none(name: str | None) -> str | None:
    """:func:`json_name` of a name that may be absent."""
    return json_name(name) if name is not None else None


def _gate_json(gate: Gate | None) -> dict[str, str] | None:
    """A gate as the report shows it: its condition escaped (:func:`printable`)."""
    return {k: printable(v) for k, v in gate.to_json().items()} if gate is not None else None


def _text(text: str | None) -> str | None:
    return printable(text) if text is not None else None


def printable(text: str) -> str:
    """Make a string safe to print or encode as UTF-8.

    File names that are not valid UTF-8 arrive as lone surrogates (``surrogateescape``); they are shown as
    ``\\xNN`` escapes instead of crashing the output.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate no undecodable byte gives
            return _SURROGATES.sub(_json_escape, text)
    return text


# What must never reach a terminal as it is: C0 controls (newline, carriage return, tab, ESC …), DEL and the
# C1 controls; the bidirectional overrides, isolates and marks and the line and paragraph separators (a name
# that reorders or breaks the line it is shown in); lone surrogates (undecodable bytes of a file name).
_TERMINAL_UNSAFE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x80 or 0xDC80 <= code <= 0xDCFF:  # a C0 control or DEL; an undecodable byte
        return f"\\x{code & 0xFF:02x}"
    return f"\\u{code:04x}"


def for_terminal(text: str) -> str:
    """Text of outside origin (a file name, a ``.pth`` line, a command line) as it may be shown on a terminal.

    Every control character becomes a visible escape, so no name can start a line, move the cursor or
    speak to the terminal (``\\x1b``); nor can it reorder the line it is in (``\\u202e``). Undecodable
    bytes of a file name show as ``\\xNN``. Everything else, backslashes included, is left as it is: this is
    for reading, the JSON name encoding (:func:`json_name`) is the unambiguous form.

    >>> for_terminal("a\\n  HIGH  b\\x1b[2J\\u202e.py\\udcff")
    'a\\\\n  HIGH  b\\\\x1b[2J\\\\u202e.py\\\\xff'
    """
    return _TERMINAL_UNSAFE.sub(_visible, text)


# The environment selector the command line was given (``--python PATH``, ``--site-packages DIR``), set once
# at the edge (the CLI): every command patchguard prints for a person to run carries it (:func:`command`).
_SELECTOR: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("patchguard_selector", default=())


@contextlib.contextmanager
def selecting(words: Sequence[str]) -> Iterator[None]:
    """Within the block, the environment is the one the user selected with ``words`` (``--python PATH``,
    ``--site-packages DIR``…: a target's ``selector``): the printed commands repeat them."""
    token = _SELECTOR.set(tuple(words))
    try:
        yield
    finally:
        _SELECTOR.reset(token)


def command(*words: str) -> str:
    """A patchguard command line to print for a person to run as shown: its words quoted for a shell, the
    environment selector this run was given (:func:`selecting`) added, escaped for a terminal.

    >>> command("revert", "--set", "glm5 debug")
    "patchguard revert --set 'glm5 debug'"
    """
    import shlex

    return for_terminal(" ".join(shlex.quote(w) for w in ("patchguard", *words, *_SELECTOR.get())))


_JSON_UNSAFE = re.compile(r"[\\\ud800-\udfff]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_JSON_ESCAPE = re.compile(r"\\(?:(\\)|x([0-9a-f]{2})|u([0-9a-f]{4}))")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x5C:
        return "\\\\"
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"  # a lone surrogate no undecodable byte gives


def json_name(name: str) -> str:
    """A file name (a path, a command line, a set name) as machine formats carry it: injective, valid UTF-8.

    A name that is valid UTF-8 and holds no backslash is itself. Otherwise each backslash is doubled and each
    undecodable byte (a lone surrogate of ``surrogateescape``) is ``\\xNN``; so a value with a backslash
    is escaped text, one without is the name. :func:`from_json_name` gives the name back.

    >>> json_name("minillm/models/mla.py")
    'minillm/models/mla.py'
    >>> json_name("raw\\udcff.py"), json_name("lit\\\\xff.py")
    ('raw\\\\xff.py', 'lit\\\\\\\\xff.py')
    """
    return _JSON_UNSAFE.sub(_json_escape, name)


def _json_unescape(match: re.Match[str]) -> str:
    backslash, byte, code = match.groups()
    if backslash:
        return "\\"
    return chr(0xDC00 + int(byte, 16)) if byte else chr(int(code, 16))


def from_json_name(text: str) -> str:
    """The name :func:`json_name` encoded (undecodable bytes as ``surrogateescape`` surrogates, as
    :func:`os.fsdecode` gives them)."""
    return _JSON_ESCAPE.sub(_json_unescape, text)


class RuleId(str, enum.Enum):
    """Every rule id a finding can carry (``rule`` in JSON and SARIF, ``ignore = [{rule = ...}]`` in a
    policy); :mod:`patchguard.rulebook` gives each its severity and rationale (a test keeps the two in step).
    Shown as its id: ``str(RuleId.TENSOR_DUMP) == "tensor-dump"``, and equal to it."""

    TENSOR_DUMP = "tensor-dump"
    FILE_WRITE = "file-write"
    DEBUGGER = "debugger"
    PROCESS_EXIT = "process-exit"
    SUBPROCESS = "subprocess"
    NETWORK = "network"
    DYNAMIC_EXEC = "dynamic-exec"
    PRINT = "print"
    LOGGING = "logging"
    SLEEP = "sleep"
    DEVICE_SYNC = "device-sync"
    MONKEYPATCH = "monkeypatch"
    GLOBAL_SWITCH = "global-switch"
    SWALLOWED_EXCEPTION = "swallowed-exception"
    ENV_MUTATION = "env-mutation"
    REMOVED_CHECK = "removed-check"
    UNPARSEABLE = "unparseable"
    COMMENTED_OUT_CODE = "commented-out-code"
    FUNCTIONAL_CHANGE = "functional-change"
    COSMETIC_CHANGE = "cosmetic-change"
    MODIFIED_PYTHON = "modified-python"
    MODIFIED_EXTENSION = "modified-extension"
    MODIFIED_SCRIPT = "modified-script"
    MODIFIED_PTH = "modified-pth"
    MODIFIED_DATA = "modified-data"
    MISSING_FILE = "missing-file"
    UNEXPECTED_PYTHON = "unexpected-python"
    UNEXPECTED_EXTENSION = "unexpected-extension"
    UNEXPECTED_BYTECODE = "unexpected-bytecode"
    ORPHAN_BYTECODE = "orphan-bytecode"
    UNEXPECTED_FILE = "unexpected-file"
    UNEXPECTED_DIRECTORY = "unexpected-directory"
    PTH_IMPORT = "pth-import"
    PTH_PATH = "pth-path"
    SITECUSTOMIZE = "sitecustomize"
    RECORD_ROW = "record-row"
    RECORD_HEX = "record-hex"
    RECORD_WRONG = "record-wrong"
    RECORD_DUPLICATE = "record-duplicate"
    OVERWRITTEN = "overwritten"
    RECORD_ABSENT = "record-absent"
    MANAGED_REPLACED = "managed-replaced"
    FILES_ELSEWHERE = "files-elsewhere"
    DUPLICATE_METADATA = "duplicate-metadata"
    UNREADABLE = "unreadable"
    RECORD_TAMPERED = "record-tampered"
    RECORD_ADDED = "record-added"
    RECORD_DIFFERS = "record-differs"
    RECORD_UNVERIFIED = "record-unverified"
    VCS_INSTALL = "vcs-install"
    EDITABLE_UNVERIFIABLE = "editable-unverifiable"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class SetStatus(str, enum.Enum):
    """Where one set stands (what ``patchguard sets`` prints)."""

    APPLIED = "applied"  # by patchguard, and its files are as it left them
    BY_HAND = "applied (by hand)"  # every file is patched, but patchguard did not do it
    NOT_APPLIED = "not applied"
    PARTIAL = "partially applied"
    DRIFTED = "drifted"  # applied by patchguard, then a file changed
    CONFLICT = "conflict"  # a file neither applies nor reverts cleanly
    UNKNOWN = "unknown"  # a file of the set cannot be read (permissions, not a regular file)
    NOT_APPLICABLE = "n/a"  # its distribution is not installed, or in another version

    @property
    def in_place(self) -> bool:
        """Every edit of the set is in the files."""
        return self in (SetStatus.APPLIED, SetStatus.BY_HAND)

    @property
    def troubled(self) -> bool:
        """Something needs a look (``status`` exits 1)."""
        return self in (SetStatus.DRIFTED, SetStatus.PARTIAL, SetStatus.CONFLICT, SetStatus.UNKNOWN)


@dataclass(frozen=True, slots=True)
class SetState:
    """Where one set stands in an environment."""

    name: str
    targets: str
    state: SetStatus
    files: int
    detail: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class AppliedSet:
    """A set patchguard applied, as ``state.json`` of its site directory records it."""

    name: str
    site: str
    time: str
    tool_version: str
    files: int


@dataclass(frozen=True, slots=True)
class EnvironmentStatus:
    """``status``: the interrupted transactions found (``(site, transaction, label)``, said before they are
    rolled back), what recovery put back, the sets patchguard applied, where every set stands, and the
    backups kept (``(site, ((transaction, bytes), …), how many are kept)``): ``patchguard.status/1``."""

    unfinished: tuple[tuple[str, str, str], ...]
    recovered: tuple[str, ...]
    applied: tuple[AppliedSet, ...]
    states: tuple[SetState, ...]
    backups: tuple[tuple[str, tuple[tuple[str, int], ...], int], ...]

    @property
    def troubled(self) -> bool:
        """A set is drifted, partly applied or otherwise in trouble (``status`` exits 1)."""
        return any(s.state.troubled for s in self.states)

    def to_json(self) -> dict[str, Any]:
        """``patchguard.status/1``: what ``status --format json`` prints."""
        return {
            "schema": "patchguard.status/1",
            "unfinished": [
                {"site": json_name(site), "transaction": txid, "label": label}
                for site, txid, label in self.unfinished
            ],
            "recovered": [json_name(r) for r in self.recovered],
            "applied": [_applied_json(a) for a in self.applied],
            "sets": [
                {
                    "set": json_name(s.name),
                    "targets": s.targets,
                    "state": s.state.value,
                    "files": s.files,
                    "detail": list(s.detail),
                }
                for s in self.states
            ],
            "backups": [
                {
                    "site": json_name(site),
                    "kept": [{"transaction": t, "bytes": n} for t, n in kept],
                    "keep": keep,
                }
                for site, kept, keep in self.backups
            ],
            "troubled": self.troubled,
        }


def _applied_json(a: AppliedSet) -> dict[str, Any]:
    return {
        "set": json_name(a.name),
        "site": json_name(a.site),
        "time": a.time,
        "tool_version": a.tool_version,
        "files": a.files,
    }


# -- the upgrade plan: what ``patchguard plan`` says of an upgrade before it happens -------------------------

PLAN_SCHEMA = "patchguard.plan/1"


class PlanVerdict(str, enum.Enum):
    """What becomes of a set (or one file of it) over an upgrade."""

    CARRIES = "carries"  # merged onto the new release with certainty (lines, statements, moved)
    UPSTREAM = "already upstream"  # the new release has the change: the set (or file) can be retired
    REVIEW = "needs review"  # a conflict, or a clean merge that is not certain
    LOST = "lost"  # the file (or what it changed) is gone upstream
    UNCHANGED = "unchanged"  # its distribution keeps its release: nothing to carry

    @property
    def open(self) -> bool:
        """A person must look before (or after) the upgrade."""
        return self in (PlanVerdict.REVIEW, PlanVerdict.LOST)


@dataclass(frozen=True, slots=True)
class Upgrade:
    """One distribution the upgrade changes: from the installed release (``None``: new) to another."""

    distribution: str
    from_version: str | None
    to_version: str


@dataclass(frozen=True, slots=True)
class PlannedFile:
    """One file of a set over the upgrade: its verdict, how it carries or why it does not."""

    path: str
    verdict: PlanVerdict
    hunks: int
    carried: int  # hunks carried (or already upstream)
    how: str = ""  # "lines", "statements", "moved to <path>", "resolved"
    why: str = ""  # what needs review, or what is lost
    new_path: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedSet:
    """One set (one of its distributions) over the upgrade."""

    name: str
    distribution: str
    from_version: str
    to_version: str
    verdict: PlanVerdict
    files: tuple[PlannedFile, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlannedEdit:
    """A changed file of a distribution the upgrade replaces, or a startup hook: what becomes of it."""

    path: str
    distribution: str | None
    fate: str  # "carried by <set>", "lost: in no set", "kept: no distribution owns it", "replaced"
    kind: str = ""
    severity: str = ""
    rule: str = ""


@dataclass(frozen=True, slots=True)
class UpgradePlan:
    """``patchguard plan``: the upgrade, each set's fate, the startup hooks, and the findings the upgrade
    removes with the edits that are in no set (the upgrade loses them)."""

    upgrades: tuple[Upgrade, ...]
    sets: tuple[PlannedSet, ...]
    hooks: tuple[PlannedEdit, ...] = ()
    edits: tuple[PlannedEdit, ...] = ()  # changed files of upgraded distributions, with their fate
    notes: tuple[str, ...] = ()

    @property
    def in_no_set(self) -> tuple[PlannedEdit, ...]:
        return tuple(e for e in self.edits if e.fate.startswith("lost"))

    @property
    def complete(self) -> bool:
        """Everything carries: no set needs review or loses a file, and no edit is in no set."""
        return not any(s.verdict.open for s in self.sets) and not self.in_no_set

    def to_json(self) -> dict[str, Any]:
        """``patchguard.plan/1``: what ``plan --format json`` prints (names in the JSON name encoding)."""
        name = json_name_or_none
        return {
            "schema": PLAN_SCHEMA,
            "upgrades": [
                {"distribution": json_name(u.distribution), "from": u.from_version, "to": u.to_version}
                for u in self.upgrades
            ],
            "sets": [
                {
                    "set": json_name(s.name),
                    "distribution": json_name(s.distribution),
                    "from": s.from_version,
                    "to": s.to_version,
                    "verdict": s.verdict.value,
                    "files": [
                        {
                            "path": json_name(f.path),
                            "verdict": f.verdict.value,
                            "hunks": f.hunks,
                            "carried": f.carried,
                            "how": f.how,
                            "why": f.why,
                            "new_path": name(f.new_path),
                        }
                        for f in s.files
                    ],
                    "notes": list(s.notes),
                }
                for s in self.sets
            ],
            "startup_hooks": [_edit_json(e) for e in self.hooks],
            "edits": [_edit_json(e) for e in self.edits],
            "in_no_set": [json_name(e.path) for e in self.in_no_set],
            "complete": self.complete,
            "notes": list(self.notes),
        }


def _edit_json(e: PlannedEdit) -> dict[str, Any]:
    return {
        "path": json_name(e.path),
        "distribution": json_name_or_none(e.distribution),
        "fate": e.fate,
        "kind": e.kind,
        "severity": e.severity,
        "rule": e.rule,
    }


# -- the way back: what ``patchguard rollback`` did ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reinstall:
    """One distribution put back: from the release installed now (``None``: absent) to the lock's
    (``None``: the lock does not have it, so it is removed), from ``wheel``."""

    name: str
    from_version: str | None
    to_version: str | None
    wheel: str = ""
    files: int = 0  # files written (or, for a removal, removed)


@dataclass(frozen=True, slots=True)
class SetFileChange:
    """One file apply or revert changed (or would change): what it does to it — ``create``, ``patch``,
    ``delete`` (apply); ``revert``, ``remove``, ``recreate`` (revert) —, the lines each hunk moved by, and
    after a revert where the file stands against its RECORD (``verdict``; ``clean``: nothing left to
    look at)."""

    path: str
    change: str
    offsets: tuple[int, ...] = ()
    verdict: str | None = None
    clean: bool | None = None


@dataclass(frozen=True, slots=True)
class SetChange:
    """What ``apply`` or ``revert`` did to a set (or would do: ``dry_run``): ``patchguard.set-change/1``."""

    command: str  # "apply" or "revert"
    name: str
    action: str  # "applied", "reverted", "already applied", "not applied"
    files: tuple[SetFileChange, ...]
    dry_run: bool = False
    txid: str | None = None  # the transaction that did it (None: a dry run, or nothing to do)
    backup_dir: str | None = None
    recovered: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.action in ("applied", "reverted")

    @property
    def clean(self) -> bool:
        """Every reverted file is its wheel's again, or was new and is gone (always, for an apply)."""
        return all(f.clean is not False for f in self.files)

    def to_json(self) -> dict[str, Any]:
        """``patchguard.set-change/1``: what ``apply``/``revert --format json`` prints."""
        return {
            "schema": "patchguard.set-change/1",
            "command": self.command,
            "set": json_name(self.name),
            "action": self.action,
            "dry_run": self.dry_run,
            "files": [
                {
                    "path": json_name(f.path),
                    "change": f.change,
                    "offsets": list(f.offsets),
                    "verdict": f.verdict,
                    "clean": f.clean,
                }
                for f in self.files
            ],
            "clean": self.clean,
            "transaction": self.txid,
            "backup_dir": json_name_or_none(self.backup_dir),
            "recovered": [json_name(r) for r in self.recovered],
        }


@dataclass(frozen=True, slots=True)
class CaptureDocument:
    """What ``capture`` wrote: ``patchguard.capture/1``. ``targets``: (distribution, versions) pairs, the
    distribution empty for the environment itself (files no distribution owns)."""

    name: str
    directory: str
    targets: tuple[tuple[str, str], ...]
    paths: tuple[str, ...]
    digest: str

    def to_json(self) -> dict[str, Any]:
        """``patchguard.capture/1``: what ``capture --format json`` prints."""
        return {
            "schema": "patchguard.capture/1",
            "set": json_name(self.name),
            "directory": json_name(self.directory),
            "targets": [
                {"environment": True} if not d else {"distribution": json_name(d), "version": v}
                for d, v in self.targets
            ],
            "paths": [json_name(p) for p in self.paths],
            "digest": self.digest,
        }


@dataclass(frozen=True, slots=True)
class RestoreDocument:
    """What ``restore`` did (or would do: ``dry_run``): ``patchguard.restore/1``. ``files``: (what was done —
    ``restore``, ``recreate``, ``remove`` —, the path as shown); ``still``: the files restored that a scan
    after the transaction still finds not pristine."""

    files: tuple[tuple[str, str], ...]
    dry_run: bool
    still: tuple[str, ...] = ()
    records: tuple[str, ...] = ("RECORD",)
    txid: str | None = None
    backup_dir: str | None = None
    recovered: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.still

    def to_json(self) -> dict[str, Any]:
        """``patchguard.restore/1``: what ``restore --format json`` prints."""
        return {
            "schema": "patchguard.restore/1",
            "dry_run": self.dry_run,
            "files": [{"path": json_name(path), "action": action} for action, path in self.files],
            "clean": self.clean,
            "still_modified": [json_name(p) for p in self.still],
            "verified_against": list(self.records),
            "transaction": self.txid,
            "backup_dir": json_name_or_none(self.backup_dir),
            "recovered": [json_name(r) for r in self.recovered],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class RollbackResult:
    """What ``rollback`` did (or would do: ``dry_run``)."""

    lock: str
    distributions: tuple[Reinstall, ...]
    sets: tuple[str, ...]  # the sets applied again, in the form the lock had in place
    dry_run: bool = False
    txid: str | None = None  # the transaction that did it (None: a dry run, or nothing to do)
    backup_dir: str | None = None  # where the files it replaced are kept
    changes: int = 0  # files the transaction writes or removes
    notes: tuple[str, ...] = field(default=())

    @property
    def nothing_to_do(self) -> bool:
        return not self.distributions

    def to_json(self) -> dict[str, Any]:
        """``patchguard.rollback/1``: what ``rollback --format json`` prints."""
        return {
            "schema": "patchguard.rollback/1",
            "lock": self.lock,
            "distributions": [
                {
                    "name": d.name,
                    "from": d.from_version,
                    "to": d.to_version,
                    "wheel": d.wheel,
                    "files": d.files,
                }
                for d in self.distributions
            ],
            "sets": list(self.sets),
            "changes": self.changes,
            "dry_run": self.dry_run,
            "transaction": self.txid,
            "backup_dir": self.backup_dir,
            "notes": list(self.notes),
        }
