"""Integrity: which installed files still match the RECORD of the wheel they came from.

RECORD parsing (:mod:`.records`), the verifier and its helper processes (:mod:`.verifier`,
:mod:`.hashing`), the stat cache (:mod:`.cache`), files no RECORD owns and startup hooks (:mod:`.unowned`),
and the inventory a scan produces (:mod:`.inventory`). Imports only what lies below it (environment,
model, file helpers); it never judges code nor looks for a wheel.
"""
