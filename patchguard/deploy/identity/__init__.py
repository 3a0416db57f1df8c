"""An environment's identity and fleets: environment locks (:mod:`.lockfile`), a host's document read into
a fingerprint (:mod:`.hostdocs`), hosts grouped by fingerprint and compared with the reference
(:mod:`.fleet`)."""
