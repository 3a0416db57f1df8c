"""Deploy, a room per job: the pre-restart gate (:mod:`.check`: the policy and the gate), an environment's
identity and fleets (:mod:`.identity`: locks, other hosts' documents, the fleet's comparison), what runs
(:mod:`.processes`), upgrade day (:mod:`.upgrades`: the plan and the rollback); and the public face of
``bisect`` (:mod:`.bisecting`). The modules ``policy``, ``gate``, ``lockfile``, ``hostdocs``, ``fleet``,
``running``, ``upgrade`` and ``rollback`` here are the former import paths: each hands on the names its
room's module had."""
