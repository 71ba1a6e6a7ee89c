"""Engine adapters: this project inside serving engines. One module per engine, one entry in
:data:`ADAPTERS` (and the engine's own plugin entry point in ``pyproject.toml``); each module
imports its engine, so only the engine loads it.

- ``vllm``: tool- and reasoning-parser plugin named ``autoparser`` (:mod:`chat_autoparser.integrations.vllm`).
"""

from __future__ import annotations

# engine -> (module, what it registers)
ADAPTERS: dict[str, tuple[str, str]] = {
    "vllm": ("chat_autoparser.integrations.vllm", "tool parser and reasoning parser 'autoparser'"),
}
