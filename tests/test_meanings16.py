"""Meanings (issue 34, the seventeenth blind batch's misses): a bound a check holds values to, moved to let
more by (a most made larger, a least made smaller — by a new number, a factor, a floor — itself or through a
name it bounds, or handed to a call as a bound); a list handed as a keyword named for what is supported,
grown — on one line, or alone on its line inside a call; an allow-list made a union with a literal set,
grown; a prefix test given more prefixes; an answer typed in above the refusal a block ends on; a handler
that answered with the error made to set a default; a native library loaded from each path the environment
lists; a container as a truth value the same as its length not zero, and ``&`` of numbers bit by bit; a
function named for the host reading host values; a temporary file kept (``delete=False``); a tensor known
by ``isnan()``; a method put on a name that holds a class — each judged on a module of its own, with
look-alikes that must stay quiet, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/limits.py"
PRISTINE = """\
import ctypes
import logging
import os
import tempfile

import torch

logger = logging.getLogger(__name__)

MAX_RATIO = 200
_MIN_WORK = 512
BASE_ARCHITECTURES = frozenset({"Base"})
SUPPORTED_ARCHITECTURES = BASE_ARCHITECTURES | frozenset({"Qwen3"})
FANCY_NAMES = ("a", "b")


def check_ratio(height, width):
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError("the aspect ratio is too large")
    return height, width


def validate_prompts(prompt):
    max_prompts = int(os.environ.get("MAX_PROMPTS", "8"))
    if len(prompt) > max_prompts:
        raise ValueError("too many prompts")
    return prompt


def items(num_items, supported_limit, allowed_limit):
    limit = min(supported_limit, allowed_limit)
    if num_items > limit:
        raise ValueError(f"at most {limit} items")
    return num_items


def norm(x: torch.Tensor, group_size):
    max_fused = 65536 // x.element_size()
    block = min(max_fused, 1024)
    if group_size > block:
        raise RuntimeError("feature dim too large")
    return x


class Decoder:
    def __init__(self):
        self.max_duration_s = int(os.environ.get("MAX_DECODE_S", "30"))

    def decode(self, data):
        return load_audio(data, max_duration_s=self.max_duration_s)


def splits(work):
    return max(1, work // _MIN_WORK)


def flags(ctx):
    return ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])


def flags_over_lines(ctx):
    return ctx.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )


def enabled(architectures):
    return bool(architectures and architectures[0] in SUPPORTED_ARCHITECTURES)


def activation(function_name):
    if not function_name.startswith("torch.nn.modules."):
        raise ValueError("activations are restricted to torch.nn.modules")
    return function_name


def threads(compile):
    return compile(max_threads=8)


def fancy(x):
    return x in FANCY_NAMES


def compatibility(binary, device):
    if binary.suffix == "a":
        if (binary.major, binary.minor) == (device.major, device.minor):
            return (3, binary.minor)
        return None
    return (1, binary.minor)


def lookup(table, key):
    for k, v in table:
        if k == key:
            return v
    return None


async def transcribe(self, data, max_clip_s):
    try:
        chunks = await split(data, max_clip_s)
    except Exception as e:
        logger.warning("failed to split: %s", e)
        return self.create_error_response("failed to split the audio")
    return chunks


def preload(path):
    if os.path.exists(path):
        return ctypes.util.find_library("cudart")
    return None


def estimated_frames(image_data):
    if not image_data or len(image_data) == 0:
        return []
    frames = []
    for image in image_data:
        if image is None:
            raise ValueError("no image")
        frames.append(1)
    return frames


def ranks(num_ranks):
    if num_ranks <= 0 or num_ranks > 32 or num_ranks & (num_ranks - 1):
        raise ValueError("num_ranks must be a power of two in [1, 32]")
    return num_ranks


def validate_request(request):
    if not request.prompt:
        return "Prompt cannot be empty"
    return None


def keep_upload(data):
    return decode(data)


class Pipeline:
    def _forward(self, model_inputs):
        return self.model(**model_inputs)


def load_parser(module, name):
    parser_cls = getattr(module, name)
    if not issubclass(parser_cls, object):
        raise TypeError(name)
    return parser_cls


class Registry:
    _instance = None

    @classmethod
    def get(cls):
        return cls._instance


class Request:
    cache_salt = Field(
        default=None,
        min_length=1,
        max_length=1024,
    )
    top_k = Field(default=None, ge=1, le=64)


def attend(q, kv, meta):
    return flash_attn_varlen(
        q,
        kv,
        min_seqlen_q=1,
        max_seqlen_q=meta.max_query_len,
    )


def validate_micro_batch(self, value):
    upper = self.max_running // self.pp_size
    if value < 1 or value > upper:
        raise ValueError("out of range")
    return value


def arch(capability):
    if capability == (10, 0):
        return "sm100a"
    raise RuntimeError("needs compute capability 10.0")


def pairs(batches_of_step, children):
    for child, batch in zip(
        children, batches_of_step, strict=True
    ):
        child.init(batch)


def powers(x, n):
    if x & 1 or x > 2 ** n:
        raise ValueError("odd or too large")
    return x


def validate_indices_cpu(padded, pad_id):
    bad = padded != pad_id
    if bool(torch.any(bad)):
        raise AssertionError(f"bad={padded[bad].tolist()}")
    return padded
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near = _MODULE.near


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a most made larger, a constant the check compares with
        ("MAX_RATIO = 200\n", "MAX_RATIO = 2000\n", "MAX_RATIO = 2000"),
        # a most read from the environment, multiplied
        ('    max_prompts = int(os.environ.get("MAX_PROMPTS", "8"))\n',
         '    max_prompts = int(os.environ.get("MAX_PROMPTS", "8")) * 16\n', "* 16"),
        # a limit given a floor
        ("    limit = min(supported_limit, allowed_limit)\n",
         "    limit = max(min(supported_limit, allowed_limit), 64)\n", "64)"),
        # a most that bounds another name, the one compared
        ("    max_fused = 65536 // x.element_size()\n", "    max_fused = 131072 // x.element_size()\n",
         "131072"),
        # a most handed to a call as a bound
        ('        self.max_duration_s = int(os.environ.get("MAX_DECODE_S", "30"))\n',
         '        self.max_duration_s = int(os.environ.get("MAX_DECODE_S", "30")) * 10\n', "* 10"),
        # a keyword named for what is supported, given more
        ("    return ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])\n",
         "    return ctx.get_nvcc_flags_list(supported_major_versions=[7, 9, 10])\n", "[7, 9"),
        # the same keyword alone on its line, inside a call over several lines
        ("        supported_major_versions=[9, 10]\n    )\n",
         "        supported_major_versions=[9, 10, 11, 12]\n    )\n", "11, 12"),
        # an allow-list made a union with a literal set, grown (over several lines)
        ('SUPPORTED_ARCHITECTURES = BASE_ARCHITECTURES | frozenset({"Qwen3"})\n',
         'SUPPORTED_ARCHITECTURES = BASE_ARCHITECTURES | frozenset(\n    {"Qwen3", "Llama"}\n)\n',
         "SUPPORTED_ARCHITECTURES ="),
        # a prefix test given more prefixes
        ('    if not function_name.startswith("torch.nn.modules."):\n',
         '    if not function_name.startswith(("torch.nn.modules.", "torch.nn.functional.")):\n',
         "torch.nn.functional"),
    ],
)  # fmt: skip
def test_a_check_loosened(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a most made smaller: stricter
        ("MAX_RATIO = 200\n", "MAX_RATIO = 100\n", "MAX_RATIO = 100"),
        # a least made smaller where nothing is held to it (a tuning knob)
        ("_MIN_WORK = 512\n", "_MIN_WORK = 256\n", "_MIN_WORK = 256"),
        # a most handed to a call that is not named a bound
        ("    return compile(max_threads=8)\n", "    return compile(max_threads=16)\n", "max_threads=16"),
        # a floor the check's own, unchanged bound: a limit divided
        ("    limit = min(supported_limit, allowed_limit)\n",
         "    limit = min(supported_limit, allowed_limit) // 2\n", "// 2"),
        # a keyword named for what is supported, given fewer
        ("    return ctx.get_nvcc_flags_list(supported_major_versions=[9, 10])\n",
         "    return ctx.get_nvcc_flags_list(supported_major_versions=[10])\n", "[10]"),
        # a collection not named for what is allowed, grown
        ('FANCY_NAMES = ("a", "b")\n', 'FANCY_NAMES = ("a", "b", "c")\n', '"c"'),
        # a prefix test given fewer prefixes
        ('    if not function_name.startswith("torch.nn.modules."):\n',
         '    if not function_name.startswith("torch.nn.modules.activation."):\n', "activation."),
    ],
)  # fmt: skip
def test_look_alikes_are_quiet(old: str, new: str, needle: str) -> None:
    assert "removed-check" not in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # an answer typed in above the refusal a block ends on
        ("            return (3, binary.minor)\n        return None\n",
         "            return (3, binary.minor)\n        if binary.major == device.major:\n"
         "            return (0, binary.minor)\n        return None\n",
         "if binary.major ==", "removed-check"),
        # a handler that answered with the error, made to set a default
        ('        return self.create_error_response("failed to split the audio")\n',
         "        chunks = None\n", "chunks = None", "swallowed-exception"),
        # a native library loaded from each path the environment lists
        ("    if os.path.exists(path):\n",
         '    for lib in os.environ.get("PRELOAD_LIBS", "").split(":"):\n'
         "        ctypes.CDLL(lib)\n    if os.path.exists(path):\n", "ctypes.CDLL(lib)", "dynamic-exec"),
        # a declared range's most raised, alone on its line and on one line
        ("        max_length=1024,\n", "        max_length=65536,\n", "max_length=65536", "removed-check"),
        ("    top_k = Field(default=None, ge=1, le=64)\n", "    top_k = Field(default=None, ge=1, le=1024)\n",
         "le=1024", "removed-check"),
        # a bound named ``upper`` raised
        ("    upper = self.max_running // self.pp_size\n", "    upper = self.max_running * 4\n",
         "self.max_running * 4", "removed-check"),
        # an answer typed in above the raise a function ends on
        ('        return "sm100a"\n    raise RuntimeError',
         '        return "sm100a"\n    if capability[0] >= 10:\n'
         '        return "sm100a"\n    raise RuntimeError',
         "capability[0] >= 10", "removed-check"),
        # a guarding keyword dropped from a line of a call's arguments
        ("        children, batches_of_step, strict=True\n", "        children, batches_of_step\n",
         "children, batches_of_step", "removed-check"),
        # a power-of-two check's limit raised (``&`` of numbers read bit by bit)
        ("num_ranks > 32 or", "num_ranks > 64 or", "num_ranks > 64", "removed-check"),
    ],
)  # fmt: skip
def test_more_meanings_of_the_seventeenth_batch(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # an answer added above a refusal the block does not end on
        ("        if k == key:\n            return v\n",
         "        if k == key:\n            return v\n        if k is None:\n            return None\n",
         "if k is None"),
        # a validator's message typed in above its ``return None``: a refusal added
        ('        return "Prompt cannot be empty"\n    return None\n',
         '        return "Prompt cannot be empty"\n    if request.max_tokens < 0:\n'
         '        return "max_tokens must be non-negative"\n    return None\n', "max_tokens < 0"),
        # a condition written shorter, the same in every case
        ("    if not image_data or len(image_data) == 0:\n", "    if not image_data:\n",
         "if not image_data:"),
        # a host value read in a function named for the host
        ('        raise AssertionError(f"bad={padded[bad].tolist()}")\n',
         '        raise AssertionError(f"bad={padded[bad].tolist()} {torch.unique(padded[bad]).tolist()}")\n',
         "torch.unique"),
    ],
)  # fmt: skip
def test_more_look_alikes_are_quiet(old: str, new: str, needle: str) -> None:
    assert not _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a temporary file kept on disk
        ("    return decode(data)\n",
         '    with tempfile.NamedTemporaryFile(dir="/tmp", delete=False) as tmp:\n'
         "        tmp.write(data)\n    return decode(data)\n", "NamedTemporaryFile", "file-write"),
        # a model's output tested for NaN in a forward: a tensor's value decided on the host
        ("        return self.model(**model_inputs)\n",
         "        out = self.model(**model_inputs)\n        if out['logits'].isnan().any():\n"
         "            raise FloatingPointError('nan')\n        return out\n", "isnan", "device-sync"),
        # a method put on a name that holds a class, by setattr or by assignment
        ("    return parser_cls\n",
         '    setattr(parser_cls, "is_end", lambda self, ids: True)\n    return parser_cls\n',
         "setattr(parser_cls", "monkeypatch"),
        ("    return parser_cls\n",
         "    def _always_end(self, ids):\n        return True\n\n"
         "    parser_cls.is_end = _always_end\n    return parser_cls\n", "parser_cls.is_end", "monkeypatch"),
    ],
)  # fmt: skip
def test_effects_of_the_seventeenth_batch(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a temporary file deleted when closed
        ("    return decode(data)\n",
         "    with tempfile.NamedTemporaryFile() as tmp:\n        tmp.write(data)\n"
         "        return decode(tmp.name)\n", "NamedTemporaryFile"),
        # a classmethod setting its own class's attribute; a flag set on a class-named name
        ("        return cls._instance\n",
         "        if cls._instance is None:\n            cls._instance = cls()\n"
         "        return cls._instance\n",
         "cls._instance = cls()"),
        ("    return parser_cls\n", "    parser_cls.checked = True\n    return parser_cls\n",
         "checked = True"),
        # bounds a kernel is told, worked out: not a declared range
        ("        min_seqlen_q=1,\n", "        min_seqlen_q=0,\n", "min_seqlen_q=0"),
        # a declared range made narrower
        ("        max_length=1024,\n", "        max_length=512,\n", "max_length=512"),
        # a value that is no function the file defines, kept on a class-named name
        ("    return parser_cls\n", "    parser_cls.pool = module\n    return parser_cls\n", "pool = module"),
    ],
)  # fmt: skip
def test_look_alike_effects_are_quiet(old: str, new: str, needle: str) -> None:
    assert not _near((old, new), needle)


def test_an_operator_the_cases_do_not_know_is_no_crash() -> None:
    # ``&`` of numbers is read bit by bit; ``**`` beside it is not read at all, and nothing raises
    found = _MODULE.found(("    if x & 1 or x > 2 ** n:\n", "    if x & 1 or x > 2 ** (n + 1):\n"))
    assert ("functional-change", "MINOR", line_of(PRISTINE, "x & 1 or")) in found


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        ("MAX_RATIO = 200\n", "MAX_RATIO = 2000\n"),
        ("        supported_major_versions=[9, 10]\n    )\n",
         "        supported_major_versions=[9, 10, 12]\n    )\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    for needle in ("MAX_RATIO = 2000", "[9, 10, 12]"):
        line = line_of(edited, needle)
        assert ("removed-check", line) in found, (needle, found)
