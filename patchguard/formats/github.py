"""GitHub Actions workflow commands: each finding an annotation on the file and line it is about
(``::error file=…,line=…,title=…::message``), as ``ruff --output-format github`` writes them.

High findings are errors, moderate ones warnings, the rest notices. Names and messages are shown as a terminal
shows them (control characters escaped: no name can write an escape sequence into the log), then escaped as
the runner reads them: ``%``, carriage return and line feed in a message; those and ``:`` and ``,`` in a
property.
"""

from __future__ import annotations

from ..model import Finding, Severity, for_terminal
from .documents import ReportDocument
from .interface import Format

__all__ = ["ReportGithub", "annotation"]

_LEVEL = {Severity.HIGH: "error", Severity.MODERATE: "warning"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding) -> str:
    """One finding as one workflow command line."""
    props = [f"file={_property(for_terminal(f.path))}"]  # no control character reaches the log
    if f.line is not None:
        props.append(f"line={f.line}")
        if f.end_line is not None and f.end_line != f.line:
            props.append(f"endLine={f.end_line}")
    who = f" ({f.distribution} {f.version})" if f.distribution else ""
    props.append(f"title={_property(for_terminal(f'patchguard {f.rule}{who}'))}")
    level = _LEVEL.get(f.severity, "notice")
    return f"::{level} {','.join(props)}::{_data(for_terminal(f.message))}"


class ReportGithub(Format[ReportDocument]):
    """``scan --format github``: one annotation per finding, worst first."""

    name = "github"

    def render(self, document: ReportDocument) -> str:
        findings = sorted(document.report.findings, key=lambda f: (-f.severity, f.path, f.line or 0))
        return "".join(annotation(f) + "\n" for f in findings)
