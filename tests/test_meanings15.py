"""Meanings (issue 34, the fifteenth blind batch's misses): a method replaced by one that answers the same
whatever it is asked; a function whose job was to raise made to return; an error held, raised again, given
a flag; a raise of what a call reported made to fire in fewer cases; a tensor declared by a type guard or
reached through a chain of reshaping methods; what follows the load runs once; two quantities compared
read without numbers below zero; an object store's upload; ``yaml.load`` told to use an unsafe loader; the
safe variant of a call replaced — each judged on a module of its own, with look-alikes that must stay
quiet, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/serving.py"
PRISTINE = """\
import logging

import jinja2
import torch
import yaml
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .experts import Experts

logger = logging.getLogger(__name__)


class Sender:
    def failure_exception(self):
        raise RuntimeError("the transfer failed")

    def preflight(self, n):
        if self.client.errored:
            raise self.client.dead_error
        self.client.admit(n)

    def check(self, result):
        if result != 0:
            raise RuntimeError(f"error {result}")


def setup(config):
    if not Experts._supports_current_device():
        raise ValueError("no device")
    return config


def validate(tensor, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a tensor")
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be 2-D")
    return tensor


def maybe_numpy(x):
    y = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x
    return y


def apply(layer, x, bias=None):
    output = layer.mm(x.reshape(-1, x.shape[-1]).contiguous())
    return output


def process_weights_after_loading(layer, weight):
    layer.packed = weight
    return layer


def start_loading(layer, weight):
    layer.packed = weight
    return layer


def check_balance(pre_memory, local_memory):
    if pre_memory < local_memory * 0.9:
        raise RuntimeError("the memory is unbalanced")


def pull(client, bucket, file, dest):
    client.download_file(bucket, file, dest)
    return dest


def parse(path):
    return yaml.safe_load(open(path).read())


def render_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True
    )
    return env
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near = _MODULE.near


def _messages(edit: tuple[str, str], needle: str) -> list[str]:
    from patchguard.analysis import CodeChange, analyse

    after = _MODULE.after(edit)
    change = CodeChange(ENGINE, PRISTINE.encode(), after.encode(), "pkg", "1.0")
    line = line_of(after, needle)
    return [f"{f.rule} {f.message}" for f in analyse(change) if f.line == line]


def test_a_method_replaced_by_one_that_answers_the_same() -> None:
    edit = ("def setup(config):\n",
            "Experts._supports_current_device = staticmethod(lambda *a, **k: True)\n\n\n"
            "def setup(config):\n")  # fmt: skip
    found = _messages(edit, "staticmethod(lambda")
    assert found and found[0].startswith("monkeypatch") and "also removed-check" in found[0]
    real = ("def setup(config):\n", "Experts._supports_current_device = _probe\n\n\ndef setup(config):\n")
    assert _near(real, "_probe") == {"monkeypatch"}


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a function whose job was to raise, made to return
        ('        raise RuntimeError("the transfer failed")\n',
         '        logger.warning("transfer failed, ignored")\n        return None\n', "ignored"),
        # an error held, raised again, given a flag instead
        ("            raise self.client.dead_error\n", "            self._saw_dead = True\n", "_saw_dead"),
        # what a call reported raised in fewer cases
        ("        if result != 0:\n", "        if result not in (0, 704, 705):\n", "704"),
    ],
)  # fmt: skip
def test_an_error_let_go(old: str, new: str, needle: str) -> None:
    assert "swallowed-exception" in _near((old, new), needle)


def test_a_validation_raise_narrowed_swallows_nothing() -> None:
    edit = ("    if pre_memory < local_memory * 0.9:\n", "    if pre_memory < local_memory * 0.5:\n")
    assert _near(edit, "* 0.5") == {"removed-check"}  # two quantities: fewer cases, none negative


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a parameter a type guard declared a tensor
        ("    if tensor.dim() != 2:\n",
         "    if not torch.isfinite(tensor).all():\n        raise ValueError('non-finite')\n"
         "    if tensor.dim() != 2:\n", "isfinite"),
        # a parameter reached through a tensor's reshaping methods
        ("    return output\n", "    if torch.isnan(output).any():\n        raise ValueError('nan')\n"
         "    return output\n", "isnan"),
        # a cache that starts loading every step
        ("def start_loading(layer, weight):\n    layer.packed = weight\n",
         "def start_loading(layer, weight: torch.Tensor):\n    layer.packed = weight\n"
         "    if not weight.any().item():\n        raise ValueError('zeros')\n", ".item()"),
    ],
)  # fmt: skip
def test_device_reads(old: str, new: str, needle: str) -> None:
    assert "device-sync" in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a conditional isinstance: a test, not a declaration
        ("    return y\n", "    if (y > 0).all():\n        pass\n    return y\n", "(y > 0)"),
        # what follows the load runs once
        ("def process_weights_after_loading(layer, weight):\n    layer.packed = weight\n",
         "def process_weights_after_loading(layer, weight: torch.Tensor):\n    layer.packed = weight\n"
         "    if not weight.any().item():\n        raise ValueError('zeros')\n", ".item()"),
    ],
)  # fmt: skip
def test_host_or_once_reads_are_quiet(old: str, new: str, needle: str) -> None:
    assert "device-sync" not in _near((old, new), needle)


def test_an_object_stores_upload_is_network() -> None:
    edit = ("    client.download_file(bucket, file, dest)\n",
            "    client.download_file(bucket, file, dest)\n"
            "    client.put_object(Bucket=bucket, Key='x', Body=b'ok')\n")  # fmt: skip
    assert "network" in _near(edit, "put_object")


@pytest.mark.parametrize(
    ("new", "rule"),
    [
        ("    return yaml.load(open(path).read(), Loader=yaml.UnsafeLoader)\n", "dynamic-exec"),
        ("    return yaml.load(open(path).read())\n", "removed-check"),
    ],
)
def test_yaml_made_unsafe(new: str, rule: str) -> None:
    assert rule in _near(("    return yaml.safe_load(open(path).read())\n", new), "yaml.load")


def test_yaml_told_a_safe_loader_is_quiet() -> None:
    edit = ("    return yaml.safe_load(open(path).read())\n",
            "    return yaml.load(open(path).read(), Loader=yaml.SafeLoader)\n")  # fmt: skip
    assert "dynamic-exec" not in _near(edit, "yaml.load")


def test_the_sandbox_taken_away() -> None:
    edit = ("    env = ImmutableSandboxedEnvironment(\n", "    env = jinja2.Environment(\n")
    assert "removed-check" in _near(edit, "jinja2.Environment")


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        ('        raise RuntimeError("the transfer failed")\n', "        return None\n"),
        ("    env = ImmutableSandboxedEnvironment(\n", "    env = jinja2.Environment(\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    for needle, rule in (("return None", "swallowed-exception"), ("jinja2.Environment", "removed-check")):
        line = line_of(edited, needle)
        assert any(r == rule and abs(n - line) <= 1 for r, n in found), (needle, found)


QUIET = "pkg/quiet.py"
QUIET_PRISTINE = """\
import logging

import torch

logger = logging.getLogger(__name__)


def share(layers, kinds):
    for idx, kind in enumerate(layers):
        found = kinds.get(kind, [])
        if not found:
            logger.warning("no target for %d", idx)
            continue
        layers[idx] = found[-1]


def remove(self, key):
    if self.t1.pop(key, None) is None:
        self.t2.pop(key, None)


def rebalance(weight: torch.Tensor):
    counts = weight.sum(0)
    most = counts.max().item()
    return most


def propose(self, aux, tokens: torch.Tensor):
    if aux is None:
        raise ValueError("aux is required")
    return tokens


class Builder:
    def build(self, draft_cpu, tokens: torch.Tensor):
        mask = draft_cpu[:8] >= 0
        if bool(mask.any()):
            self.mask = mask
        return tokens

    def execute(self, stream):
        if stream is not None:
            stream.synchronize()
        else:
            torch.cuda.current_stream().synchronize()
"""

_QUIET = EditedModule(QUIET, QUIET_PRISTINE)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a bail-out made a raise: stricter
        ('            logger.warning("no target for %d", idx)\n            continue\n',
         '            raise ValueError(f"no target for {idx}")\n', "raise ValueError"),
        # an if that raises now where it raised nothing: a check added
        ("    if self.t1.pop(key, None) is None:\n        self.t2.pop(key, None)\n",
         "    if self.t1.pop(key, None) is None and self.t2.pop(key, None) is None:\n"
         "        raise KeyError(key)\n", "raise KeyError"),
        # one read for another
        ("    most = counts.max().item()\n", "    most = int(counts.max())\n", "int(counts"),
        # checks moved into a helper, under their own tests
        ('    if aux is None:\n        raise ValueError("aux is required")\n',
         '    def _check(a):\n        if a is None:\n            raise ValueError("aux is required")\n'
         "        return a\n    aux = _check(aux)\n", "_check(a)"),
        # a log line of what is worked out of host values
        ("            self.mask = mask\n",
         "            self.mask = mask\n"
         "            logger.debug('rows %s', mask.nonzero().flatten().tolist())\n",
         "logger.debug"),
        # a stream's wait for another's
        ("        if stream is not None:\n            stream.synchronize()\n        else:\n"
         "            torch.cuda.current_stream().synchronize()\n",
         "        (stream or torch.cuda.current_stream()).synchronize()\n", "synchronize"),
    ],
)  # fmt: skip
def test_benign_edits_of_the_sixteenth_batch_are_quiet(old: str, new: str, needle: str) -> None:
    assert not _QUIET.near((old, new), needle)


def test_a_tensor_known_by_its_float_method() -> None:
    module = EditedModule(
        "pkg/router.py",
        "import torch\n\n\ndef route(logits: torch.Tensor, n: int):\n"
        "    weights, ids = topk(logits, n)\n    mask = ids >= n\n"
        "    ids[mask] = 0\n    return weights, ids\n",
    )
    edit = ("    ids[mask] = 0\n", '    print(f"share {mask.float().mean():.4f}")\n    ids[mask] = 0\n')
    found = [(rule, severity) for rule, severity, n in module.found(edit) if n == 7]
    assert ("print", "MODERATE") in found
    from patchguard.analysis import CodeChange, analyse

    change = CodeChange("pkg/router.py", module.pristine.encode(), module.after(edit).encode(), "pkg", "1.0")
    assert any("device-sync" in f.message for f in analyse(change) if f.line == 7)
