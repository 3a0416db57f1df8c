"""The former path of :mod:`patchguard.deploy.processes.running`: the names it had, handed on from there."""

from .processes.running import RUNNING_SCHEMA, Process, Running, Verdict, running
from .processes.running import Habit as Habit
from .processes.running import bytecode_habits as bytecode_habits

__all__ = ["RUNNING_SCHEMA", "Process", "Running", "Verdict", "running"]
