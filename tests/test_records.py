"""RECORD parsing: the spec's forms, and anything else without a crash."""

from __future__ import annotations

import base64
import csv
import hashlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from patchguard.integrity.records import (
    RecordEntry,
    RecordProblem,
    _parse_plain,
    _parse_rows,
    canonicalize,
    discover,
    parse_record,
)


def _row(path: str, data: bytes, algo: str = "sha256") -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=").decode()
    return [path, f"{algo}={digest}", str(len(data))]


def _csv(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def test_spec_forms() -> None:
    text = _csv(
        [
            _row("pkg/__init__.py", b""),
            _row("pkg/data file, with comma.txt", b"x", "sha512"),
            _row("../../bin/tool", b"#!python\n", "blake2b"),
            ["/abs/path/module.py", "sha256=" + "A" * 43, "12"],
            ["pkg-1.0.dist-info/RECORD", "", ""],
            ["pkg/__pycache__/__init__.cpython-311.pyc", "", ""],
        ]
    )
    entries, problems = parse_record(text)
    assert problems == []
    assert [e.path for e in entries][1] == "pkg/data file, with comma.txt"
    assert [e.algorithm for e in entries] == ["sha256", "sha512", "blake2b", "sha256", None, None]
    assert [e.size for e in entries] == [0, 1, 9, 12, None, None]
    assert entries[0].digest == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


def test_problems_are_collected_not_raised() -> None:
    text = _csv(
        [
            ["a.py"],
            ["b.py", "sha256=abc", "1", "extra"],
            ["c.py", "nothash", "1"],
            ["d.py", "whirlpool=AAAA", "1"],
            ["e.py", "sha256=" + "A" * 42, "1"],
            ["f.py", "sha256=" + "A" * 43, "ten"],
            ["", "sha256=x", "1"],
            _row("ok.py", b"fine"),
            _row("ok.py", b"fine"),
        ]
    )
    entries, problems = parse_record(text)
    assert [p.line for p in problems] == [1, 2, 3, 4, 5, 6, 7, 9]
    assert [e.path for e in entries] == ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py", "ok.py"]
    assert all(e.algorithm is None for e in entries[:5])
    assert entries[5].algorithm == "sha256" and entries[5].size is None
    assert "listed twice (first on line 8)" in problems[-1].message


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_parses_without_crashing(text: str) -> None:
    entries, problems = parse_record(text)
    assert all(e.path for e in entries)
    assert all(p.line >= 0 for p in problems)


# Any file name but "\r": csv.writer with lineterminator="\n" (how pip and installer write RECORD) leaves a
# lone "\r" unquoted, and no CSV reader can read that row back.
_names = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00\r"), min_size=1, max_size=30
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(_names, st.binary(max_size=64), st.sampled_from(["sha256", "sha384", "sha3_256"])),
        unique_by=lambda t: t[0],
        max_size=20,
    )
)
def test_valid_rows_round_trip(rows: list[tuple[str, bytes, str]]) -> None:
    entries, problems = parse_record(_csv([_row(p, d, a) for p, d, a in rows]))
    assert problems == []
    assert [(e.path, e.algorithm, e.size) for e in entries] == [(p, a, len(d)) for p, d, a in rows]


def _by_rows(text: str) -> tuple[list[RecordEntry], list[RecordProblem]]:
    """What the row-by-row parser makes of ``text`` (the reference the whole-RECORD fast path must match)."""
    return _parse_rows(list(csv.reader(io.StringIO(text, newline=""), strict=True)))


_plain_names = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters='\x00\r\n",'), min_size=1, max_size=30
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_plain_names, st.one_of(st.none(), st.binary(max_size=64))),
        unique_by=lambda t: t[0],
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
def test_plain_records_parse_the_same_fast(
    rows: list[tuple[str, bytes | None]], ending: str, final_newline: bool
) -> None:
    lines = [",".join(_row(p, d)) if d is not None else f"{p},," for p, d in rows]
    text = ending.join(lines) + (ending if final_newline else "")
    fast = _parse_plain(text)
    assert fast is not None
    assert (fast, []) == _by_rows(text) == parse_record(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from('ab,"\r\n=\x00s2 5h6A-_'), max_size=60), max_size=8))
def test_anything_else_is_left_to_the_row_by_row_parser(lines: list[str]) -> None:
    text = "\n".join(lines)
    fast = _parse_plain(text)
    if fast is not None:  # what it accepts, it reads exactly as the row-by-row parser does
        assert (fast, []) == _by_rows(text)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("aZ9-_. .-__..x"), min_size=1, max_size=20))
def test_canonical_names_are_pep_503(name: str) -> None:
    from packaging.utils import canonicalize_name

    assert canonicalize(name) == canonicalize_name(name)


def test_names_and_versions_agree_with_importlib_metadata() -> None:
    """Read from METADATA's headers directly; importlib-metadata parses the whole file and must agree."""
    import sysconfig

    import importlib_metadata

    site = sysconfig.get_paths()["purelib"]
    mine = sorted((d.name, d.version) for d in discover([site]))
    theirs = sorted((d.metadata["Name"], d.version) for d in importlib_metadata.distributions(path=[site]))
    assert len(mine) > 5 and mine == theirs


def test_hash_columns_that_straddle_rows_are_problems_not_digests() -> None:
    """Two hash columns whose lengths add up to two good ones must not pass as two sha256 digests."""
    a = base64.urlsafe_b64encode(hashlib.sha256(b"a").digest()).rstrip(b"=").decode()
    b = base64.urlsafe_b64encode(hashlib.sha256(b"b").digest()).rstrip(b"=").decode()
    text = f"pkg/a.py,sha256={a}s,1\npkg/b.py,ha256={b},1\n"
    assert _parse_plain(text) is None
    entries, problems = parse_record(text)
    assert [e.algorithm for e in entries] == [None, None]
    assert [p.line for p in problems] == [1, 2]
