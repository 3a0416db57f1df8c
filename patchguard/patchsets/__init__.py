"""Named patch sets (``patches/<name>/``). The sets themselves at this level: the model and loading
(:mod:`.model`), the hunk planner (:mod:`.planner`), apply and revert (:mod:`.ops`), where sets stand
(:mod:`.status`), capture (:mod:`.capture`) and attribution of findings to sets (:mod:`.attribution`);
``state.json`` is :mod:`patchguard.state`. Two families in sub-packages of their own, each importing the sets
and itself only: :mod:`.rebase` (carry a set to another release) and :mod:`.bisect`
(which change breaks it)."""
