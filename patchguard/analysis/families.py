"""The rule families as data: for each code rule, what it recognises — call targets by qualified name, whole
modules (every callable of them), methods of those modules' objects, and method names on any receiver.

This table is the one place a call target lives: :mod:`.rules` derives its lookup tables and the prefilter
(:func:`.rules.could_hit`) from it, so neither can fall behind; the README's rule table is tested against
:mod:`patchguard.rulebook`, which holds each rule's id, severity and rationale. Adding a family member is one
line here. Names are qualified as imports resolve them (``import numpy as np`` → ``numpy.save``), private
real paths behind public aliases included (``torch.serialization.save`` for ``torch.save``).

Matchers that look at arguments or receivers (``open(..., "w")``, ``x.to("cpu")``, a logger at DEBUG, a
native library loaded from a path: :data:`NATIVE_LOADERS`) are in :mod:`.judge`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BOUND_WRITERS", "FAMILIES", "IN_MEMORY", "NATIVE_LOADERS", "Family"]

BOUND_WRITERS: dict[str, tuple[str, frozenset[str]]] = {
    name: ("tensor-dump", frozenset({"dump"}))
    for name in ("pickle.Pickler", "_pickle.Pickler", "cloudpickle.Pickler", "dill.Pickler")
}
"""Writer objects whose *use* writes: ``p = pickle.Pickler(fh); p.dump(x)`` dumps at ``p.dump`` — unless the
writer was given an in-memory buffer (:data:`IN_MEMORY`)."""

IN_MEMORY = frozenset({"io.BytesIO", "io.StringIO", "_io.BytesIO", "_io.StringIO"})

NATIVE_LOADERS = frozenset(
    {"ctypes.CDLL", "ctypes.PyDLL", "ctypes.WinDLL", "ctypes.cdll.LoadLibrary", "ctypes.pydll.LoadLibrary"}
)
"""Loaders of native code: ``dynamic-exec`` when given a path (``/tmp/libhook.so``), not a system library by
its name (``libcuda.so.1``, ``None``) — frameworks load those all the time."""


@dataclass(frozen=True, slots=True)
class Family:
    """What one rule recognises in a call."""

    rule: str
    effect: str  # what the code does, in a word or two (writes, network, loads code, ...)
    calls: tuple[str, ...] = ()  # qualified names
    modules: tuple[str, ...] = ()  # every callable of these modules and their submodules
    prefixes: tuple[str, ...] = ()  # every name starting so (``os.exec`` → ``os.execv``, ``os.execlp``)
    module_methods: tuple[tuple[str, frozenset[str]], ...] = ()  # (module, methods of it or its objects)
    methods: tuple[str, ...] = ()  # method names matched on any receiver (its type is unknown)


_NETWORK_VERBS = frozenset(
    {"get", "post", "put", "delete", "patch", "request", "head", "Client", "Session", "AsyncClient"}
    | {"ClientSession", "urlopen", "stream", "send"}
)

FAMILIES: tuple[Family, ...] = (
    Family(
        "tensor-dump",
        "writes tensors or objects",
        calls=(
            "torch.save",
            "torch.serialization.save",
            "torch.serialization._save",
            "torch.jit.save",
            "torch.jit._serialization.save",
            "torch.distributed.checkpoint.save",
            "torch.distributed.checkpoint.save_state_dict",
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
            "json.dump",
            "yaml.dump",
            "yaml.safe_dump",
            "h5py.File",
            "zarr.save",
            "scipy.io.savemat",
            "pandas.DataFrame.to_pickle",
            "safetensors.torch.save_file",
            "safetensors.torch.save_model",
            "safetensors.numpy.save_file",
            "wandb.log",
            "wandb.save",
            "mlflow.log_artifact",
            "mlflow.log_dict",
        ),
        methods=("tofile", "add_histogram", "add_tensor", "add_embedding"),
    ),
    Family(
        "file-write",
        "writes a file",
        calls=("os.write", "os.writev", "os.pwrite", "os.pwritev", "shutil.copyfileobj", "os.sendfile"),
        methods=("write_text", "write_bytes"),
    ),
    Family(
        "debugger",
        "stops for a debugger",
        calls=(
            "breakpoint",
            "builtins.breakpoint",
            "code.interact",
            "code.InteractiveConsole",
            "IPython.embed",
            "IPython.start_ipython",
            "IPython.terminal.embed.embed",
            "IPython.terminal.embed.InteractiveShellEmbed",
            "celery.contrib.rdb.set_trace",
            "torch.distributed.breakpoint",
            "faulthandler.dump_traceback_later",
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
    Family(
        "process-exit",
        "ends or signals the process",
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
        ),
    ),
    Family(
        "subprocess",
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
        modules=("subprocess", "sh", "plumbum", "pexpect"),
        prefixes=("os.exec", "os.spawn", "os.posix_spawn"),
    ),
    Family(
        "network",
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
        ),
        module_methods=(
            ("requests", _NETWORK_VERBS),
            ("httpx", _NETWORK_VERBS),
            ("aiohttp", _NETWORK_VERBS),
            ("urllib3", _NETWORK_VERBS | {"PoolManager"}),
        ),
    ),
    Family(
        "dynamic-exec",
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
        ),
    ),
    Family(
        "env-mutation",
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
    Family(
        "global-switch",
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
            "torch.cuda.set_sync_debug_mode",
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
            "gc.set_debug",
            "faulthandler.enable",
            "tracemalloc.start",
            "warnings.simplefilter",
            "warnings.filterwarnings",
            "numpy.seterr",
            "numpy.set_printoptions",
            "torch.set_printoptions",
            "logging.basicConfig",
            "logging.disable",
        ),
    ),
    Family(
        "print",
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
        ),
    ),
    Family(
        "sleep",
        "waits",
        calls=(
            "time.sleep",
            "asyncio.sleep",
            "signal.pause",
            "trio.sleep",
            "gevent.sleep",
            "threading.Event.wait",
            "threading.Condition.wait",
            "threading.Barrier.wait",
        ),
    ),
    Family(
        "device-sync",
        "waits for the device",
        calls=(
            "torch.cuda.synchronize",
            "torch.cuda.current_stream.synchronize",
            "torch.cuda.empty_cache",
            "torch.cuda.ipc_collect",
            "torch.cuda.memory_summary",
            "torch.equal",
            "torch.distributed.barrier",
            "torch.xpu.synchronize",
            "torch.mps.synchronize",
        ),
        methods=("cpu", "item", "tolist", "numpy", "synchronize", "wait_event", "wait_stream"),
    ),
    Family("monkeypatch", "changes another module", calls=("setattr",)),
)
