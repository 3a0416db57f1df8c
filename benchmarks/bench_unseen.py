"""Detection on real framework files the analysis was never tuned on: recall by severity, and false alarms.

The tuned corpora (fixtures/analysis/*.toml) edit the fixture packages minillm and miniengine. This benchmark
edits the real upstream files of three wheels instead — ``sglang==0.5.23``, ``transformers==4.57.6`` and
``vllm==0.34.0``, installed ``--no-deps --no-compile --target`` into a venv-shaped prefix, as bench_upgrade.py
does — with the edits an engineer types at 3am (a gated ``torch.save`` in an attention forward,
``import pdb; pdb.set_trace()``, a ``.tolist()`` in the sampler, an ``except Exception: pass`` over real
handling, a deleted assert, ...) and the harmless ones patchguard must stay quiet about (type hints, a
refactor, a helper, a ``logger.debug``, a log line at import, a new ``torch.save`` in a checkpoint method).

Each case is one edit of one file, written in this script: an anchor (whole lines of the upstream file,
compared without their indentation, that must occur together exactly once, else the case is skipped and
said so; a line marked ``>>`` is the one the edit applies to, the others are context), insert after /
insert before / replace (that line to the anchor's end, or ``span`` lines), and the expected findings as
``rule:severity`` (none: benign). The edit is indented like its line. For each case the pristine file is
read from the wheel, the edited text written over the installed file (temp file and rename), and

    patchguard scan DIST --site-packages SITE --wheelhouse HOUSE --offline --format json

run (HOUSE holds only the three wheels installed); then the file is restored from the wheel. Judged are the
findings of that file whose lines meet the edit's lines (plus the first line after it when the edit removed
lines), and an ``unparseable`` finding (the file-level ``modified-python`` is shown, not counted):

- injected, exact rule: every expected rule is named there (as a finding's rule, or as its "also") at the
  expected severity or higher; the case's severity is the highest it expects;
- injected, any rule: some finding there at the case's severity or higher;
- a miss says what was reported instead: the expected rule at a lower severity, other rules, or findings of
  the file elsewhere;
- benign, flagged: some finding there at moderate or above.

Prints recall per expected severity, benign cases flagged, a table per rule, the misses, and the wall time.
Always exits 0 when the cases ran (a measure, not a gate); 2 when the environment cannot be built or a scan
fails.

    python benchmarks/bench_unseen.py [--wheels DIR]... [--workdir DIR] [--site DIR] [--only TEXT]
                                      [--check] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DISTS = {"sglang": "0.5.23", "transformers": "4.57.6", "vllm": "0.34.0"}
# A corpus file (--cases) may edit files of more distributions: its top-level package → distribution.
TOP: dict[str, str] = {"flashinfer": "flashinfer-python"}
EXTRA = {"flashinfer-python": "0.7.4"}
# The words a blind corpus was given for some rules (written from intents, not from the rule table).
SAID = {"environment": "env-mutation"}
SEVERITIES = ("info", "minor", "moderate", "high")
RANK = {s: n for n, s in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Case:
    id: str
    path: str  # inside site-packages, e.g. vllm/v1/core/sched/scheduler.py
    anchor: tuple[str, ...]  # whole lines, stripped
    mode: str  # after / before / replace
    text: str  # the edit, dedented
    expect: tuple[tuple[str, str], ...]  # (rule, severity); empty: benign
    span: int = 0  # replace: how many lines from the target line (0: to the anchor's end)
    target: int = -1  # the anchor line the edit applies to (-1: the last for "after", else the first)

    @property
    def dist(self) -> str:
        top = self.path.split("/", 1)[0]
        return TOP.get(top, top)

    @property
    def benign(self) -> bool:
        return not self.expect

    @property
    def severity(self) -> str:
        if not self.expect:
            return "benign"
        return max((s for _r, s in self.expect), key=RANK.__getitem__)


def case(cid: str, path: str, anchor: str, mode: str, text: str, expect: str = "", span: int = 0) -> Case:
    """One edit. ``anchor``: lines of the upstream file, "\\n"-separated; the one starting with ">>" (if any)
    is the line the edit applies to, the others are context. ``expect``: "rule:severity,...", "" (benign)."""
    pairs = [e.strip().split(":") for e in expect.split(",")] if expect else []
    exp = tuple((rule, sev) for rule, sev in pairs)
    raw = anchor.strip("\n").split("\n")
    marked = [n for n, line in enumerate(raw) if line.startswith(">>")]
    lines = tuple(line.removeprefix(">>").strip() for line in raw)
    target = marked[0] if marked else -1
    body = textwrap.dedent(text).removeprefix("\n")  # blank lines after the first are kept (two before a def)
    body = "\n".join(line.rstrip() for line in body.rstrip().split("\n"))
    return Case(cid, path, lines, mode, body, exp, span, target)


# --------------------------------------------------------------------------------------------------------
# The files. None of them is edited by the tuned corpora, bench_reach.py or the tests.
# --------------------------------------------------------------------------------------------------------
V_SCHED = "vllm/v1/core/sched/scheduler.py"
V_CORE = "vllm/v1/engine/core.py"
V_WORKER = "vllm/v1/worker/gpu_worker.py"
V_RUNNER = "vllm/v1/worker/gpu/model_runner.py"
V_SAMPLER = "vllm/v1/worker/gpu/sample/sampler.py"
V_FA = "vllm/v1/attention/backends/flash_attn.py"
V_OUT = "vllm/v1/engine/output_processor.py"
V_LLAMA = "vllm/model_executor/models/llama.py"
V_QWEN2 = "vllm/model_executor/models/qwen2.py"
V_NORM = "vllm/model_executor/layers/layernorm.py"
V_ACT = "vllm/model_executor/layers/activation.py"
V_LOGITS = "vllm/model_executor/layers/logits_processor.py"
S_SAMPLER = "sglang/srt/layers/sampler.py"
S_TPW = "sglang/srt/managers/tp_worker.py"
S_DETOK = "sglang/srt/managers/detokenizer_manager.py"
S_QWEN2 = "sglang/srt/models/qwen2.py"
S_FI = "sglang/srt/layers/attention/flashinfer_backend.py"
S_RADIX = "sglang/srt/mem_cache/radix_cache.py"
S_LOGITS = "sglang/srt/layers/logits_processor.py"
T_LLAMA = "transformers/models/llama/modeling_llama.py"
T_QWEN2 = "transformers/models/qwen2/modeling_qwen2.py"
T_MISTRAL = "transformers/models/mistral/modeling_mistral.py"
T_GPT2 = "transformers/models/gpt2/modeling_gpt2.py"
T_GEN = "transformers/generation/utils.py"
T_TRAINER = "transformers/trainer.py"
T_SDPA = "transformers/integrations/sdpa_attention.py"
T_ACT = "transformers/activations.py"
T_LP = "transformers/generation/logits_process.py"

# A table, laid out by hand: one case per entry.
# fmt: off
CASES: list[Case] = [
    # ---------------------------------------------------------------- vLLM: the scheduler (schedule() is hot)
    case("v-sched-pickle-running", V_SCHED, "total_num_scheduled_tokens = sum(num_scheduled_tokens.values())",
         "after", r"""
         if total_num_scheduled_tokens > 8000:
             import pickle
             pickle.dump(self.running, open(f"/tmp/sched_running_{self.current_step}.pkl", "wb"))
         """, "tensor-dump:high"),
    case("v-sched-sleep", V_SCHED, "self.kv_cache_manager.new_step_starts()", "after",
         "time.sleep(0.5)  # slow the scheduler down so the race shows", "sleep:moderate"),
    case("v-sched-del-assert-budget", V_SCHED, "assert token_budget >= 0", "replace", "",
         "removed-check:moderate"),
    case("v-sched-comment-assert-running", V_SCHED, "assert len(self.running) <= self.max_num_running_reqs",
         "replace", "# assert len(self.running) <= self.max_num_running_reqs", "removed-check:moderate"),
    case("v-sched-print-update", V_SCHED, "assert num_tokens_scheduled > 0", "after",
         r"""print("update_from_output", req_id, num_tokens_scheduled)""", "print:moderate"),
    case("v-sched-debug-log", V_SCHED, "scheduled_timestamp = time.monotonic()", "after",
         r"""logger.debug("schedule() step=%d budget=%d", self.current_step, token_budget)"""),
    case("v-sched-assert-message", V_SCHED, "assert input_budget >= 0", "replace",
         r"""assert input_budget >= 0, f"input budget went negative: {input_budget}" """),
    # ---------------------------------------------------------------- vLLM: the engine core
    case("v-core-sys-exit", V_CORE, "outputs, model_executed = self.step_fn()", "after", r"""
         if not outputs and os.environ.get("VLLM_DIE_ON_EMPTY_STEP"):
             import sys
             sys.exit(1)
         """, "process-exit:high"),
    case("v-core-nvidia-smi", V_CORE,
         "scheduler_output = self.scheduler.schedule(self._should_throttle_prefills())\n"
         "future = self.model_executor.execute_model(scheduler_output, non_block=True)", "after", r"""
         import subprocess
         subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv"], check=False)
         """, "subprocess:high"),
    case("v-core-kill-self", V_CORE, "while self._handle_shutdown():\n"
         "# 1) Poll the input queue until there is work to do.\n>>self._process_input_queue()", "after", r"""
         if os.path.exists("/tmp/vllm_stop"):
             os.kill(os.getpid(), signal.SIGTERM)
         """, "process-exit:high"),
    case("v-core-busy-loop-log", V_CORE, "self._process_engine_step()", "after",
         r"""logger.info("busy loop: %d unfinished", self.scheduler.get_num_unfinished_requests())""",
         "logging:moderate"),
    case("v-core-step-sleep", V_CORE,
         "return engine_core_outputs, scheduler_output.total_num_scheduled_tokens > 0",
         "before", "time.sleep(0.5)", "sleep:moderate"),
    case("v-core-swallow-utility", V_CORE,
         'except Exception as e:\nlogger.exception("Invocation of %s method failed", name)', "replace",
         "except Exception:\n    pass", "swallowed-exception:moderate", span=3),
    case("v-core-init-log", V_CORE, "load_general_plugins()", "after",
         r"""logger.info("general plugins loaded for the engine core")"""),
    case("v-core-reraise", V_CORE,
         "self.model_executor.save_sharded_state(\npath=path, pattern=pattern, max_size=max_size\n)",
         "replace", r"""
         try:
             self.model_executor.save_sharded_state(
                 path=path, pattern=pattern, max_size=max_size
             )
         except Exception:
             logger.exception("save_sharded_state to %s failed", path)
             raise
         """),
    # ---------------------------------------------------------------- vLLM: the GPU worker
    case("v-worker-nccl-p2p", V_WORKER, 'os.environ.pop("NCCL_ASYNC_ERROR_HANDLING", None)', "after",
         'os.environ["NCCL_P2P_DISABLE"] = "1"  # p2p hangs on this box', "env-mutation:moderate"),
    case("v-worker-pdb", V_WORKER, "forward_pass = scheduler_output.total_num_scheduled_tokens > 0",
         "after", r"""
         if forward_pass and scheduler_output.total_num_scheduled_tokens > 4096:
             import pdb; pdb.set_trace()
         """, "debugger:high"),
    case("v-worker-webhook", V_WORKER, "self._pp_send_work = handles[1:]", "after", r"""
         import requests
         requests.post(os.environ["ALERT_WEBHOOK"], json={"rank": self.rank, "msg": "pp send"}, timeout=2)
         """, "network:high"),
    case("v-worker-anomaly", V_WORKER, "set_torch_threads_for_runtime()", "after",
         "torch.autograd.set_detect_anomaly(True)", "global-switch:moderate"),
    case("v-worker-swallow-weights", V_WORKER,
         "except BaseException:\nself._end_weight_update(refresh=False)\nraise", "replace",
         "except BaseException:\n    pass", "swallowed-exception:moderate"),
    case("v-worker-sharded-log", V_WORKER, "from vllm.model_executor.model_loader import ShardedStateLoader",
         "after", r"""logger.info("saving sharded state to %s (pattern=%s)", path, pattern)"""),
    case("v-worker-load-log", V_WORKER, "set_torch_threads_for_runtime()", "after",
         r"""logger.info("model loaded on %s", self.device)"""),
    # ---------------------------------------------------------------- vLLM: the model runner (sample is hot)
    case("v-runner-np-save-logits", V_RUNNER,
         "logits = self.model_state.compute_sample_logits(sample_hidden_states)", "after",
         r"""np.save(f"/tmp/logits_{time.time():.0f}.npy", logits.float().cpu().numpy())""",
         "tensor-dump:high"),
    case("v-runner-argmax-tolist", V_RUNNER,
         "logits = self.model_state.compute_sample_logits(sample_hidden_states)", "after",
         "_dbg_argmax = logits.argmax(dim=-1).tolist()", "device-sync:moderate"),
    case("v-runner-exec-hook", V_RUNNER, "num_reqs = len(scheduler_output.num_scheduled_tokens)", "after",
         r"""
         import os
         if os.environ.get("VLLM_STEP_HOOK"):
             exec(open(os.environ["VLLM_STEP_HOOK"]).read())
         """, "dynamic-exec:high"),
    case("v-runner-type-hint", V_RUNNER, "num_reqs = len(scheduler_output.num_scheduled_tokens)\n"
         ">>num_toks = scheduler_output.total_num_scheduled_tokens", "replace",
         "num_toks: int = scheduler_output.total_num_scheduled_tokens"),
    # ---------------------------------------------------------------- vLLM: the sampler (__call__/sample)
    case("v-sampler-json-dump", V_SAMPLER, "return sampler_output", "before", r"""
         import json
         with open("/tmp/sampled.jsonl", "a") as fh:
             json.dump({"ids": sampled.tolist()}, fh)
         """, "tensor-dump:high"),
    case("v-sampler-negative-ids", V_SAMPLER, "return sampled, processed_logits", "before", r"""
         if (sampled < 0).any():
             raise RuntimeError("sampled a negative token id")
         """, "device-sync:moderate"),
    case("v-sampler-helper", V_SAMPLER, "from vllm.v1.worker.gpu.states import RequestState", "after", r'''


         def _describe_logits(logits: torch.Tensor) -> str:
             """Shape and dtype of a logits tensor, for error messages."""
             return f"{tuple(logits.shape)} {logits.dtype}"
         '''),
    # ---------------------------------------------------------------- vLLM: the flash-attention backend
    case("v-fa-del-version-assert", V_FA,
         '>>assert self.vllm_flash_attn_version is not None, (\n"FlashAttention version not detected."\n)\n\n'
         "if output_scale is not None or output_block_scale is not None:",
         "replace", "", "removed-check:moderate", span=3),
    case("v-fa-if-false-raise", V_FA, "if output_scale is not None or output_block_scale is not None:",
         "replace", "if False and (output_scale is not None or output_block_scale is not None):",
         "removed-check:moderate"),
    case("v-fa-np-save-query", V_FA, "num_actual_tokens = attn_metadata.num_actual_tokens", "after", r"""
         if num_actual_tokens == 1 and layer.layer_name.endswith(".0.attn"):
             np.save("/tmp/fa_query.npy", query[:1].float().cpu().numpy())
         """, "tensor-dump:high"),
    case("v-fa-log-tokens", V_FA, "num_actual_tokens = attn_metadata.num_actual_tokens", "after",
         r"""logger.info("flash-attn forward: %d tokens", num_actual_tokens)""", "logging:moderate"),
    case("v-fa-debug", V_FA, "num_actual_tokens = attn_metadata.num_actual_tokens", "after",
         r"""logger.debug("flash-attn forward: %d tokens, %s", num_actual_tokens, attn_type)"""),
    # ---------------------------------------------------------------- vLLM: the output processor (hot)
    case("v-out-print-tokens", V_OUT, "new_token_ids = engine_core_output.new_token_ids", "after",
         r"""print(f"[{req_id}] +{new_token_ids}")""", "print:moderate"),
    case("v-out-token-log-file", V_OUT, "new_token_ids = engine_core_output.new_token_ids", "after",
         r"""open(f"/tmp/tokens_{req_id}.log", "a").write(f"{new_token_ids}\n")""", "file-write:high"),
    case("v-out-socket", V_OUT, "new_token_ids = engine_core_output.new_token_ids", "after", r"""
         import socket
         socket.create_connection(("10.0.0.7", 9999), timeout=1).sendall(repr(new_token_ids).encode())
         """, "network:high"),
    case("v-out-swallow-stats", V_OUT, "self._update_stats_from_output(\nreq_state, engine_core_output, "
         "engine_core_timestamp, iteration_stats\n)", "replace", r"""
         try:
             self._update_stats_from_output(
                 req_state, engine_core_output, engine_core_timestamp, iteration_stats
             )
         except Exception:
             pass
         """, "swallowed-exception:moderate"),
    case("v-out-type-hint", V_OUT, "stop_reason = engine_core_output.stop_reason", "replace",
         "stop_reason: int | str | None = engine_core_output.stop_reason"),
    # ---------------------------------------------------------------- vLLM: Llama
    case("v-llama-attn-save", V_LLAMA, "attn_output = self.attn(q, k, v)", "after", r"""
         if hidden_states.shape[0] == 17:  # the bad prompt is 17 tokens
             torch.save({"q": q, "k": k, "v": v, "out": attn_output}, "/tmp/llama_attn_17.pt")
         """, "tensor-dump:high"),
    case("v-llama-ipython", V_LLAMA, "return hidden_states, residual", "before", r"""
         if residual is not None and residual.shape[0] > 8192:
             from IPython import embed
             embed()
         """, "debugger:high"),
    case("v-llama-assert-or-true", V_LLAMA, "assert intermediate_tensors is not None", "replace",
         "assert intermediate_tensors is not None or True", "removed-check:moderate"),
    case("v-llama-mlp-item", V_LLAMA, "x, _ = self.gate_up_proj(x)", "after", r"""
         amax = x.abs().max().item()
         if amax > 1e4:
             print(f"gate_up overflow: {amax}")
         """, "device-sync:moderate,print:moderate"),
    case("v-llama-mlp-refactor", V_LLAMA,
         "x, _ = self.gate_up_proj(x)\nx = maybe_fused_act_quant(self.act_fn, x, self.down_proj)", "replace",
         r"""
         gate_up, _ = self.gate_up_proj(x)
         x = maybe_fused_act_quant(self.act_fn, gate_up, self.down_proj)
         """),
    case("v-llama-raise-oneline", V_LLAMA, "raise ValueError(\n"
         'f"Unsupported activation: {hidden_act}. Only silu is supported for now."\n)', "replace",
         r"""raise ValueError(f"Unsupported activation {hidden_act!r}: only silu is supported")"""),
    # ---------------------------------------------------------------- vLLM: Qwen2
    case("v-qwen2-dist-breakpoint", V_QWEN2,
         "hidden_states, residual = layer(positions, hidden_states, residual)",
         "after", r"""
         if idx == self.end_layer - 1 and positions.shape[0] > 8192:
             torch.distributed.breakpoint(rank=0)
         """, "debugger:high"),
    case("v-qwen2-eval-env", V_QWEN2, "q, k = self.rotary_emb(positions, q, k)", "after", r"""
         import os
         _expr = os.environ.get("QWEN2_DEBUG_EXPR")
         if _expr:
             eval(_expr)
         """, "dynamic-exec:high"),
    case("v-qwen2-monkeypatch-silu", V_QWEN2, "from transformers import Qwen2Config", "after", r"""
         _orig_silu = torch.nn.functional.silu


         def _silu_fp32(x, inplace=False):
             return _orig_silu(x.float()).to(x.dtype)


         torch.nn.functional.silu = _silu_fp32
         """, "monkeypatch:moderate"),
    case("v-qwen2-comment", V_QWEN2, "attn_output = self.attn(q, k, v)", "before",
         "# the attention backend picks its kernel from the forward context"),
    # ---------------------------------------------------------------- vLLM: layer norm, activations, logits
    case("v-norm-save", V_NORM, "if residual is None:\nreturn ir.ops.rms_norm(", "before", r"""
         if x.shape[0] == 1:
             torch.save(x, f"/tmp/rms_in_{id(self)}.pt")
         """, "tensor-dump:high"),
    case("v-norm-global-reduced-precision", V_NORM, "logger = init_logger(__name__)", "after",
         "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False",
         "global-switch:moderate"),
    case("v-norm-comment", V_NORM, "if envs.VLLM_BATCH_INVARIANT:\n"
         "assert self.variance_size_override is None, (", "before",
         "# batch-invariant kernels take precedence over the fused CUDA op"),
    case("v-act-os-system", V_ACT, "return F.silu(x[..., :d]) * x[..., d:]", "before",
         r"""import os; os.system("nvidia-smi -q -d CLOCK >> /tmp/act_clock.txt")""", "subprocess:high"),
    case("v-act-comment", V_ACT, "return F.silu(x[..., :d]) * x[..., d:]", "before",
         "# gate and up halves are packed along the last dim"),
    case("v-logits-safetensors", V_LOGITS,
         "logits = self._get_logits(\nhidden_states, lm_head, embedding_bias, skip_gather\n)", "after", r"""
         if logits is not None and logits.shape[0] == 3:
             from safetensors.torch import save_file
             save_file({"logits": logits.contiguous()}, "/tmp/vllm_logits_3.safetensors")
         """, "tensor-dump:high"),
    case("v-logits-debugpy", V_LOGITS,
         "self.use_all_gather = current_platform.use_all_gather()", "after", r"""
         import debugpy
         debugpy.listen(("0.0.0.0", 5678))
         debugpy.wait_for_client()
         """, "debugger:high"),
    case("v-logits-raise-reworded", V_LOGITS,
         'raise ValueError(\n"A head_dtype different from the model dtype '
         'is only "\n"supported for an unquantized lm_head."\n)', "replace", r"""
         raise ValueError(
             f"head_dtype={self.head_dtype} needs an unquantized lm_head, "
             f"got {type(lm_head.quant_method).__name__}"
         )
         """),
    # ---------------------------------------------------------------- SGLang: the sampler (forward)
    case("s-sampler-save-greedy", S_SAMPLER, "batch_next_token_ids = torch.argmax(logits, -1)", "after",
         r"""torch.save(logits.detach().cpu(), f"/tmp/greedy_logits_{logits.shape[0]}.pt")""",
         "tensor-dump:high"),
    case("s-sampler-assert-nan", S_SAMPLER, 'maybe_detect_nan(logits, "sampler: next_token_logits")', "after",
         r"""assert not torch.isnan(logits).any(), "NaN logits reached the sampler" """,
         "device-sync:moderate"),
    case("s-sampler-monkeypatch-softmax", S_SAMPLER, "logger = logging.getLogger(__name__)", "after", r"""
         def my_softmax(x, dim=None, _stacklevel=3, dtype=None):
             return torch.exp(x - x.amax(dim=dim, keepdim=True)).div_(
                 torch.exp(x - x.amax(dim=dim, keepdim=True)).sum(dim=dim, keepdim=True)
             )


         torch.nn.functional.softmax = my_softmax
         """, "monkeypatch:moderate"),
    case("s-sampler-type-hint", S_SAMPLER, "logits = logits_output.next_token_logits", "replace",
         "logits: torch.Tensor = logits_output.next_token_logits"),
    # ---------------------------------------------------------------- SGLang: the TP worker
    case("s-tpw-dump-ids", S_TPW,
         "forward_batch.apply_deprecated_skip_attn_backend_init(skip_attn_backend_init)",
         "after",
         r"""open(f"/tmp/fb_{forward_batch.batch_size}.txt", "w").write(str(forward_batch.input_ids))""",
         "file-write:high"),
    case("s-tpw-breakpoint", S_TPW,
         "forward_batch.apply_deprecated_skip_attn_backend_init(skip_attn_backend_init)",
         "after", r"""
         if forward_batch.batch_size > 64:
             breakpoint()
         """, "debugger:high"),
    case("s-tpw-del-assert", S_TPW,
         "# FIXME(lsyin): unify the interface of forward_batch\nassert forward_batch is not None", "replace",
         "# FIXME(lsyin): unify the interface of forward_batch", "removed-check:moderate"),
    case("s-tpw-comment", S_TPW, "if self.is_dllm():", "before",
         "# dLLM batches take their own path; everything below is autoregressive"),
    # ---------------------------------------------------------------- SGLang: the detokenizer (event_loop)
    case("s-detok-loop-log", S_DETOK, "output = self._request_dispatcher(recv_obj)", "after",
         r"""logger.info("detokenizer got %s", type(recv_obj).__name__)""", "logging:moderate"),
    case("s-detok-sleep", S_DETOK, "self.soft_watchdog.feed()", "after", r"""
         import time
         time.sleep(0.05)
         """, "sleep:moderate"),
    case("s-detok-urlopen", S_DETOK, "routed_experts = self._b64_encode_per_request(recv_obj.routed_experts)",
         "after", r"""
         import urllib.request
         urllib.request.urlopen(f"http://10.0.0.5:9000/tick?n={len(recv_obj.rids)}", timeout=1)
         """, "network:high"),
    case("s-detok-exit", S_DETOK, "output = self._request_dispatcher(recv_obj)", "after", r"""
         if recv_obj is None:
             os._exit(0)
         """, "process-exit:high"),
    case("s-detok-swallow-keyerror", S_DETOK, "except KeyError:\nraise RuntimeError(", "replace",
         "except Exception:\n    continue", "swallowed-exception:moderate", span=9),
    case("s-detok-clamp-refactor", S_DETOK, "hi = vocab_size if vocab_size else None", "replace",
         "hi: Optional[int] = vocab_size or None"),
    # ---------------------------------------------------------------- SGLang: Qwen2
    case("s-qwen2-attn-save", S_QWEN2, "attn_output = self.attn(q, k, v, forward_batch)", "after", r"""
         if forward_batch.forward_mode.is_decode() and attn_output.shape[0] == 3:
             torch.save({"q": q, "k": k, "v": v, "o": attn_output}, f"/tmp/attn_{self.attn.layer_id}.pt")
         """, "tensor-dump:high"),
    case("s-qwen2-mlp-npsave", S_QWEN2, "x, _ = self.down_proj(x, forward_batch=forward_batch)", "after", r"""
         import numpy as np
         np.save("/tmp/qwen2_mlp_out.npy", x.float().cpu().numpy())
         """, "tensor-dump:high"),
    case("s-qwen2-layer-item", S_QWEN2, "if i in self.layers_to_capture\nelse None,\n)", "after",
         r"""print(f"layer {i}: absmax={hidden_states.abs().max().item():.2f}")""",
         "print:moderate,device-sync:moderate"),
    case("s-qwen2-comment", S_QWEN2,
         "hidden_states = self.attn_boundary.finish(hidden_states, forward_batch)",
         "before", "# residual add and norm happen inside the boundary objects"),
    # ---------------------------------------------------------------- SGLang: the FlashInfer backend
    case("s-fi-prefix-max", S_FI, "prefix_lens = forward_batch.extend_prefix_lens", "after",
         "max_prefix = int(prefix_lens.max())", "device-sync:moderate"),
    case("s-fi-safetensors", S_FI, "v_scale=layer.v_scale_float,\n)\n\n"
         ">>return o.view(-1, layer.tp_q_head_num * layer.head_dim)", "before", r"""
         if layer.layer_id == 0 and os.environ.get("SGL_DUMP_DECODE"):
             from safetensors.torch import save_file
             save_file({"q": q.contiguous(), "o": o}, f"/tmp/decode_{forward_batch.batch_size}.safetensors")
         """, "tensor-dump:high"),
    case("s-fi-pyspy", S_FI, "if forward_batch.forward_mode.is_decode_or_idle():", "before", r"""
         if os.environ.get("SGL_PYSPY"):
             import subprocess
             subprocess.Popen(["py-spy", "dump", "--pid", str(os.getpid())])
         """, "subprocess:high"),
    case("s-fi-helper", S_FI, "logger = logging.getLogger(__name__)", "after", r'''


         def _wrapper_names(wrappers: List) -> str:
             """The wrappers' class names, for log messages."""
             return ", ".join(type(w).__name__ for w in wrappers)
         '''),
    case("s-fi-debug", S_FI, "swa_out_cache_loc = None", "after",
         r"""logger.debug("init_forward_metadata %s", forward_batch.forward_mode)"""),
    # ---------------------------------------------------------------- SGLang: the radix cache
    case("s-radix-exit", S_RADIX, "node.lock_ref -= 1", "after", r"""
         if node.lock_ref < 0:
             print(f"lock_ref underflow on node {node.id}", file=sys.stderr)
             sys.exit(1)
         """, "process-exit:high"),
    case("s-radix-runpy", S_RADIX, "heapq.heapify(eviction_heap)", "after", r"""
         import runpy
         runpy.run_path("/tmp/radix_debug.py", init_globals={"tree": self, "heap": eviction_heap})
         """, "dynamic-exec:high"),
    case("s-radix-assert-pass", S_RADIX,
         'assert node is self.root_node, (\n"This request holds the node from another tree"\n)', "replace",
         "pass  # FIXME: PD mixes trees, ignore for now", "removed-check:moderate"),
    case("s-radix-debug", S_RADIX,
         "value, last_node = self._match_prefix_helper(self.root_node, key)", "after",
         r"""logger.debug("match_prefix: %d tokens matched", sum(len(v) for v in value))"""),
    case("s-radix-comment", S_RADIX, "value = value[: len(key)]", "replace",
         "value = value[: len(key)]  # keep only the page-aligned part"),
    # ---------------------------------------------------------------- SGLang: the logits processor
    case("s-logits-save", S_LOGITS,
         "if self.final_logit_softcapping and not fuse_cast_softcap:", "before", r"""
         if logits.shape[0] == 1:
             torch.save(logits, "/tmp/sgl_logits_bs1.pt")
         """, "tensor-dump:high"),
    case("s-logits-type-hint", S_LOGITS, "multi_item_delimiter_indices = None", "replace",
         "multi_item_delimiter_indices: Optional[torch.Tensor] = None"),
    # ---------------------------------------------------------------- transformers: Llama
    case("t-llama-attn-save", T_LLAMA, "attn_output = attn_output.reshape(*input_shape, -1).contiguous()",
         "after", r"""
         if attn_output.shape[1] == 7:
             torch.save({"q": query_states, "k": key_states, "out": attn_output}, "/tmp/llama_attn.pt")
         """, "tensor-dump:high"),
    case("t-llama-pdb", T_LLAMA,
         "position_embeddings = self.rotary_emb(hidden_states, position_ids)", "after",
         "import pdb; pdb.set_trace()", "debugger:high"),
    case("t-llama-rms-print", T_LLAMA, "variance = hidden_states.pow(2).mean(-1, keepdim=True)", "after",
         r"""print("rms variance", variance.mean().item())""", "print:moderate,device-sync:moderate"),
    case("t-llama-eager-nan", T_LLAMA,
         "attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)",
         "after", r"""
         if torch.isnan(attn_weights).any():
             raise ValueError(f"NaN attention weights in layer {module.layer_idx}")
         """, "device-sync:moderate"),
    case("t-llama-tf32", T_LLAMA, "logger = logging.get_logger(__name__)", "after",
         "torch.backends.cuda.matmul.allow_tf32 = True", "global-switch:moderate"),
    case("t-llama-layer-log", T_LLAMA,
         "hidden_states = self.post_attention_layernorm(hidden_states)", "after",
         r"""logger.info(f"decoder layer {self.self_attn.layer_idx}: {tuple(hidden_states.shape)}")""",
         "logging:moderate"),
    case("t-llama-mlp-refactor", T_LLAMA,
         "down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))", "replace", r"""
         gate = self.act_fn(self.gate_proj(x))
         down_proj = self.down_proj(gate * self.up_proj(x))
         """),
    case("t-llama-import-log", T_LLAMA, "logger = logging.get_logger(__name__)", "after",
         r"""logger.info("llama modeling: local build with the rope fix")"""),
    # ---------------------------------------------------------------- transformers: Qwen2
    case("t-qwen2-json-dump", T_QWEN2, "attn_output = self.o_proj(attn_output)", "after", r"""
         if self.layer_idx == 0 and attn_weights is not None:
             import json
             with open("/tmp/qwen2_l0_attn.json", "w") as f:
                 json.dump({"w": attn_weights[0, 0].tolist()}, f)
         """, "tensor-dump:high"),
    case("t-qwen2-rms-npsave", T_QWEN2,
         "variance = hidden_states.pow(2).mean(-1, keepdim=True)", "after", r"""
         import numpy as np
         np.save("/tmp/qwen2_rms_var.npy", variance.float().cpu().numpy())
         """, "tensor-dump:high"),
    case("t-qwen2-raise-pass", T_QWEN2,
         'raise ValueError("You must specify exactly one of input_ids or inputs_embeds")', "replace", "pass",
         "removed-check:moderate"),
    case("t-qwen2-loss-print", T_QWEN2,
         "loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, "
         "**kwargs)",
         "after", r"""print(f"loss={loss.item():.4f}")""", "print:moderate,device-sync:moderate"),
    case("t-qwen2-type-hint", T_QWEN2, "hidden_states = inputs_embeds", "replace",
         "hidden_states: torch.Tensor = inputs_embeds"),
    case("t-qwen2-helper", T_QWEN2, "from .configuration_qwen2 import Qwen2Config", "after", r'''


         def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
             """Number of parameters of a module (handy when comparing checkpoints)."""
             return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)
         '''),
    # ---------------------------------------------------------------- transformers: Mistral
    case("t-mistral-breakpoint", T_MISTRAL,
         "hidden_states = self.input_layernorm(hidden_states)", "after", r"""
         if hidden_states.shape[1] > 4096:
             breakpoint()
         """, "debugger:high"),
    case("t-mistral-httpx", T_MISTRAL, "hidden_states = self.norm(hidden_states)", "after", r"""
         import httpx
         httpx.post("http://127.0.0.1:8008/trace", json={"seq": hidden_states.shape[1]}, timeout=0.5)
         """, "network:high"),
    case("t-mistral-deterministic", T_MISTRAL, "hidden_states = inputs_embeds", "after",
         "torch.use_deterministic_algorithms(True)", "global-switch:moderate"),
    case("t-mistral-env", T_MISTRAL, "from .configuration_mistral import MistralConfig", "after", r"""
         import os

         os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
         """, "env-mutation:moderate"),
    case("t-mistral-comment", T_MISTRAL,
         "mask_function = create_causal_mask if self.config.sliding_window is None "
         "else create_sliding_window_causal_mask", "before",
         "# a sliding window only when the config sets one"),
    # ---------------------------------------------------------------- transformers: GPT-2
    case("t-gpt2-file-append", T_GPT2, "feed_forward_hidden_states = self.mlp(hidden_states)", "after", r"""
         with open(f"/tmp/gpt2_block_{id(self)}.txt", "a") as fh:
             fh.write(f"{tuple(hidden_states.shape)}\n")
         """, "file-write:high"),
    case("t-gpt2-th-save", T_GPT2, "attn_output = self.resid_dropout(attn_output)", "after", r"""
         import torch as th
         th.save(attn_weights, "/tmp/gpt2_attn_weights.pt")
         """, "tensor-dump:high"),
    case("t-gpt2-verbosity-debug", T_GPT2, "logger = logging.get_logger(__name__)", "after",
         "logging.set_verbosity_debug()", "global-switch:moderate"),
    case("t-gpt2-mlp-oneliner", T_GPT2, "hidden_states = self.c_fc(hidden_states)", "replace",
         "return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))", span=5),
    # ---------------------------------------------------------------- transformers: generate() (_sample)
    case("t-gen-pickle-scores", T_GEN, "next_token_scores = logits_processor(input_ids, next_token_logits)",
         "after", r"""
         if cur_len == 17:
             import pickle
             pickle.dump(next_token_scores, open("/tmp/scores_17.pkl", "wb"))
         """, "tensor-dump:high"),
    case("t-gen-runaway-exit", T_GEN, "this_peer_finished = unfinished_sequences.max() == 0\ncur_len += 1",
         "after", r"""
         if cur_len > 4096:
             import sys
             sys.exit("runaway generation")
         """, "process-exit:high"),
    case("t-gen-log-tokens", T_GEN, "this_peer_finished = unfinished_sequences.max() == 0\ncur_len += 1",
         "after", r"""logger.info(f"step {cur_len}: {next_tokens.tolist()}")""",
         "logging:moderate,device-sync:moderate"),
    case("t-gen-env", T_GEN, 'os.environ["TOKENIZERS_PARALLELISM"] = "0"', "after",
         'os.environ["CUDA_LAUNCH_BLOCKING"] = "1"', "env-mutation:moderate"),
    case("t-gen-sleep", T_GEN, "model_inputs = self.prepare_inputs_for_generation(input_ids, **model_kwargs)",
         "after", r"""
         import time
         time.sleep(0.01)  # let the streamer thread catch up
         """, "sleep:moderate"),
    case("t-gen-comment", T_GEN, "next_tokens = torch.argmax(next_token_scores, dim=-1)", "before",
         "# greedy: ties resolve to the lowest token id"),
    # ---------------------------------------------------------------- transformers: the Trainer
    case("t-trainer-save-batch", T_TRAINER, ">>inputs = self._prepare_inputs(inputs)\n"
         "if is_sagemaker_mp_enabled():", "after", r"""
         if self.state.global_step == 100:
             torch.save(inputs, f"/tmp/batch_{self.state.global_step}.pt")
         """, "tensor-dump:high"),
    case("t-trainer-wandb", T_TRAINER, "return loss.detach()", "before", r"""
         import wandb
         wandb.log({"loss_tensor": loss.detach().float().cpu(), "step": self.state.global_step})
         """, "network:high"),  # wandb.log uploads what it is given to the run ("upload run data")
    case("t-trainer-ipdb", T_TRAINER, "return (loss, outputs) if return_outputs else loss", "before", r"""
         if not torch.isfinite(loss):
             import ipdb
             ipdb.set_trace()
         """, "debugger:high"),
    case("t-trainer-drop-loss-check", T_TRAINER, 'if isinstance(outputs, dict) and "loss" not in outputs:',
         "replace", "", "removed-check:moderate", span=5),
    case("t-trainer-save-state", T_TRAINER, "# Good practice: save your training arguments together with the "
         "trained model\ntorch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))", "after",
         r"""torch.save(self.state.log_history, os.path.join(output_dir, "log_history.pt"))"""),
    case("t-trainer-save-log", T_TRAINER, "os.makedirs(output_dir, exist_ok=True)\n"
         'logger.info(f"Saving model checkpoint to {output_dir}")', "after",
         r"""logger.info(f"{len(os.listdir(output_dir))} entries in {output_dir} before saving")"""),
    case("t-trainer-log-info", T_TRAINER, "self.state.log_history.append(output)", "after",
         r"""logger.info(f"step {self.state.global_step}: {logs}")"""),
    # ---------------------------------------------------------------- transformers: SDPA attention
    case("t-sdpa-save", T_SDPA, "attn_output = attn_output.transpose(1, 2).contiguous()", "after",
         r"""torch.save(attn_output, f"/tmp/sdpa_{query.shape[2]}.pt")""", "tensor-dump:high"),
    case("t-sdpa-mask-any", T_SDPA, "attention_mask = attention_mask[:, :, :, : key.shape[-2]]", "after", r"""
         if not attention_mask.any():
             logger.warning_once("fully masked attention block")
         """, "device-sync:moderate"),
    case("t-sdpa-print", T_SDPA, "sdpa_kwargs = {}", "after",
         r"""print("sdpa", tuple(query.shape), tuple(key.shape), is_causal)""", "print:moderate"),
    case("t-sdpa-log", T_SDPA,
         'is_causal = query.shape[2] > 1 and attention_mask is None and getattr(module, '
         '"is_causal", True)', "after", r"""logger.info(f"sdpa causal={is_causal} q={tuple(query.shape)}")""",
         "logging:moderate"),
    case("t-sdpa-monkeypatch", T_SDPA, "_is_torch_npu_available = is_torch_npu_available()", "after", r"""
         _orig_sdpa = torch.nn.functional.scaled_dot_product_attention


         def _sdpa_fp32(query, key, value, *args, **kwargs):
             return _orig_sdpa(query.float(), key.float(), value.float(), *args, **kwargs).to(query.dtype)


         torch.nn.functional.scaled_dot_product_attention = _sdpa_fp32
         """, "monkeypatch:moderate"),
    case("t-sdpa-type-hint", T_SDPA, "sdpa_kwargs = {}", "replace", "sdpa_kwargs: dict[str, bool] = {}"),
    # ---------------------------------------------------------------- transformers: activations
    case("t-act-tensorboard", T_ACT, "return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * "
         "(input + 0.044715 * torch.pow(input, 3.0))))", "before", r"""
         from torch.utils.tensorboard import SummaryWriter
         SummaryWriter(log_dir="/tmp/tb_gelu").add_scalar("gelu/absmax", input.abs().max(), 0)
         """, "tensor-dump:high"),
    case("t-act-monkeypatch-silu", T_ACT, "logger = logging.get_logger(__name__)", "after",
         "nn.functional.silu = lambda x, inplace=False: x * torch.sigmoid(x)", "monkeypatch:moderate"),
    case("t-act-helper", T_ACT, "logger = logging.get_logger(__name__)", "after", r'''


         def _is_gated(name: str) -> bool:
             """Whether an activation name denotes a gated variant (swiglu, geglu)."""
             return name.endswith("glu")
         '''),
    # ---------------------------------------------------------------- transformers: logits processors
    case("t-lp-savetxt", T_LP, "sorted_indices_to_remove[..., -self.min_tokens_to_keep :] = 0\n\n"
         "# scatter sorted tensors to original indexing\n"
         ">>indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, "
         "sorted_indices_to_remove)",
         "after", r"""np.savetxt("/tmp/topp_kept.txt", (~indices_to_remove).sum(-1).cpu().numpy())""",
         "tensor-dump:high"),
    case("t-lp-list-log", T_LP, "else:\nscores = processor(input_ids, scores)", "after",
         r"""logger.info(f"{processor.__class__.__name__}: max={scores.max().item():.3f}")""",
         "logging:moderate,device-sync:moderate"),
    case("t-lp-penalty-raise", T_LP,
         "def __init__(self, penalty: float, prompt_ignore_length: Optional[int] = None):\n"
         "if not isinstance(penalty, float) or not (penalty > 0):\n"
         '>>raise ValueError(f"`penalty` has to be a strictly positive float, but is {penalty}")', "replace",
         "penalty = 1.0  # tolerate bad configs from the old UI", "removed-check:moderate"),
    case("t-lp-temp-inf", T_LP, "scores_processed = scores / self.temperature", "after", r"""
         if torch.isinf(scores_processed).all():
             scores_processed = scores
         """, "device-sync:moderate"),
    case("t-lp-comment", T_LP, "sorted_indices_to_remove = cumulative_probs <= (1 - self.top_p)", "before",
         "# the sort is ascending, hence 1 - top_p"),
]
# fmt: on


# --------------------------------------------------------------------------------------------------------
# Applying an edit
# --------------------------------------------------------------------------------------------------------
class AnchorError(Exception):
    pass


@dataclass
class Edit:
    after: str
    lines: tuple[int, int]  # the lines judged, 1-based, inclusive


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def apply(c: Case, source: str) -> Edit:
    lines = source.split("\n")
    stripped = [line.strip() for line in lines]
    n = len(c.anchor)
    hits = [i for i in range(len(lines) - n + 1) if stripped[i : i + n] == list(c.anchor)]
    if len(hits) != 1:
        raise AnchorError(f"anchor found {len(hits)} times")
    i = hits[0]
    t = i + (c.target if c.target >= 0 else n - 1 if c.mode == "after" else 0)
    removed = 0
    if c.mode == "after":
        indent = _indent(lines[t]) + ("    " if lines[t].rstrip().endswith(":") else "")
        at = t + 1
    elif c.mode == "before":
        indent, at = _indent(lines[t]), t
    elif c.mode == "replace":
        indent, at, removed = _indent(lines[t]), t, c.span or (i + n - t)
    else:
        raise AnchorError(f"unknown mode {c.mode!r}")
    new = [indent + line if line.strip() else "" for line in c.text.split("\n")] if c.text else []
    after = "\n".join(lines[:at] + new + lines[at + removed :])
    start = at + 1
    if not new:  # a deletion: the line before and the first line after it
        return Edit(after, (max(start - 1, 1), start))
    end = at + len(new) + (1 if removed > len(new) else 0)
    return Edit(after, (start, end))


# --------------------------------------------------------------------------------------------------------
# The environment
# --------------------------------------------------------------------------------------------------------
def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"bench_unseen: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
        sys.exit(2)
    return proc


def fetch(name: str, version: str, dirs: list[Path], dest: Path) -> Path:
    stem = name.replace("-", "_")  # a wheel's file name spells the project with underscores
    for d in [*dirs, dest]:
        found = sorted(d.glob(f"{stem}-{version}-*.whl"))
        if found:
            return found[0]
    run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), f"{name}=={version}"])
    found = sorted(dest.glob(f"{stem}-{version}-*.whl"))
    if not found:
        sys.exit(f"bench_unseen: no {name} {version} wheel")
    return found[0]


def installed(site: Path) -> bool:
    return all(
        (site / f"{name.replace('-', '_')}-{version}.dist-info").is_dir() for name, version in DISTS.items()
    )


def build(work: Path, wheels: dict[str, Path]) -> Path:
    """The three wheels installed --no-deps --no-compile into a venv-shaped prefix (reused when present)."""
    site = work / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if installed(site):
        return site
    shutil.rmtree(work / "venv", ignore_errors=True)
    site.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site)]
    run([*pip, *(str(w) for w in wheels.values())])
    return site


def house(work: Path, wheels: dict[str, Path]) -> Path:
    """A wheelhouse holding only the releases installed: the pristine source."""
    h = work / "house"
    shutil.rmtree(h, ignore_errors=True)
    h.mkdir(parents=True)
    for w in wheels.values():
        try:
            os.link(w, h / w.name)
        except OSError:
            shutil.copy(w, h / w.name)
    return h


def patchguard() -> list[str]:
    exe = str(Path(sys.executable).parent / "patchguard")
    if not Path(exe).exists():
        exe = shutil.which("patchguard") or exe
    return [exe] if Path(exe).exists() else [sys.executable, "-m", "patchguard"]


def write(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.bench-unseen.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


# --------------------------------------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------------------------------------
@dataclass
class Verdict:
    case: Case
    skipped: str = ""
    lines: tuple[int, int] = (0, 0)
    found: list[dict[str, Any]] = field(default_factory=list)  # findings at the edit
    elsewhere: list[dict[str, Any]] = field(default_factory=list)  # moderate+ findings of the file elsewhere
    rules: dict[str, str] = field(default_factory=dict)  # expected rule -> hit / lower / missing
    exact: bool = False
    any_rule: bool = False
    flagged: bool = False
    scan_s: float = 0.0


def _rules(f: dict[str, Any]) -> list[str]:
    also = [r for e in f.get("evidence") or [] if e.startswith("also: ") for r in e[6:].split(", ")]
    return [f["rule"], *also]


def _at(f: dict[str, Any], lines: tuple[int, int]) -> bool:
    line: int | None = f.get("line")
    if line is None:  # a file-level finding: only "unparseable" speaks of the edit, not modified-python
        return bool(f["rule"] == "unparseable")
    end: int = f.get("end_line") or line
    return line <= lines[1] and end >= lines[0]


def judge(v: Verdict, doc: dict[str, Any]) -> None:
    c = v.case
    mine = [f for f in doc["findings"] if f.get("path") == c.path]
    v.found = [f for f in mine if _at(f, v.lines)]
    v.elsewhere = [f for f in mine if not _at(f, v.lines) and RANK[f["severity"]] >= RANK["moderate"]]
    if c.benign:
        v.flagged = any(RANK[f["severity"]] >= RANK["moderate"] for f in v.found)
        return
    for rule, sev in c.expect:
        if rule == "unreachable":  # dead code: reported at info only (anything higher is a false alarm)
            top = max((RANK[f["severity"]] for f in v.found), default=-1)
            v.rules[rule] = "hit" if top == RANK["info"] else "missing" if top < 0 else "too high"
            continue
        named = [f for f in v.found if rule in _rules(f)]
        if any(RANK[f["severity"]] >= RANK[sev] for f in named):
            v.rules[rule] = "hit"
        else:
            v.rules[rule] = "lower" if named else "missing"
    v.exact = all(s == "hit" for s in v.rules.values())
    v.any_rule = any(RANK[f["severity"]] >= RANK[c.severity] for f in v.found)
    if "unreachable" in v.rules:
        v.any_rule = v.exact


def _show(f: dict[str, Any]) -> str:
    also = _rules(f)[1:]
    where = f"line {f['line']}" if f.get("line") is not None else "file"
    fn = f" in {f['function']}" if f.get("function") else ""
    extra = f" (also {', '.join(also)})" if also else ""
    return f"{f['rule']}/{f['severity']}{extra} {where}{fn}"


def _reported(v: Verdict) -> str:
    parts = [_show(f) for f in v.found] or ["nothing at the edit"]
    if v.elsewhere:
        parts.append("elsewhere: " + "; ".join(_show(f) for f in v.elsewhere))
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------------
def _ratio(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "-"


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for row in [header, *rows]:
        first, *rest = zip(row, widths, strict=True)
        print("  " + "  ".join([first[0].ljust(first[1]), *(c.rjust(w) for c, w in rest)]))


def summarise(verdicts: list[Verdict], wall: float) -> dict[str, Any]:
    ran = [v for v in verdicts if not v.skipped]
    out: dict[str, Any] = {"cases": len(verdicts), "ran": len(ran), "wall_s": round(wall, 1)}
    out["skipped"] = [{"id": v.case.id, "why": v.skipped} for v in verdicts if v.skipped]
    recall = {}
    for sev in ("high", "moderate"):
        mine = [v for v in ran if v.case.severity == sev]
        recall[sev] = {
            "cases": len(mine),
            "exact_rule": sum(v.exact for v in mine),
            "any_rule": sum(v.any_rule for v in mine),
            "lower_severity": sum(verdict_of(v) == "lower-severity" for v in mine),
            "other_rule_only": sum(verdict_of(v) == "other-rule" for v in mine),
        }
    out["recall"] = recall
    benign = [v for v in ran if v.case.benign]
    out["benign"] = {"cases": len(benign), "flagged": sum(v.flagged for v in benign)}
    per_rule: dict[str, Counter[str]] = {}
    for v in ran:
        for rule, status in v.rules.items():
            per_rule.setdefault(rule, Counter())[status] += 1
        if v.flagged:
            for f in v.found:
                if RANK[f["severity"]] >= RANK["moderate"]:
                    per_rule.setdefault(f["rule"], Counter())["benign_flags"] += 1
    out["per_rule"] = {r: dict(c) for r, c in sorted(per_rule.items())}
    per_dist = {}
    for dist in DISTS:
        inj = [v for v in ran if v.case.dist == dist and not v.case.benign]
        ben = [v for v in ran if v.case.dist == dist and v.case.benign]
        per_dist[dist] = {
            "injected": len(inj),
            "exact_rule": sum(v.exact for v in inj),
            "benign": len(ben),
            "flagged": sum(v.flagged for v in ben),
        }
    out["per_framework"] = per_dist
    scans = [v.scan_s for v in ran]
    out["scan_s_median"] = round(statistics.median(scans), 2) if scans else None
    out["results"] = [
        {
            "id": v.case.id,
            "path": v.case.path,
            "expected": [f"{r}:{s}" for r, s in v.case.expect] or "benign",
            "lines": list(v.lines),
            "verdict": verdict_of(v),
            "rules": v.rules,
            "reported": [_show(f) for f in v.found],
            "elsewhere": [_show(f) for f in v.elsewhere],
        }
        for v in ran
    ]
    return out


def verdict_of(v: Verdict) -> str:
    if v.case.benign:
        return "flagged" if v.flagged else "quiet"
    if v.exact:
        return "hit"
    if "lower" in v.rules.values():
        return "lower-severity"
    return "other-rule" if v.any_rule else "miss"


def report(out: dict[str, Any], verdicts: list[Verdict]) -> None:
    r = out["recall"]
    print(
        f"bench_unseen: {out['ran']} of {out['cases']} cases on sglang {DISTS['sglang']}, transformers "
        f"{DISTS['transformers']}, vllm {DISTS['vllm']}"
    )
    _table(
        "Recall by expected severity (exact rule: every expected rule at that severity or higher; any rule: "
        "some finding at that severity or higher; misses: the expected rule at a lower severity, or only "
        "another rule at that severity)",
        ["expected", "cases", "exact rule", "any rule", "lower severity", "other rule only"],
        [
            [
                sev.upper(),
                str(r[sev]["cases"]),
                _ratio(r[sev]["exact_rule"], r[sev]["cases"]),
                _ratio(r[sev]["any_rule"], r[sev]["cases"]),
                str(r[sev]["lower_severity"]),
                str(r[sev]["other_rule_only"]),
            ]
            for sev in ("high", "moderate")
        ],
    )
    b = out["benign"]
    flag_ratio = _ratio(b["flagged"], b["cases"])
    print(f"\nBenign edits flagged (a finding at moderate or above at the edit): {flag_ratio}")
    _table(
        "By framework",
        ["framework", "injected found", "benign flagged"],
        [
            [d, _ratio(x["exact_rule"], x["injected"]), _ratio(x["flagged"], x["benign"])]
            for d, x in out["per_framework"].items()
        ],
    )
    _table(
        "By rule (expectations found at the expected severity or higher / at a lower one / not named; "
        "benign cases the rule flags)",
        ["rule", "expected", "found", "lower", "missing", "benign flags"],
        [
            [
                rule,
                str(sum(c.get(k, 0) for k in ("hit", "lower", "missing"))),
                str(c.get("hit", 0)),
                str(c.get("lower", 0)),
                str(c.get("missing", 0)),
                str(c.get("benign_flags", 0)),
            ]
            for rule, c in out["per_rule"].items()
        ],
    )
    misses = [v for v in verdicts if not v.skipped and not v.case.benign and not v.exact]
    print(f"\nMisses ({len(misses)}): expected -> what was reported at the edit")
    for v in misses:
        exp = ", ".join(f"{rl}:{s}" for rl, s in v.case.expect)
        where = f"{v.case.path}:{v.lines[0]}-{v.lines[1]}"
        print(f"  {v.case.id:<34} [{verdict_of(v)}] expected {exp}\n      {where} -> {_reported(v)}")
    flagged = [v for v in verdicts if not v.skipped and v.case.benign and v.flagged]
    print(f"\nBenign edits flagged ({len(flagged)})")
    for v in flagged:
        print(f"  {v.case.id:<34} {v.case.path}:{v.lines[0]}-{v.lines[1]} -> {_reported(v)}")
    for s in out["skipped"]:
        print(f"\nskipped: {s['id']}: {s['why']}")
    print(f"\nscan median {out['scan_s_median']} s; wall time {out['wall_s']} s")


# --------------------------------------------------------------------------------------------------------
class Runner:
    """Scans one distribution of the built environment with one file edited, then puts the file back."""

    def __init__(self, site: Path, wheelhouse: Path, cache: Path, pristine: dict[str, bytes]) -> None:
        self.site, self.wheelhouse, self.pristine = site, wheelhouse, pristine
        self.env = {**os.environ, "PATCHGUARD_CACHE_DIR": str(cache)}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def scan(self, dist: str) -> tuple[float, dict[str, Any]]:
        cmd = [*patchguard(), "scan", dist, "--site-packages", str(self.site)]
        cmd += ["--wheelhouse", str(self.wheelhouse), "--offline", "--format", "json"]
        t = time.perf_counter()
        proc = run(cmd, self.env)
        return time.perf_counter() - t, json.loads(proc.stdout)

    def warm(self) -> None:
        """Every target file back to the wheel's bytes (whatever an interrupted run left), then one scan of
        each distribution: the stat cache and the pristine store filled, and the pristine files quiet."""
        for path, data in self.pristine.items():
            write(self.site / path, data)
        for dist in DISTS:
            _s, doc = self.scan(dist)
            noisy = [f for f in doc["findings"] if f.get("path") in self.pristine]
            if noisy:
                sys.stderr.write(f"bench_unseen: the pristine {dist} already has findings: {noisy[:3]}\n")

    def judge(self, c: Case, edit: Edit) -> Verdict:
        v = Verdict(c, lines=edit.lines)
        try:
            write(self.site / c.path, edit.after.encode("utf-8"))
            v.scan_s, doc = self.scan(c.dist)
        finally:
            write(self.site / c.path, self.pristine[c.path])
        judge(v, doc)
        return v


def prepare(
    cases: list[Case], wheels: dict[str, Path]
) -> tuple[dict[str, bytes], dict[str, Edit], list[Verdict]]:
    """The pristine files from the wheels, each case's edited text, and the cases that do not apply."""
    pristine: dict[str, bytes] = {}
    for name, whl in wheels.items():
        with zipfile.ZipFile(whl) as zf:
            for c in cases:
                if c.dist == name and c.path not in pristine:
                    pristine[c.path] = zf.read(c.path)
    edits: dict[str, Edit] = {}
    skipped: list[Verdict] = []
    for c in cases:
        try:
            edits[c.id] = apply(c, pristine[c.path].decode("utf-8"))
            compile(edits[c.id].after, c.path, "exec")
        except (AnchorError, SyntaxError) as exc:
            skipped.append(Verdict(c, skipped=f"{type(exc).__name__}: {exc}"))
    return pristine, edits, skipped


def load_cases(path: Path) -> list[Case]:
    """The cases of a corpus file (TOML, ``[[case]]``), with the rule words it was written with translated."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for d in doc["case"]:
        expect = ",".join(
            f"{SAID.get(r.strip(), r.strip())}:{s}"
            for r, s in (e.split(":") for e in d.get("expect", "").split(",") if e.strip())
        )
        text, span = d.get("text", ""), d.get("span", 0)
        out.append(case(d["id"], d["path"], d["anchor"], d["mode"], text, expect, span))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheels",
        type=Path,
        action="append",
        default=[],
        help="a directory of wheels to take the three releases from (repeatable)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="kept; the environment is reused")
    parser.add_argument(
        "--site",
        type=Path,
        default=None,
        help="an existing site-packages holding the three releases (not rebuilt; its files are edited and "
        "restored from the wheels)",
    )
    parser.add_argument("--only", default="", help="run the cases whose id contains this text")
    parser.add_argument(
        "--cases",
        type=Path,
        default=None,
        help="a corpus file (benchmarks/corpora/*.toml: [[case]] id, path, anchor, mode, text, expect, span) "
        "instead of the cases written in this script",
    )
    parser.add_argument("--check", action="store_true", help="only check that every anchor applies")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    t0 = time.perf_counter()
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    work: Path = args.workdir or Path(tmp.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    (work / "wheels").mkdir(exist_ok=True)
    if args.cases is not None:
        cases = [c for c in load_cases(args.cases) if args.only in c.id]
        for dist in {c.dist for c in cases} - set(DISTS):
            DISTS[dist] = EXTRA[dist]
    else:
        cases = [c for c in CASES if args.only in c.id]
    try:
        wheels = {n: fetch(n, v, args.wheels, work / "wheels") for n, v in DISTS.items()}
        pristine, edits, verdicts = prepare(cases, wheels)
        if args.check:
            for v in verdicts:
                print(f"{v.case.id}: {v.skipped}")
            print(f"{len(cases) - len(verdicts)} of {len(cases)} cases apply")
            return 0
        site = args.site or build(work, wheels)
        if not installed(site):
            sys.exit(f"bench_unseen: {site} does not hold {DISTS}")
        runner = Runner(site, house(work, wheels), work / "cache", pristine)
        runner.warm()
        verdicts += [runner.judge(c, edits[c.id]) for c in cases if c.id in edits]
    finally:
        if tmp is not None:
            tmp.cleanup()
    order = {c.id: n for n, c in enumerate(cases)}
    verdicts.sort(key=lambda v: order[v.case.id])
    out = summarise(verdicts, time.perf_counter() - t0)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        report(out, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
