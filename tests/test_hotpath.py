"""The hot path from the framework: a profile's per-step entry points and what they call on every run,
across modules — on a real wheel of an SGLang-shaped package, installed and edited the way a person does.

The shipped SGLang profile names ``sglang.srt.managers.scheduler.Scheduler.run_batch``; the toy package
below has that shape, and its helpers are reached from it the ways real code reaches them: a module
function through a module import, a function re-exported by a package ``__init__``, a method on ``self``
inherited from a base class in another module, a method of the object an attribute is made of. A device
sync is a finding only on the hot path (or in a loop), so each helper's verdict says whether it was found
hot, and its message says from where."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import patchguard
from patchguard import Kind, RuleId
from patchguard.analysis.reach.profile import load_profile
from patchguard.config import ConfigError

from .helpers import Env, build_wheel, cli

SYNC = "torch.zeros(1).item()"  # a value read back: a sync only where the code runs every step

TOY = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/managers/__init__.py": "",
    "sglang/srt/managers/scheduler.py": textwrap.dedent(
        """\
        from sglang.srt.managers import metrics_helper
        from sglang.srt.managers.mixin import SchedulerMixin
        from sglang.srt.managers.tp_worker import TpModelWorker
        from sglang.srt.utils import housekeeping, summarize


        class Scheduler(SchedulerMixin):
            def __init__(self):
                self.worker = TpModelWorker()

            def run_batch(self, batch):
                ids = self.worker.forward_batch_generation(batch)
                count = metrics_helper.collect(batch)
                self._account(batch)
                self.mixin_step(batch)
                if batch.done:
                    housekeeping.flush(batch)
                if self.publisher is not None:  # configured: runs every step of a box that has one
                    metrics_helper.publish(batch)
                return ids, count

            def _account(self, batch):
                total = summarize(batch)
                return total
        """
    ),
    "sglang/srt/managers/mixin.py": textwrap.dedent(
        """\
        import torch


        class SchedulerMixin:
            def mixin_step(self, batch):
                size = batch.size
                return size
        """
    ),
    "sglang/srt/managers/metrics_helper.py": textwrap.dedent(
        """\
        import torch


        def collect(batch):
            n = batch.size
            return n


        def report(batch):
            m = batch.size
            return m


        def publish(batch):
            p = batch.size
            return p
        """
    ),
    "sglang/srt/managers/tp_worker.py": textwrap.dedent(
        """\
        import torch


        class TpModelWorker:
            def forward_batch_generation(self, batch):
                out = self.finish(batch)
                return out

            def finish(self, batch):
                done = batch.ids
                return done
        """
    ),
    "sglang/srt/utils/__init__.py": "from .common import housekeeping, summarize\n",
    "sglang/srt/utils/common.py": textwrap.dedent(
        """\
        import torch

        from sglang.srt.utils import housekeeping


        def summarize(batch):
            total = batch.total
            return total
        """
    ),
    "sglang/srt/utils/housekeeping.py": textwrap.dedent(
        """\
        import torch


        def flush(batch):
            kept = batch.kept
            return kept
        """
    ),
}


@pytest.fixture
def box(tmp_path: Path) -> tuple[Env, Path]:
    wheel = build_wheel(tmp_path / "wheels", "sglang", "0.6.0", TOY)
    env = Env(tmp_path / "venv")
    env.install(wheel)
    return env, wheel.parent


def _insert(env: Env, rel: str, after: str) -> None:
    env.insert_after(rel, after, SYNC)


def _syncs(env: Env, wheels: Path, cache: Path) -> dict[str, str]:
    report = patchguard.scan(
        ["sglang"], site_packages=[str(env.site)], wheelhouse=[str(wheels)], cache_dir=str(cache)
    )
    return {
        f.path.split("sglang/", 1)[1]: f.message
        for f in report.findings
        if f.kind is Kind.INJECTED_CODE and f.rule == RuleId.DEVICE_SYNC
    }


RUN_BATCH = "called from sglang.srt.managers.scheduler:Scheduler.run_batch"


def test_a_sync_reached_from_the_profiles_entry_point_in_another_module_is_hot(
    box: tuple[Env, Path], tmp_path: Path
) -> None:
    env, wheels = box
    _insert(env, "sglang/srt/managers/metrics_helper.py", "n = batch.size")  # collect: a module function
    _insert(env, "sglang/srt/utils/common.py", "total = batch.total")  # summarize: re-exported
    _insert(env, "sglang/srt/managers/mixin.py", "size = batch.size")  # inherited from another module's class
    _insert(env, "sglang/srt/managers/tp_worker.py", "done = batch.ids")  # self.worker's class, then self
    found = _syncs(env, wheels, tmp_path / "cache")
    assert set(found) == {
        "srt/managers/metrics_helper.py",
        "srt/utils/common.py",
        "srt/managers/mixin.py",
        "srt/managers/tp_worker.py",
    }, found
    for path in ("srt/managers/metrics_helper.py", "srt/utils/common.py", "srt/managers/mixin.py"):
        assert RUN_BATCH in found[path], found[path]
    # finish is called by forward_batch_generation, hot by its own name in its own file
    assert "called from TpModelWorker.forward_batch_generation" in found["srt/managers/tp_worker.py"]


def test_a_helper_called_only_under_a_condition_or_from_nowhere_is_not_hot(
    box: tuple[Env, Path], tmp_path: Path
) -> None:
    env, wheels = box
    _insert(env, "sglang/srt/utils/housekeeping.py", "kept = batch.kept")  # flush: under `if batch.done:`
    _insert(env, "sglang/srt/managers/metrics_helper.py", "m = batch.size")  # report: called by nobody
    assert _syncs(env, wheels, tmp_path / "cache") == {}
    report = patchguard.scan(["sglang"], site_packages=[str(env.site)], wheelhouse=[str(wheels)])
    assert (
        len([f for f in report.findings if f.kind is Kind.INJECTED_CODE or f.kind.value.endswith("change")])
        == 2
    )


def test_a_helper_called_under_a_configuration_test_is_hot(box: tuple[Env, Path], tmp_path: Path) -> None:
    """``if self.publisher is not None: publish(batch)``: on a box so configured it runs every step."""
    env, wheels = box
    _insert(env, "sglang/srt/managers/metrics_helper.py", "p = batch.size")
    assert RUN_BATCH in _syncs(env, wheels, tmp_path / "cache")["srt/managers/metrics_helper.py"]


def test_kept_verdicts_follow_the_callers_file(box: tuple[Env, Path], tmp_path: Path) -> None:
    """A helper's verdict depends on another file: when the caller stops calling it every step, the kept
    analysis of the (unchanged) helper is not reused."""
    env, wheels = box
    cache = tmp_path / "cache"
    _insert(env, "sglang/srt/managers/metrics_helper.py", "n = batch.size")
    assert "srt/managers/metrics_helper.py" in _syncs(env, wheels, cache)
    assert "srt/managers/metrics_helper.py" in _syncs(env, wheels, cache)  # kept, same verdict
    sched = env.site / "sglang/srt/managers/scheduler.py"
    sched.write_text(
        sched.read_text().replace(
            "        count = metrics_helper.collect(batch)\n",
            "        count = metrics_helper.collect(batch) if batch.verbose else 0\n",
        )
    )
    assert "srt/managers/metrics_helper.py" not in _syncs(env, wheels, cache)


def test_the_cli_names_the_entry_point(box: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = box
    _insert(env, "sglang/srt/utils/common.py", "total = batch.total")
    code, out, err = cli(
        "scan", "sglang", "--site-packages", str(env.site), "--wheelhouse", str(wheels), "--format", "json"
    )
    assert code in (0, 1), err
    (sync,) = [f for f in json.loads(out)["findings"] if f["rule"] == "device-sync"]
    assert RUN_BATCH in sync["message"] and sync["path"].endswith("srt/utils/common.py")


def test_a_profile_file_names_its_entry_points(tmp_path: Path) -> None:
    good = tmp_path / "house.toml"
    good.write_text(
        'name = "house"\npackage = "house"\nmodels_package = "house.models"\n'
        'registry = {dict_literals = "house/models/registry.py"}\n'
        'hot = ["house.engine.Engine.step", "house.attn.*_backend.*.build"]\n'
    )
    assert load_profile(str(good)).hot == ("house.engine.Engine.step", "house.attn.*_backend.*.build")
    bad = tmp_path / "bad.toml"
    bad.write_text(good.read_text().replace('hot = ["house.engine.Engine.step", ', "hot = [1, "))
    with pytest.raises(ConfigError, match="must be lists of dotted names"):
        load_profile(str(bad))
