"""Where patchguard keeps its own state inside an environment: ``<site-packages>/.patchguard``.

A module of its own, so that a scan can ask whether a crash left a transaction unfinished without importing
the transaction machinery (:mod:`patchguard.txn`) on every run.
"""

from __future__ import annotations

import os

STATE_DIR = ".patchguard"
JOURNAL = "journal.json"


def journal_path(site_dir: str) -> str:
    """The journal an unfinished transaction leaves in ``site_dir``."""
    return os.path.join(site_dir, STATE_DIR, JOURNAL)
