"""Where a chat template comes from: a path the loader reads (:func:`chat_autoparser.analyzer.load.load_template`),
a template's text, or a Hugging Face model id read through ``huggingface_hub`` (its cache, its
offline mode ``HF_HUB_OFFLINE=1``, its token and endpoint settings: we add none of our own).

Example::

    >>> t = load_pretrained("templates/chatml-think.jinja")
    >>> t.name
    'chatml-think.jinja'
    >>> load_pretrained("{{ messages[0].content }}").name
    '<string>'
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ..errors import TemplateError
from .load import LoadedTemplate, from_string, load_template

# the files a model repository keeps its chat template and special tokens in (what the loader reads)
HUB_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json", "special_tokens_map.json",
             "additional_chat_templates/*.jinja")
# ``owner/name`` as the hub spells repository ids
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_template_text(src: str) -> bool:
    """Whether ``src`` is a template's text rather than a place (Jinja delimiters or several lines)."""
    return "{{" in src or "{%" in src or "\n" in src


def load_pretrained(src: str | Path, *, revision: str | None = None, template_name: str | None = None,
                    special_tokens: Mapping[str, Any] | None = None) -> LoadedTemplate:
    """The template at ``src``: a file or model directory (see :mod:`chat_autoparser.analyzer.load`), a template's
    text, or a Hugging Face model id (``owner/name``, at ``revision``). Raises TemplateError."""
    if isinstance(src, str) and is_template_text(src):
        if revision is not None or template_name is not None:
            raise TemplateError("revision and template_name apply to a model, not to a template's text")
        return from_string(src, special_tokens=special_tokens)
    path = Path(src)
    if path.exists() or not isinstance(src, str) or not REPO_ID.fullmatch(src):
        if revision is not None:
            raise TemplateError("revision applies to a Hugging Face model id, not to a path", template=str(src))
        return load_template(path, template_name=template_name, special_tokens=special_tokens)
    return load_template(_snapshot(src, revision), template_name=template_name, special_tokens=special_tokens)


def _snapshot(repo_id: str, revision: str | None) -> Path:
    """The local snapshot directory holding ``repo_id``'s template files (downloaded unless the
    hub is offline; from the cache when it is)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError
    except ImportError:
        raise TemplateError("reading a Hugging Face model id needs huggingface_hub (pip install huggingface_hub)",
                            template=repo_id) from None
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=list(HUB_FILES)))
    except HFValidationError as e:
        raise TemplateError(f"not a Hugging Face model id: {e}", template=repo_id) from None
    except Exception as e:  # noqa: BLE001 - the hub raises many kinds (offline, missing, gated, network)
        raise TemplateError(f"no such file, and not found on the Hugging Face hub or in its cache "
                            f"({type(e).__name__}: {e})", template=repo_id) from None
