"""Deploy, a room per job: the pre-restart gate (:mod:`.check`: the policy and the gate), an environment's
identity and fleets (:mod:`.identity`: locks, other hosts' documents, the fleet's comparison), what runs
(:mod:`.processes`), upgrade day (:mod:`.upgrades`: the plan and the rollback); and the public face of
``bisect`` (:mod:`.bisecting`)."""
