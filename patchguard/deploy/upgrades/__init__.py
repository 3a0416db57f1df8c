"""Upgrade day: what an upgrade does to the sets, planned before it (:mod:`.upgrade`), and the way back to a
lock (:mod:`.rollback`)."""
