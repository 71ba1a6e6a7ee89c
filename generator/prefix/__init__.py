"""Prefix-cache helpers above the parser: real tokenizers (:mod:`~generator.prefix.tokens`), the
conversation a template renders (:mod:`~generator.prefix.conversation`), and the append-only bridge
with per-token attribution (:mod:`~generator.prefix.bridge`)."""
