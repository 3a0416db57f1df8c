"""The pre-restart gate (``check``): the policy, found and read (:mod:`.policy`), and the gate that judges a
scan against it and a lock (:mod:`.gate`)."""
