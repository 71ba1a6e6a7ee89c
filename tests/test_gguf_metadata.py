"""GGUF metadata, read from the file mapped into memory: values as written, and a typed error
(never a raw one) for a file that is not GGUF, is cut short, nests too deep or names an unknown
type."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from chat_autoparser.errors import TokenizerError
from chat_autoparser.generator.prefix.tokens import gguf_metadata

STRING, ARRAY, UINT32, BOOL = 8, 9, 4, 7


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _gguf(fields: list[bytes]) -> bytes:
    return b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 0) + struct.pack("<Q", len(fields)) + b"".join(fields)


def _field(key: str, kind: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", kind) + payload


def _array(kind: int, items: list[bytes]) -> bytes:
    return struct.pack("<I", kind) + struct.pack("<Q", len(items)) + b"".join(items)


def test_values_as_written(tmp_path: Path) -> None:
    path = tmp_path / "v.gguf"
    path.write_bytes(_gguf([
        _field("general.architecture", STRING, _s("llama")),
        _field("tokenizer.ggml.tokens", ARRAY, _array(STRING, [_s("a"), _s("é")])),
        _field("n", UINT32, struct.pack("<I", 7)),
        _field("flag", BOOL, b"\x01"),
    ]))
    assert gguf_metadata(path) == {"general.architecture": "llama", "tokenizer.ggml.tokens": ["a", "é"], "n": 7,
                                   "flag": True}


def _nested(depth: int) -> bytes:
    inner = _array(UINT32, [struct.pack("<I", 1)])
    for _ in range(depth):
        inner = struct.pack("<I", ARRAY) + struct.pack("<Q", 1) + inner
    return inner


@pytest.mark.parametrize("name, data", [
    ("empty", b""),
    ("not GGUF", b"hello world, not a vocabulary"),
    ("cut short", _gguf([_field("k", STRING, _s("value"))])[:-3]),
    ("string past the end", _gguf([_s("k") + struct.pack("<I", STRING) + struct.pack("<Q", 1 << 40)])),
    ("unknown type", _gguf([_field("k", 99, b"")])),
    ("nested deep", _gguf([_field("k", ARRAY, _nested(20))])),
    ("count past the end", b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 0) + struct.pack("<Q", 1 << 60)),
])
def test_a_broken_file_is_a_typed_error(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / "broken.gguf"
    path.write_bytes(data)
    with pytest.raises(TokenizerError):
        gguf_metadata(path)
