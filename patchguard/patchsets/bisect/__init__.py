"""Which change breaks it: ``bisect``, by job — the changes cut into files, hunks or sets and the bytes of
every file for a subset of them (:mod:`.units`), the search for the culprits, pure (:mod:`.search`), and the
run: trials as transactions inside one ``txn.session`` (:mod:`.run`)."""

from .run import BISECT_SCHEMA, BisectError, BisectResult, By, Test, Trial, run_bisect

__all__ = ["BISECT_SCHEMA", "BisectError", "BisectResult", "By", "Test", "Trial", "run_bisect"]
