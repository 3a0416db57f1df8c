"""Formatters: finished values in, text out. No IO, nothing but :mod:`patchguard.model` (and the rule table
and diff values) below them."""
