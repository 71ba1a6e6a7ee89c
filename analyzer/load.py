"""Load a chat template from the places models ship it.

Accepted inputs:

* a ``.jinja`` file (the template text itself);
* ``tokenizer_config.json``: ``chat_template`` as a string or as a list of
  ``{"name", "template"}`` entries; special tokens as strings or AddedToken dicts;
* ``chat_template.json`` (``{"chat_template": ...}``, as processors save it);
* a model directory holding ``chat_template.jinja`` (with the named templates of
  ``additional_chat_templates/*.jinja`` beside it, as transformers saves them), ``chat_template.json`` or
  ``tokenizer_config.json`` (special tokens are read from ``tokenizer_config.json``
  and ``special_tokens_map.json`` when present);
* a ``.gguf`` file: ``tokenizer.chat_template`` and ``tokenizer.chat_template.<name>``,
  with bos/eos taken from the vocabulary.

Example::

    >>> t = load_template("templates/chatml-think.jinja")
    >>> t.name
    'chatml-think.jinja'
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import TemplateError

# Keys of transformers' ``special_tokens_map`` (SPECIAL_TOKENS_ATTRIBUTES).
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                      "mask_token")
# Input limits: the size of a template or config file (read at most this far), and how deep
# its JSON may nest (configs nest 4 deep; Python's parser recurses once per level).
MAX_TEMPLATE_BYTES = 4 * 1024 * 1024
MAX_JSON_DEPTH = 64


@dataclass(frozen=True, slots=True)
class LoadedTemplate:
    """A chat template and the context transformers would render it with.

    ``variants`` holds every named template (``{"default": src}`` for a single one).
    ``selected`` is the name the user asked for, or ``None`` to choose as transformers
    does: ``tool_use`` when tools are given, else ``default``.
    """

    variants: Mapping[str, str]
    name: str
    path: str | None = None
    special_tokens: Mapping[str, Any] = field(default_factory=dict)
    selected: str | None = None
    tokens_are_stand_ins: bool = False

    @property
    def bos_token(self) -> str | None:
        return self.special_tokens.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    def source_for(self, *, tools: bool) -> str:
        """The template text transformers would pick for a call with or without tools."""
        if self.selected is not None:
            return self.variants[self.selected]
        if tools and "tool_use" in self.variants:
            return self.variants["tool_use"]
        if "default" in self.variants:
            return self.variants["default"]
        if len(self.variants) == 1:
            return next(iter(self.variants.values()))
        raise TemplateError(
            f"several chat templates ({', '.join(sorted(self.variants))}) and none named 'default'; "
            "choose one by name", template=self.name)

    @property
    def source(self) -> str:
        """The template used without tools (what most callers mean by 'the template')."""
        return self.source_for(tools=False)


STAND_IN_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


def from_string(source: str, *, name: str = "<string>", special_tokens: Mapping[str, Any] | None = None
                ) -> LoadedTemplate:
    """Wrap a template given as text. Without tokens, ``<s>``/``</s>`` stand in for bos/eos."""
    if not isinstance(source, str):
        raise TemplateError("template source must be a string", template=name)
    stand_in = special_tokens is None
    tokens = dict(STAND_IN_TOKENS if special_tokens is None else special_tokens)
    return LoadedTemplate(variants={"default": source}, name=name, special_tokens=tokens,
                          tokens_are_stand_ins=stand_in)


def load_template(path: str | Path, *, template_name: str | None = None,
                  special_tokens: Mapping[str, Any] | None = None) -> LoadedTemplate:
    """Load a template from a file or model directory; see the module docstring for formats.

    ``template_name`` picks one of several named templates; ``special_tokens`` overrides
    bos/eos and friends (needed for a bare ``.jinja``, where ``<s>``/``</s>`` stand in).
    """
    p = Path(path)
    display = str(path)
    if not p.exists():
        raise TemplateError("no such file or directory", template=display)
    if p.is_dir():
        loaded = _load_dir(p, display)
    elif p.suffix == ".gguf":
        loaded = _load_gguf(p, display)
    elif p.suffix == ".json":
        loaded = _load_json_file(p, display)
    else:
        loaded = _load_jinja(p, display)
    if special_tokens is not None:
        merged = {**loaded.special_tokens, **special_tokens}
        loaded = _replace(loaded, special_tokens=merged, tokens_are_stand_ins=False)
    if template_name is not None:
        if template_name not in loaded.variants:
            raise TemplateError(f"no chat template named {template_name!r} (have: "
                                f"{', '.join(sorted(loaded.variants))})", template=display)
        loaded = _replace(loaded, selected=template_name)
    return loaded


def _replace(t: LoadedTemplate, **changes: Any) -> LoadedTemplate:
    from dataclasses import replace
    return replace(t, **changes)


def read_regular_file(p: Path, display: str, limit: int = MAX_TEMPLATE_BYTES) -> bytes:
    """The bytes of ``p`` if it is a regular file (a symlink to one is fine) of at most
    ``limit`` bytes. The size is checked while reading: ``/dev/zero`` reports 0 and never
    ends, a FIFO blocks on open (hence ``O_NONBLOCK``).

    >>> read_regular_file(Path("/dev/zero"), "zero")
    Traceback (most recent call last):
    ...
    chat_autoparser.errors.TemplateError: zero: not a regular file (a character device)
    """
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise TemplateError(f"cannot read: {e.strerror or e}", template=display) from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise TemplateError(f"not a regular file ({_file_kind(mode)})", template=display)
            chunks, size = [], 0
            while size <= limit:
                chunk = f.read(min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as e:
            raise TemplateError(f"cannot read: {e.strerror or e}", template=display) from None
    if size > limit:
        raise TemplateError(f"file is over {limit} bytes; larger templates and configs are refused",
                            template=display)
    return b"".join(chunks)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def _read_text(p: Path, display: str) -> str:
    data = read_regular_file(p, display)
    if b"\x00" in data:
        raise TemplateError("not a text file (contains NUL bytes)", template=display)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TemplateError(f"not UTF-8 text (byte {e.start})", template=display) from None


def _load_jinja(p: Path, display: str) -> LoadedTemplate:
    text = _read_text(p, display)
    if not text.strip():
        raise TemplateError("the file is empty", template=display)
    # A chat_template.jinja inside a model directory gets that directory's tokens.
    tokens = _tokens_from_dir(p.parent)
    stand_in = not tokens
    return LoadedTemplate(variants={"default": text}, name=p.name, path=str(p),
                          special_tokens=tokens or dict(STAND_IN_TOKENS), tokens_are_stand_ins=stand_in)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKETS = re.compile(r"[\[{]+|[\]}]+")


def json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (strings skipped), found without
    parsing it.

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    """
    depth = deepest = 0
    for run in _JSON_BRACKETS.findall(_JSON_STRING.sub("", text)):
        depth += len(run) if run[0] in "[{" else -len(run)
        deepest = max(deepest, depth)
    return deepest


def parse_json(text: str, display: str) -> Any:
    """``json.loads(text)``, refused (TemplateError) when invalid or nested over ``MAX_JSON_DEPTH``."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise TemplateError(f"JSON nests over {MAX_JSON_DEPTH} levels deep", template=display)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TemplateError(f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})",
                            template=display) from None
    except RecursionError:  # below the depth limit, but the caller's stack was already deep
        raise TemplateError("JSON nests too deeply to parse", template=display) from None


def _parse_json(p: Path, display: str) -> Any:
    return parse_json(_read_text(p, display), display)


def _templates_from_value(value: Any, display: str) -> dict[str, str]:
    """``chat_template`` as a string, a list of {name, template}, or a dict name -> template."""
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, list):
        out: dict[str, str] = {}
        for i, entry in enumerate(value):
            if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
                    and isinstance(entry.get("template"), str)):
                raise TemplateError(f"chat_template[{i}] is not a {{name, template}} entry", template=display)
            out[entry["name"]] = entry["template"]
        if not out:
            raise TemplateError("chat_template is an empty list", template=display)
        return out
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    raise TemplateError(f"chat_template has an unsupported type ({type(value).__name__})", template=display)


def _token_text(value: Any) -> str | None:
    """Special tokens are strings or AddedToken dicts ({"content": ..., "__type": "AddedToken"})."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _special_tokens(config: Mapping[str, Any]) -> dict[str, Any]:
    tokens: dict[str, Any] = {}
    for key in SPECIAL_TOKEN_KEYS:
        text = _token_text(config.get(key))
        if text is not None:
            tokens[key] = text
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        texts = [t for t in (_token_text(v) for v in extra) if t is not None]
        if texts:
            tokens["additional_special_tokens"] = texts
    return tokens


def _tokens_from_dir(d: Path) -> dict[str, Any]:
    tokens: dict[str, Any] = {}
    for fname in ("special_tokens_map.json", "tokenizer_config.json"):
        f = d / fname
        if f.is_file():
            try:
                cfg = _parse_json(f, str(f))
            except TemplateError:  # as with invalid JSON: no tokens from it (stand-ins are noted)
                continue
            if isinstance(cfg, dict):
                tokens.update(_special_tokens(cfg))
    return tokens


def _load_json_file(p: Path, display: str) -> LoadedTemplate:
    cfg = _parse_json(p, display)
    if not isinstance(cfg, dict):
        raise TemplateError("expected a JSON object (tokenizer_config.json or chat_template.json)",
                            template=display)
    if "chat_template" not in cfg or cfg["chat_template"] in (None, "", []):
        raise TemplateError("no chat_template in this file", template=display)
    variants = _templates_from_value(cfg["chat_template"], display)
    tokens = {**_tokens_from_dir(p.parent), **_special_tokens(cfg)}
    stand_in = not tokens
    return LoadedTemplate(variants=variants, name=p.name, path=str(p),
                          special_tokens=tokens or dict(STAND_IN_TOKENS), tokens_are_stand_ins=stand_in)


def _load_dir(d: Path, display: str) -> LoadedTemplate:
    for fname in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
        f = d / fname
        if not f.is_file():
            continue
        if fname == "tokenizer_config.json":
            cfg = _parse_json(f, f"{display}/{fname}")
            if not isinstance(cfg, dict) or not cfg.get("chat_template"):
                continue
        loaded = _load_jinja(f, display) if fname.endswith(".jinja") else _load_json_file(f, display)
        extra = _additional_templates(d, display)
        if extra:  # named templates saved beside the default one (transformers' layout)
            loaded = _replace(loaded, variants={**extra, **loaded.variants})
        return _replace(loaded, name=d.name, path=str(f))
    raise TemplateError("no chat_template.jinja, chat_template.json or tokenizer_config.json with a "
                        "chat_template in this directory", template=display)


MAX_ADDITIONAL_TEMPLATES = 32


def _additional_templates(d: Path, display: str) -> dict[str, str]:
    """``additional_chat_templates/<name>.jinja``: the named templates transformers saves beside
    ``chat_template.jinja`` (``tool_use``, ``rag``, ...), each by its file's stem; at most
    :data:`MAX_ADDITIONAL_TEMPLATES`, each under the template size limit."""
    folder = d / "additional_chat_templates"
    if not folder.is_dir():
        return {}
    files = sorted(f for f in folder.iterdir() if f.suffix == ".jinja" and f.is_file())
    if len(files) > MAX_ADDITIONAL_TEMPLATES:
        raise TemplateError(f"more than {MAX_ADDITIONAL_TEMPLATES} additional chat templates", template=display)
    return {f.stem: _read_text(f, f"{display}/additional_chat_templates/{f.name}") for f in files}


def _load_gguf(p: Path, display: str) -> LoadedTemplate:
    try:
        mode = os.stat(p).st_mode
    except OSError as e:
        raise TemplateError(f"cannot read: {e.strerror or e}", template=display) from None
    if not stat.S_ISREG(mode):
        raise TemplateError(f"not a regular file ({_file_kind(mode)})", template=display)
    try:
        from gguf import GGUFReader
    except ImportError:  # pragma: no cover - gguf is a declared dependency
        raise TemplateError("reading .gguf needs the 'gguf' package", template=display) from None
    try:
        reader = GGUFReader(str(p), "r")
    except Exception as e:  # gguf raises ValueError/struct errors on bad files
        raise TemplateError(f"not a readable GGUF file ({e})", template=display) from None
    fields = reader.fields

    def scalar(key: str) -> Any:
        f = fields.get(key)
        if f is None:
            return None
        try:
            return f.contents()
        except Exception:
            return None

    variants: dict[str, str] = {}
    default = scalar("tokenizer.chat_template")
    if isinstance(default, str):
        variants["default"] = default
    prefix = "tokenizer.chat_template."
    for key in fields:
        if key.startswith(prefix):
            value = scalar(key)
            if isinstance(value, str):
                variants[key[len(prefix):]] = value
    if not variants:
        raise TemplateError("GGUF file has no tokenizer.chat_template", template=display)
    for vname, src in variants.items():  # the file is weights; the limit is on each template
        size = len(src.encode("utf-8"))
        if size > MAX_TEMPLATE_BYTES:
            raise TemplateError(f"chat template {vname!r} is {size} bytes; templates over "
                                f"{MAX_TEMPLATE_BYTES} bytes are refused", template=display)
    tokens: dict[str, Any] = {}
    vocab = fields.get("tokenizer.ggml.tokens")
    if vocab is not None:
        for key, meta in (("bos_token", "tokenizer.ggml.bos_token_id"),
                          ("eos_token", "tokenizer.ggml.eos_token_id"),
                          ("unk_token", "tokenizer.ggml.unknown_token_id"),
                          ("sep_token", "tokenizer.ggml.seperator_token_id"),
                          ("pad_token", "tokenizer.ggml.padding_token_id")):
            idx = scalar(meta)
            if isinstance(idx, int) and 0 <= idx < len(vocab.data):
                try:  # index one entry: materialising a 150k-token list costs ~0.2 s
                    tokens[key] = vocab.contents(idx)
                except Exception:
                    pass
    stand_in = "bos_token" not in tokens and "eos_token" not in tokens
    return LoadedTemplate(variants=variants, name=p.name, path=str(p),
                          special_tokens=tokens or dict(STAND_IN_TOKENS), tokens_are_stand_ins=stand_in)
