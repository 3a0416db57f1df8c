"""Every rule id patchguard reports on code, with its default severity, a one-line rationale and — for a rule
met in calls — what it recognises: one entry per rule. Adding a family member is one line here.

A table below both the judge (:mod:`patchguard.analysis`) and the formatters (SARIF names each rule): the ids
are part of the report contract (``rule``), and ``ignore = [{rule = ...}]`` in a policy names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Severity

__all__ = ["FILE_RULES", "RULES", "Rule", "Targets", "known_rule"]


_NETWORK_VERBS = frozenset(
    {"get", "post", "put", "delete", "patch", "request", "head", "Client", "Session", "AsyncClient"}
    | {"ClientSession", "urlopen", "stream", "send"}
)
# What an experiment tracker's API does that reaches its service (wandb's and mlflow's references): a run
# started or ended, anything logged, saved, watched or alerted, a run's config or summary updated (synced to
# the run's page), a tag set. Reached through the module's objects as well (``wandb.run.log``,
# ``wandb.config.update``, ``mlflow.pytorch.log_model``).
_TRACKER_VERBS = frozenset(
    {"init", "finish", "log", "save", "watch", "alert", "update", "log_artifact", "use_artifact", "log_model"}
    | {"log_code", "start_run", "end_run", "log_metric", "log_metrics", "log_param", "log_params", "log_dict"}
    | {"log_text", "log_figure", "log_image", "log_table", "log_input", "set_tag", "set_tags", "Api"}
)


@dataclass(frozen=True, slots=True)
class Targets:
    """What a rule recognises in a call, as data: qualified names, whole modules (every callable of them
    and their submodules), name prefixes (``os.exec`` → ``os.execv``), a module's methods (of it or its
    objects), method names on any receiver, and module attributes whose assignment has the effect. Names are
    qualified as imports resolve them, private real
    paths behind public aliases included (``torch.serialization.save`` for ``torch.save``)."""

    effect: str  # what the code does, in a word or two
    calls: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    module_methods: tuple[tuple[str, frozenset[str]], ...] = ()
    methods: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()  # module attributes whose assignment is the effect (name prefixes)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule, one entry: its id, default severity, rationale, and — for a rule met in calls — what it
    recognises (:class:`Targets`); the analysis derives its lookup tables and prefilter from these."""

    id: str
    severity: Severity
    rationale: str
    targets: Targets | None = None


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule(
            "tensor-dump",
            Severity.HIGH,
            "writes tensors or objects to disk",
            Targets(
                "writes tensors or objects",
                calls=(
                    "torch.save",
                    "torch.serialization.save",
                    "torch.serialization._save",
                    "torch.jit.save",
                    "torch.jit._serialization.save",
                    "torch.distributed.checkpoint.save",
                    "torch.distributed.checkpoint.save_state_dict",
                    "torch.distributed.checkpoint.async_save",
                    "torch.export.save",  # an ExportedProgram to a file (torch.export docs)
                    "torch.onnx.export",  # the traced model to ``f``
                    "torch.utils.tensorboard.SummaryWriter",
                    "torch.utils.tensorboard.writer.SummaryWriter",
                    "tensorboardX.SummaryWriter",
                    "numpy.save",
                    "numpy.savez",
                    "numpy.savez_compressed",
                    "numpy.savetxt",
                    "numpy.lib.npyio.save",
                    "numpy.lib.npyio.savez",
                    "numpy.lib.npyio.savez_compressed",
                    "numpy.lib.npyio.savetxt",
                    "numpy.lib.format.write_array",
                    "pickle.dump",
                    "_pickle.dump",
                    "cloudpickle.dump",
                    "dill.dump",
                    "joblib.dump",
                    "marshal.dump",
                    "shelve.open",  # a dict whose every value is pickled to a file
                    "shelve.DbfilenameShelf",
                    "json.dump",
                    "yaml.dump",
                    "yaml.safe_dump",
                    "h5py.File",
                    "zarr.save",
                    "scipy.io.savemat",
                    # arrays as media files (each library's docs: the array written to the path given)
                    "scipy.io.wavfile.write",
                    "scipy.io.mmwrite",
                    "soundfile.write",
                    "torchaudio.save",
                    "torchvision.utils.save_image",
                    "torchvision.io.write_png",
                    "torchvision.io.write_jpeg",
                    "torchvision.io.write_video",
                    "imageio.imwrite",
                    "imageio.v2.imwrite",
                    "imageio.v3.imwrite",
                    "imageio.mimwrite",
                    "cv2.imwrite",
                    "pandas.DataFrame.to_pickle",
                    "safetensors.torch.save_file",
                    "safetensors.torch.save_model",
                    "safetensors.numpy.save_file",
                ),
                methods=(
                    "tofile",
                    "add_histogram",
                    "add_tensor",
                    "add_embedding",
                ),
            ),
        ),
        Rule(
            "file-write",
            Severity.HIGH,
            "writes a file from library code",
            Targets(
                "writes a file",
                calls=(
                    "os.write",
                    "os.writev",
                    "os.pwrite",
                    "os.pwritev",
                    "shutil.copyfileobj",
                    "os.sendfile",
                    # the standard library's writers of whole files (its docs: shutil, logging.handlers)
                    "shutil.copy",
                    "shutil.copy2",
                    "shutil.copyfile",
                    "shutil.copytree",
                    "shutil.move",
                    "shutil.make_archive",
                    "torch.cuda.memory._dump_snapshot",  # the allocator's history, pickled to a file
                    "logging.FileHandler",  # opens its file for appending when made
                    "logging.handlers.RotatingFileHandler",
                    "logging.handlers.TimedRotatingFileHandler",
                    "logging.handlers.WatchedFileHandler",
                ),
                methods=(
                    "write_text",
                    "write_bytes",
                    # torch.profiler's profile objects (its docs): each writes a trace file
                    "export_chrome_trace",
                    "export_stacks",
                    "export_memory_timeline",
                ),
            ),
        ),
        Rule(
            "debugger",
            Severity.HIGH,
            "stops the server waiting for a debugger",
            Targets(
                "stops for a debugger",
                calls=(
                    "breakpoint",
                    "builtins.breakpoint",
                    "sys.breakpointhook",  # what breakpoint() calls: the debugger, called by hand
                    "sys.__breakpointhook__",
                    "code.interact",
                    "code.InteractiveConsole",
                    "IPython.embed",
                    "IPython.start_ipython",
                    "IPython.terminal.embed.embed",
                    "IPython.terminal.embed.InteractiveShellEmbed",
                    "celery.contrib.rdb.set_trace",
                    "torch.distributed.breakpoint",
                    "faulthandler.dump_traceback_later",
                    "faulthandler.register",  # every thread's stack dumped when a signal comes: a debug hook
                    "ipdb.launch_ipdb_on_exception",
                ),
                modules=(
                    "pdb",
                    "ipdb",
                    "pudb",
                    "debugpy",
                    "ptvsd",
                    "remote_pdb",
                    "rpdb",
                    "web_pdb",
                    "pydevd",
                    "pydevd_pycharm",
                    "madbg",
                    "wdb",
                    "pdbr",
                ),
                methods=("set_trace",),
            ),
        ),
        Rule(
            "process-exit",
            Severity.HIGH,
            "ends, signals or stops the process",
            Targets(
                "ends, signals or stops the process",
                calls=(
                    "sys.exit",
                    "os._exit",
                    "exit",
                    "quit",
                    "builtins.exit",
                    "builtins.quit",
                    "os.kill",
                    "os.killpg",
                    "os.abort",
                    "signal.raise_signal",
                    "signal.pthread_kill",
                    "signal.alarm",
                    "SystemExit",
                    "builtins.SystemExit",
                    "_thread.interrupt_main",
                    "signal.pause",  # waits for a signal that may never come: the process hangs there
                ),
                # psutil's process objects (``psutil.Process().terminate()``): psutil's documented verbs
                module_methods=(("psutil", frozenset({"terminate", "kill", "send_signal", "suspend"})),),
            ),
        ),
        Rule(
            "subprocess",
            Severity.HIGH,
            "runs another program",
            Targets(
                "runs another program",
                calls=(
                    "os.system",
                    "os.popen",
                    "pty.spawn",
                    "os.forkpty",
                    "os.fork",
                    "asyncio.create_subprocess_exec",
                    "asyncio.create_subprocess_shell",
                    "commands.getoutput",
                ),
                modules=(
                    "subprocess",
                    "sh",
                    "plumbum",
                    "pexpect",
                ),
                prefixes=(
                    "os.exec",
                    "os.spawn",
                    "os.posix_spawn",
                ),
            ),
        ),
        Rule(
            "network",
            Severity.HIGH,
            "opens a network connection",
            Targets(
                "talks to the network",
                calls=(
                    "socket.socket",
                    "socket.create_connection",
                    "socket.create_server",
                    "urllib.request.urlopen",
                    "urllib.request.urlretrieve",
                    "http.client.HTTPConnection",
                    "http.client.HTTPSConnection",
                    "smtplib.SMTP",
                    "smtplib.SMTP_SSL",
                    "ftplib.FTP",
                    "telnetlib.Telnet",
                    "xmlrpc.client.ServerProxy",
                    "zmq.Context",
                    "zmq.Context.instance",
                    "zmq.asyncio.Context",
                    "zmq.asyncio.Context.instance",
                    "grpc.insecure_channel",
                    "grpc.secure_channel",
                    "paramiko.SSHClient",
                    # clients of services a serving box talks to (their docs: each connects, or sends, when
                    # made or first used)
                    "redis.Redis",
                    "redis.StrictRedis",
                    "redis.from_url",
                    "redis.Redis.from_url",
                    "redis.client.Redis",
                    "redis.asyncio.Redis",
                    "redis.asyncio.from_url",
                    "redis.cluster.RedisCluster",
                    "boto3.client",
                    "boto3.resource",
                    "boto3.session.Session",
                    "pymongo.MongoClient",
                    "kafka.KafkaProducer",
                    "confluent_kafka.Producer",
                    "pika.BlockingConnection",
                    "paho.mqtt.client.Client",
                    "websocket.create_connection",
                    "websockets.connect",
                    "websockets.sync.client.connect",
                    "statsd.StatsClient",
                    "prometheus_client.push_to_gateway",
                    "prometheus_client.pushadd_to_gateway",
                    "slack_sdk.WebClient",
                    "psycopg2.connect",
                    "pymysql.connect",
                    # experiment trackers whose run or task, once made, syncs to the service (their docs);
                    # wandb's and mlflow's module APIs are read by their verbs (:data:`_TRACKER_VERBS`)
                    "comet_ml.Experiment",
                    "neptune.init_run",
                    "clearml.Task.init",
                    # the Hugging Face Hub's client: each downloads from or uploads to the Hub (its docs)
                    "huggingface_hub.snapshot_download",
                    "huggingface_hub.hf_hub_download",
                    "huggingface_hub.upload_file",
                    "huggingface_hub.upload_folder",
                    "huggingface_hub.HfApi",
                    # torch.distributed's key-value store over TCP: it listens on, or connects to, a port
                    # (its docs: "a TCP-based distributed key-value store")
                    "torch.distributed.TCPStore",
                ),
                # an object store's client uploading, whoever made it (boto3's S3 client and resource,
                # and the clients that copy its API: their docs)
                methods=("put_object", "upload_file", "upload_fileobj", "upload_part", "put_object_acl"),
                module_methods=(
                    ("requests", _NETWORK_VERBS),
                    ("httpx", _NETWORK_VERBS),
                    ("aiohttp", _NETWORK_VERBS),
                    ("urllib3", _NETWORK_VERBS | {"PoolManager"}),
                    ("wandb", _TRACKER_VERBS),
                    ("mlflow", _TRACKER_VERBS),
                ),
            ),
        ),
        Rule(
            "dynamic-exec",
            Severity.HIGH,
            "executes code built at run time",
            Targets(
                "loads or runs code built at run time",
                calls=(
                    "exec",
                    "eval",
                    "compile",
                    "builtins.exec",
                    "builtins.eval",
                    "builtins.compile",
                    "runpy.run_path",
                    "runpy.run_module",
                    "importlib.util.spec_from_file_location",
                    "importlib.machinery.SourceFileLoader",
                    "imp.load_source",
                    "imp.load_dynamic",
                    "zipimport.zipimporter",
                    "torch.ops.load_library",
                    "torch.utils.cpp_extension.load",
                    "torch.utils.cpp_extension.load_inline",
                    "cffi.FFI",
                    # PyYAML's loaders that construct any object a document names (its docs: "unsafe")
                    "yaml.unsafe_load",
                    "yaml.unsafe_load_all",
                ),
            ),
        ),
        Rule(
            "print",
            Severity.MODERATE,
            "prints from library code (on a hot path it costs every request)",
            Targets(
                "prints",
                calls=(
                    "print",
                    "builtins.print",
                    "sys.stdout.write",
                    "sys.stderr.write",
                    "sys.stdout.writelines",
                    "sys.stderr.writelines",
                    "sys.__stdout__.write",
                    "sys.__stderr__.write",
                    "pprint.pprint",
                    "pprint.pp",
                    "rich.print",
                    "rich.inspect",
                    "icecream.ic",
                    "tqdm.write",  # tqdm's print that keeps progress bars whole
                    "tqdm.tqdm.write",
                    "tqdm.std.tqdm.write",
                    "tqdm.auto.tqdm.write",
                    # printed by the device on every launch of the kernel (triton.language's docs)
                    "triton.language.device_print",
                ),
            ),
        ),
        Rule("logging", Severity.MODERATE, "logs from library code (on a hot path it costs every request)"),
        Rule(
            "sleep",
            Severity.MODERATE,
            "sleeps in library code",
            Targets(
                "waits",
                calls=(
                    "time.sleep",
                    # torch.cuda._sleep spins a kernel on the device for a number of cycles (its docstring):
                    # a delay every launch after it on the stream waits out
                    "torch.cuda._sleep",
                    "asyncio.sleep",
                    "trio.sleep",
                    "gevent.sleep",
                    "threading.Event.wait",
                    "threading.Condition.wait",
                    "threading.Barrier.wait",
                ),
            ),
        ),
        Rule(
            "device-sync",
            Severity.MODERATE,
            "forces a device synchronisation: the host waits for the device",
            Targets(
                "waits for the device",
                calls=(
                    "torch.cuda.synchronize",
                    "torch.cuda.current_stream.synchronize",
                    "torch.cuda.empty_cache",
                    "torch.cuda.ipc_collect",
                    "torch.cuda.memory_summary",
                    "torch.equal",
                    # a Python bool of every element compared (torch's docs: "returns bool"), read on the host
                    "torch.allclose",
                    # torch.testing compares every element and raises with the mismatches (its docs): the
                    # values are read on the host
                    "torch.testing.assert_close",
                    "torch.testing.assert_allclose",
                    "torch.distributed.barrier",
                    "torch.xpu.synchronize",
                    "torch.mps.synchronize",
                    # MLX evaluates lazily; mlx.core.eval computes the arrays and returns when they are done
                    # (its docs), as jax.block_until_ready waits for the device's buffers
                    "mlx.core.eval",
                    "mlx.core.synchronize",
                    "jax.block_until_ready",
                ),
                methods=(
                    "cpu",
                    "item",
                    "tolist",
                    "numpy",
                    "synchronize",
                    # (not a stream's ``wait_event``/``wait_stream``, nor an event's ``wait``: they make the
                    # stream's later work wait on the device, and return at once — torch.cuda.Stream's docs)
                    "block_until_ready",
                ),
            ),
        ),
        Rule(
            "monkeypatch",
            Severity.MODERATE,
            "changes another module's attributes at run time",
            Targets("changes another module", calls=("setattr",)),
        ),
        Rule(
            "global-switch",
            Severity.MODERATE,
            "changes behaviour for the whole process",
            Targets(
                "flips a switch for the whole process",
                calls=(
                    "torch.autograd.set_detect_anomaly",
                    "torch.autograd.detect_anomaly",
                    "torch.autograd.set_grad_enabled",
                    "torch.set_grad_enabled",
                    "torch.use_deterministic_algorithms",
                    "torch.set_deterministic_debug_mode",
                    "torch.set_default_dtype",
                    "torch.set_default_device",
                    "torch.set_default_tensor_type",
                    "torch.set_float32_matmul_precision",
                    "torch.set_num_threads",
                    "torch.set_flush_denormal",
                    "torch.set_warn_always",
                    "torch.cuda.set_sync_debug_mode",
                    # torch.distributed's debug level (its docs): every collective of the process checked
                    # and logged at that level
                    "torch.distributed.set_debug_level",
                    "torch.distributed.set_debug_level_from_env",
                    # torch.backends' setters (its docs): which kernels every attention and matmul uses
                    "torch.backends.cuda.enable_flash_sdp",
                    "torch.backends.cuda.enable_mem_efficient_sdp",
                    "torch.backends.cuda.enable_math_sdp",
                    "torch.backends.cuda.enable_cudnn_sdp",
                    "torch.backends.cuda.preferred_linalg_library",
                    "torch.backends.cuda.preferred_blas_library",
                    "torch.backends.cuda.preferred_rocm_fa_library",
                    "torch.backends.mha.set_fastpath_enabled",
                    "torch.autograd.profiler.profile",
                    "torch.autograd.set_multithreading_enabled",
                    "sys.settrace",
                    "sys.setprofile",
                    "sys.setrecursionlimit",
                    "sys.setswitchinterval",
                    "threading.settrace",
                    "threading.setprofile",
                    "threading.settrace_all_threads",
                    "threading.setprofile_all_threads",
                    "gc.disable",
                    "gc.set_threshold",  # how often the collector runs, for the whole process (its docs)
                    "gc.set_debug",
                    "faulthandler.enable",
                    "tracemalloc.start",
                    # the random state every sampler of the process draws from, seeded (torch.random's,
                    # numpy.random's and random's docs: one generator per process, or per device)
                    "torch.manual_seed",
                    "torch.random.manual_seed",
                    "torch.seed",
                    "torch.cuda.manual_seed",
                    "torch.cuda.manual_seed_all",
                    "numpy.random.seed",
                    "random.seed",
                    "warnings.simplefilter",
                    "warnings.filterwarnings",
                    "numpy.seterr",
                    "numpy.set_printoptions",
                    "torch.set_printoptions",
                    "logging.basicConfig",
                    "logging.disable",
                    # transformers' own logging API: the library's verbosity for the whole process
                    "transformers.utils.logging.set_verbosity_debug",
                    "transformers.utils.logging.set_verbosity_info",
                    "transformers.logging.set_verbosity_debug",
                    "transformers.logging.set_verbosity_info",
                    "diffusers.utils.logging.set_verbosity_debug",
                ),
                # transformers' logging API through a relative import (``from ...utils import logging``)
                methods=("set_verbosity_debug",),
                attributes=(
                    "torch.backends.",
                    "torch._dynamo.config.",
                    "torch._inductor.config.",
                    "torch._functorch.config.",
                    "torch.autograd.grad_mode.",
                    "logging.root.",
                    "sys.flags.",
                ),
            ),
        ),
        Rule("swallowed-exception", Severity.MODERATE, "silences every error of the block"),
        Rule(
            "env-mutation",
            Severity.MODERATE,
            "changes the process environment at run time",
            Targets(
                "changes the process environment",
                calls=(
                    "os.putenv",
                    "os.unsetenv",
                    "os.environ.update",
                    "os.environ.setdefault",
                    "os.environ.pop",
                    "os.environ.clear",
                    "os.environ.popitem",
                    "os.environ.__setitem__",
                    "os.environ.__delitem__",
                ),
            ),
        ),
        Rule("removed-check", Severity.MODERATE, "a raise or assert of the pristine code was removed"),
        Rule("unparseable", Severity.MODERATE, "is not valid Python: importing it fails"),
        Rule("commented-out-code", Severity.MINOR, "code left behind in a comment"),
        Rule("functional-change", Severity.MINOR, "logic differs from the pristine wheel"),
        Rule("cosmetic-change", Severity.MINOR, "only comments, layout or docstrings differ"),
    )
}


FILE_RULES: dict[str, str] = {
    "modified-python": "a .py file differs from its RECORD hash",
    "modified-extension": "a compiled extension differs from its RECORD hash",
    "modified-script": "a console script differs from its RECORD hash",
    "modified-pth": "an owned .pth file differs from its RECORD hash",
    "modified-data": "a data file differs from its RECORD hash",
    "missing-file": "listed in RECORD, not on disk",
    "unexpected-python": "a .py file no distribution installed",
    "unexpected-extension": "a compiled extension no distribution installed",
    "unexpected-bytecode": "a sourceless .pyc no distribution installed",
    "orphan-bytecode": "a .pyc whose source is not installed",
    "unexpected-file": "a file no distribution installed",
    "unexpected-directory": "a top-level directory no distribution installed",
    "pth-import": "an unowned .pth file with an import line: runs at every interpreter start",
    "pth-path": "an unowned .pth file that adds paths",
    "sitecustomize": "sitecustomize.py / usercustomize.py: imported at every interpreter start",
    "record-row": "a malformed RECORD row",
    "record-hex": "RECORD hashes written in hex (uv_build before 0.8.13): files checked as hex, info",
    "record-wrong": "the wheel's own RECORD is wrong about a file: it is as shipped, info",
    "record-duplicate": "a path RECORD lists twice, as installers write it (pip's compiled bytecode), info",
    "overwritten": "a file another distribution installed over this one's copy (both list it), minor",
    "record-absent": "a distribution without RECORD",
    "managed-replaced": "a conda or Debian package pip installed over: checked by the new RECORD, info",
    "files-elsewhere": "RECORD lists files outside the environment",
    "duplicate-metadata": "two metadata directories for one distribution",
    "unreadable": "a file that could not be checked",
    "record-tampered": "a file edited together with its RECORD row (--verify-record)",
    "record-added": "RECORD lists a file the wheel does not (--verify-record)",
    "record-differs": "a RECORD row differs from the wheel's (--verify-record)",
    "record-unverified": "RECORD could not be compared with the wheel's (--verify-record)",
    "vcs-install": "installed from a VCS URL: no wheel to diff against",
    "editable-unverifiable": "an editable install whose checkout cannot be compared",
}
"""The rule ids of findings about files rather than code (``kind`` other than a code change)."""


def known_rule(rule: str) -> bool:
    """Whether ``rule`` is a rule id some finding can carry."""
    return rule in RULES or rule in FILE_RULES
