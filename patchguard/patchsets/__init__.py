"""Named patch sets (``patches/<name>/``): the model and loading (:mod:`.model`), the hunk planner
(:mod:`.planner`), ``state.json`` (:mod:`patchguard.state`), apply and revert (:mod:`.ops`), where sets stand
(:mod:`.status`), capture (:mod:`.capture`) and attribution of findings to sets (:mod:`.attribution`)."""
