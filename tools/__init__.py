"""The command-line tools: ``debug-template-parser``, ``template-report``, ``fetch-corpus``.

In a checkout they are the ``tools`` folder; installed, the package is ``autoparser_tools``
(a top-level ``tools`` would collide with other projects), and ``templates/`` ships inside it.
Modules here import each other relatively, so both names work.
"""

from __future__ import annotations

from pathlib import Path


def shipped(name: str) -> Path:
    """A file of the repository's ``templates/`` folder (the pinned corpus manifest, the
    README's templates), found inside the installed package or beside it in a checkout.

    Example::

        >>> shipped("corpus-manifest.tsv").is_file()
        True
    """
    here = Path(__file__).resolve().parent
    installed, checkout = here / "templates" / name, here.parent / "templates" / name
    return installed if installed.is_file() else checkout
