"""Prefix-cache helpers above the parser: real tokenizers (:mod:`~chat_autoparser.generator.prefix.tokens`), the
conversation a template renders (:mod:`~chat_autoparser.generator.prefix.conversation`), and the append-only bridge
with per-token attribution (:mod:`~chat_autoparser.generator.prefix.bridge`)."""
