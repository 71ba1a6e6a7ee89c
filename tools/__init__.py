"""The command-line tools: ``debug-template-parser``, ``template-report``, ``fetch-corpus``.

They are ``chat_autoparser.tools``: the ``tools`` folder of the repository, installed inside
the one package, with ``templates/`` beside them (``chat_autoparser.templates``).
"""

from __future__ import annotations

from pathlib import Path


def shipped(name: str) -> Path:
    """A file of the repository's ``templates/`` folder (the pinned corpus manifest, the
    README's templates): beside this package, installed or in a checkout.

    Example::

        >>> shipped("corpus-manifest.tsv").is_file()
        True
    """
    return Path(__file__).resolve().parent.parent / "templates" / name
