"""Loader tests: every place a model ships its chat template, and every way that can go wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

from chat_autoparser.errors import ChatAutoparserError, TemplateError
from chat_autoparser.analyzer.load import (MAX_TEMPLATE_BYTES, STAND_IN_TOKENS, LoadedTemplate, from_string, json_depth,
                           load_template)

DEFAULT_SRC = "{% for m in messages %}{{ m.content }}{% endfor %}"
TOOL_SRC = "{{ tools | tojson }}{% for m in messages %}{{ m.content }}{% endfor %}"
RAG_SRC = "{{ documents | tojson }}"


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def added_token(content: str) -> dict[str, Any]:
    """A special token as transformers serialises it in tokenizer_config.json."""
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False, "special": True}


def assert_names_file(err: TemplateError, path: Path | str) -> None:
    assert isinstance(err, TemplateError)
    assert isinstance(err, ChatAutoparserError)
    assert str(path) in str(err)
    assert err.template == str(path)


# --------------------------------------------------------------------------- .jinja

def test_jinja_file(tmp_path: Path) -> None:
    f = tmp_path / "chat.jinja"
    f.write_text(DEFAULT_SRC, encoding="utf-8")
    t = load_template(f)
    assert isinstance(t, LoadedTemplate)
    assert t.variants == {"default": DEFAULT_SRC}
    assert t.source == DEFAULT_SRC
    assert t.source_for(tools=True) == DEFAULT_SRC
    assert t.name == "chat.jinja"
    assert t.path == str(f)
    # No tokenizer files next to it: <s>/</s> stand in, and say so.
    assert t.tokens_are_stand_ins
    assert t.bos_token == "<s>" and t.eos_token == "</s>"
    assert dict(t.special_tokens) == STAND_IN_TOKENS


def test_jinja_file_accepts_str_path(tmp_path: Path) -> None:
    f = tmp_path / "chat.jinja"
    f.write_text(DEFAULT_SRC, encoding="utf-8")
    assert load_template(str(f)).source == DEFAULT_SRC


def test_jinja_file_keeps_bytes_exactly(tmp_path: Path) -> None:
    src = "{{ bos_token }}\r\n  <｜User｜>{{ messages[0].content }}\n\n"
    f = tmp_path / "t.jinja"
    f.write_bytes(src.encode("utf-8"))
    assert load_template(f).source == src


def test_bundled_template_loads() -> None:
    root = Path(__file__).resolve().parent.parent
    t = load_template(root / "templates" / "chatml-think.jinja")
    assert t.name == "chatml-think.jinja"
    assert "messages" in t.source


def test_special_tokens_override(tmp_path: Path) -> None:
    f = tmp_path / "chat.jinja"
    f.write_text(DEFAULT_SRC, encoding="utf-8")
    t = load_template(f, special_tokens={"bos_token": "<|begin|>", "eos_token": "<|end|>"})
    assert t.bos_token == "<|begin|>" and t.eos_token == "<|end|>"
    assert not t.tokens_are_stand_ins


def test_from_string() -> None:
    t = from_string("x", name="mine")
    assert t.name == "mine" and t.source == "x"
    assert t.tokens_are_stand_ins and t.bos_token == "<s>"
    t2 = from_string("x", special_tokens={"bos_token": "[BOS]"})
    assert not t2.tokens_are_stand_ins
    assert t2.bos_token == "[BOS]" and t2.eos_token is None
    with pytest.raises(TemplateError):
        from_string(b"x")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- tokenizer_config.json

def test_tokenizer_config_string_template(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": DEFAULT_SRC, "bos_token": "<s>", "eos_token": "<|im_end|>",
                    "pad_token": None, "model_max_length": 4096})
    t = load_template(f)
    assert t.variants == {"default": DEFAULT_SRC}
    assert t.bos_token == "<s>"
    assert t.eos_token == "<|im_end|>"
    assert "pad_token" not in t.special_tokens  # None is not a token
    assert not t.tokens_are_stand_ins
    assert t.name == "tokenizer_config.json"
    assert t.path == str(f)


def test_tokenizer_config_added_token_dicts(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": DEFAULT_SRC,
                    "bos_token": added_token("<｜begin▁of▁sentence｜>"),
                    "eos_token": added_token("<｜end▁of▁sentence｜>"),
                    "unk_token": added_token("<unk>"),
                    "additional_special_tokens": ["<tool>", added_token("<think>")]})
    t = load_template(f)
    assert t.bos_token == "<｜begin▁of▁sentence｜>"
    assert t.eos_token == "<｜end▁of▁sentence｜>"
    assert t.special_tokens["unk_token"] == "<unk>"
    assert t.special_tokens["additional_special_tokens"] == ["<tool>", "<think>"]


def test_tokenizer_config_named_list(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": [{"name": "default", "template": DEFAULT_SRC},
                                      {"name": "tool_use", "template": TOOL_SRC},
                                      {"name": "rag", "template": RAG_SRC}],
                    "bos_token": "<s>", "eos_token": "</s>"})
    t = load_template(f)
    assert set(t.variants) == {"default", "tool_use", "rag"}
    assert t.selected is None
    # As transformers: 'default' without tools, 'tool_use' when tools are given.
    assert t.source == DEFAULT_SRC
    assert t.source_for(tools=False) == DEFAULT_SRC
    assert t.source_for(tools=True) == TOOL_SRC


def test_tokenizer_config_named_list_user_choice(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": [{"name": "default", "template": DEFAULT_SRC},
                                      {"name": "tool_use", "template": TOOL_SRC},
                                      {"name": "rag", "template": RAG_SRC}]})
    t = load_template(f, template_name="rag")
    assert t.selected == "rag"
    # An explicit choice wins whether or not tools are given.
    assert t.source_for(tools=False) == RAG_SRC
    assert t.source_for(tools=True) == RAG_SRC
    assert load_template(f, template_name="tool_use").source == TOOL_SRC


def test_tokenizer_config_unknown_template_name(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": [{"name": "default", "template": DEFAULT_SRC},
                                      {"name": "tool_use", "template": TOOL_SRC}]})
    with pytest.raises(TemplateError) as ei:
        load_template(f, template_name="nope")
    assert_names_file(ei.value, f)
    assert "nope" in str(ei.value)
    assert "default" in str(ei.value) and "tool_use" in str(ei.value)  # lists what exists


def test_named_list_without_default(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": [{"name": "tool_use", "template": TOOL_SRC},
                                      {"name": "rag", "template": RAG_SRC}]})
    t = load_template(f)
    assert t.source_for(tools=True) == TOOL_SRC
    with pytest.raises(TemplateError) as ei:
        t.source_for(tools=False)
    assert "default" in str(ei.value)
    # A single named template is used whatever its name.
    g = write_json(tmp_path / "one.json", {"chat_template": [{"name": "only", "template": RAG_SRC}]})
    assert load_template(g).source == RAG_SRC


def test_tokenizer_config_tool_use_falls_back_to_default(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": [{"name": "default", "template": DEFAULT_SRC},
                                      {"name": "rag", "template": RAG_SRC}]})
    assert load_template(f).source_for(tools=True) == DEFAULT_SRC


def test_tokenizer_config_bad_list_entry(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json",
                   {"chat_template": [{"name": "default", "template": DEFAULT_SRC}, {"name": "x"}]})
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert "chat_template[1]" in str(ei.value)


@pytest.mark.parametrize("value", [None, "", [], 42])
def test_tokenizer_config_unusable_template_value(tmp_path: Path, value: Any) -> None:
    f = write_json(tmp_path / "tokenizer_config.json", {"chat_template": value, "bos_token": "<s>"})
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


def test_tokenizer_config_without_template(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json", {"bos_token": "<s>", "eos_token": "</s>"})
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert "chat_template" in ei.value.reason


def test_json_not_an_object(tmp_path: Path) -> None:
    f = write_json(tmp_path / "tokenizer_config.json", ["chat_template"])
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    f = tmp_path / "tokenizer_config.json"
    f.write_text('{\n  "chat_template": "x",\n  "bos_token": <s>\n}\n', encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert "invalid JSON" in str(ei.value)
    assert "line 3" in str(ei.value)


def test_tokenizer_config_sibling_special_tokens_map(tmp_path: Path) -> None:
    write_json(tmp_path / "special_tokens_map.json",
               {"bos_token": added_token("<|begin_of_text|>"), "eos_token": "<|eot_id|>"})
    f = write_json(tmp_path / "tokenizer_config.json", {"chat_template": DEFAULT_SRC})
    t = load_template(f)
    assert t.bos_token == "<|begin_of_text|>"
    assert t.eos_token == "<|eot_id|>"
    assert not t.tokens_are_stand_ins


# --------------------------------------------------------------------------- chat_template.json

def test_chat_template_json(tmp_path: Path) -> None:
    f = write_json(tmp_path / "chat_template.json", {"chat_template": DEFAULT_SRC})
    t = load_template(f)
    assert t.source == DEFAULT_SRC
    assert t.name == "chat_template.json"
    # A processor's chat_template.json carries no tokens: stand-ins, flagged.
    assert t.tokens_are_stand_ins and t.bos_token == "<s>"


def test_chat_template_json_with_named_templates(tmp_path: Path) -> None:
    f = write_json(tmp_path / "chat_template.json",
                   {"chat_template": [{"name": "default", "template": DEFAULT_SRC},
                                      {"name": "tool_use", "template": TOOL_SRC}]})
    t = load_template(f)
    assert t.source_for(tools=True) == TOOL_SRC and t.source == DEFAULT_SRC


def test_chat_template_json_as_name_mapping(tmp_path: Path) -> None:
    f = write_json(tmp_path / "chat_template.json",
                   {"chat_template": {"default": DEFAULT_SRC, "tool_use": TOOL_SRC}})
    t = load_template(f)
    assert dict(t.variants) == {"default": DEFAULT_SRC, "tool_use": TOOL_SRC}


# --------------------------------------------------------------------------- model directories

def test_dir_with_chat_template_jinja(tmp_path: Path) -> None:
    d = tmp_path / "My-Model-7B"
    d.mkdir()
    (d / "chat_template.jinja").write_text(DEFAULT_SRC, encoding="utf-8")
    write_json(d / "tokenizer_config.json", {"bos_token": added_token("<bos>"), "eos_token": "<eos>"})
    write_json(d / "special_tokens_map.json", {"pad_token": "<pad>", "unk_token": added_token("<unk>")})
    t = load_template(d)
    assert t.source == DEFAULT_SRC
    assert t.name == "My-Model-7B"
    assert t.path == str(d / "chat_template.jinja")
    assert t.bos_token == "<bos>" and t.eos_token == "<eos>"
    assert t.special_tokens["pad_token"] == "<pad>"
    assert t.special_tokens["unk_token"] == "<unk>"
    assert not t.tokens_are_stand_ins


def test_dir_chat_template_jinja_wins_over_others(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text("JINJA", encoding="utf-8")
    write_json(tmp_path / "chat_template.json", {"chat_template": "JSON"})
    write_json(tmp_path / "tokenizer_config.json", {"chat_template": "TOKCFG", "eos_token": "</s>"})
    assert load_template(tmp_path).source == "JINJA"


def test_dir_with_chat_template_json(tmp_path: Path) -> None:
    write_json(tmp_path / "chat_template.json", {"chat_template": DEFAULT_SRC})
    write_json(tmp_path / "tokenizer_config.json",
               {"chat_template": "OLD", "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>"})
    t = load_template(tmp_path)
    assert t.source == DEFAULT_SRC
    assert t.path == str(tmp_path / "chat_template.json")
    assert t.bos_token == "<|startoftext|>" and t.eos_token == "<|endoftext|>"


def test_dir_with_only_tokenizer_config(tmp_path: Path) -> None:
    write_json(tmp_path / "tokenizer_config.json",
               {"chat_template": [{"name": "default", "template": DEFAULT_SRC},
                                  {"name": "tool_use", "template": TOOL_SRC}],
                "bos_token": "<s>", "eos_token": added_token("</s>")})
    t = load_template(tmp_path)
    assert t.name == tmp_path.name
    assert t.path == str(tmp_path / "tokenizer_config.json")
    assert t.source == DEFAULT_SRC and t.source_for(tools=True) == TOOL_SRC
    assert t.eos_token == "</s>"
    assert load_template(tmp_path, template_name="tool_use").source == TOOL_SRC


def test_dir_skips_tokenizer_config_without_template(tmp_path: Path) -> None:
    write_json(tmp_path / "tokenizer_config.json", {"eos_token": "</s>"})
    with pytest.raises(TemplateError) as ei:
        load_template(tmp_path)
    assert_names_file(ei.value, tmp_path)


def test_empty_dir(tmp_path: Path) -> None:
    with pytest.raises(TemplateError) as ei:
        load_template(tmp_path)
    assert_names_file(ei.value, tmp_path)


def test_dir_with_invalid_tokenizer_config(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "x",,}', encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(tmp_path)
    assert str(tmp_path) in str(ei.value)
    assert "tokenizer_config.json" in str(ei.value)
    assert "line 1" in str(ei.value)


def test_dir_unknown_template_name(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text(DEFAULT_SRC, encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(tmp_path, template_name="tool_use")
    assert_names_file(ei.value, tmp_path)


# --------------------------------------------------------------------------- GGUF

gguf = pytest.importorskip("gguf")

VOCAB = ["<unk>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|im_end|>", "hello", "▁world"]


def write_gguf(path: Path, *, templates: str | Sequence[dict[str, str]] | None = None,
               extra_strings: dict[str, str] | None = None, vocab: Sequence[str] | None = None,
               bos: int | None = None, eos: int | None = None, unk: int | None = None) -> Path:
    """A vocab-only GGUF file (zero tensors), as gguf 0.19's writer wants to be driven."""
    w = gguf.GGUFWriter(str(path), "llama")
    if templates is not None:
        w.add_chat_template(templates)
    for key, value in (extra_strings or {}).items():
        w.add_string(key, value)
    if vocab is not None:
        w.add_tokenizer_model("llama")
        w.add_token_list(list(vocab))
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if unk is not None:
        w.add_unk_token_id(unk)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_default_and_named_templates(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "model.gguf",
                   templates=[{"name": "default", "template": DEFAULT_SRC},
                              {"name": "tool_use", "template": TOOL_SRC}],
                   vocab=VOCAB, bos=1, eos=2, unk=0)
    t = load_template(f)
    assert dict(t.variants) == {"default": DEFAULT_SRC, "tool_use": TOOL_SRC}
    assert t.source == DEFAULT_SRC
    assert t.source_for(tools=True) == TOOL_SRC
    assert t.bos_token == "<｜begin▁of▁sentence｜>"
    assert t.eos_token == "<｜end▁of▁sentence｜>"
    assert t.special_tokens["unk_token"] == "<unk>"
    assert not t.tokens_are_stand_ins
    assert t.name == "model.gguf" and t.path == str(f)
    assert load_template(f, template_name="tool_use").source == TOOL_SRC


def test_gguf_named_key_written_directly(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "m.gguf", templates=DEFAULT_SRC,
                   extra_strings={"tokenizer.chat_template.tool_use": TOOL_SRC,
                                  "tokenizer.chat_template.rag": RAG_SRC},
                   vocab=VOCAB, bos=1, eos=3)
    t = load_template(f)
    assert dict(t.variants) == {"default": DEFAULT_SRC, "tool_use": TOOL_SRC, "rag": RAG_SRC}
    assert t.eos_token == "<|im_end|>"
    assert load_template(f, template_name="rag").source == RAG_SRC
    with pytest.raises(TemplateError) as ei:
        load_template(f, template_name="nope")
    assert_names_file(ei.value, f)


def test_gguf_without_vocab_uses_stand_ins(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "m.gguf", templates=DEFAULT_SRC)
    t = load_template(f)
    assert t.source == DEFAULT_SRC
    assert t.tokens_are_stand_ins
    assert t.bos_token == "<s>" and t.eos_token == "</s>"


def test_gguf_token_id_out_of_range_is_ignored(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "m.gguf", templates=DEFAULT_SRC, vocab=VOCAB, bos=1, eos=999)
    t = load_template(f)
    assert t.bos_token == "<｜begin▁of▁sentence｜>"
    assert "eos_token" not in t.special_tokens
    assert not t.tokens_are_stand_ins


def test_gguf_without_chat_template(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "m.gguf", vocab=VOCAB, bos=1, eos=2)
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert "chat_template" in str(ei.value)


def test_gguf_template_over_size_limit(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "m.gguf", templates="x" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


@pytest.mark.parametrize("content", [b"", b"not a gguf file at all\n", b"GGUF", b"GGUF\x03\x00\x00\x00",
                                     b"GGML" + bytes(64)])
def test_not_gguf(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "broken.gguf"
    f.write_bytes(content)
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


def test_truncated_gguf(tmp_path: Path) -> None:
    good = write_gguf(tmp_path / "good.gguf", templates=DEFAULT_SRC, vocab=VOCAB, bos=1, eos=2)
    data = good.read_bytes()
    f = tmp_path / "cut.gguf"
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


# --------------------------------------------------------------------------- bad input

def test_missing_path(tmp_path: Path) -> None:
    f = tmp_path / "nope" / "chat_template.jinja"
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


@pytest.mark.parametrize("content", [b"", b"   \n\t\n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "empty.jinja"
    f.write_bytes(content)
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert "empty" in str(ei.value)


def test_empty_json_file(tmp_path: Path) -> None:
    f = tmp_path / "tokenizer_config.json"
    f.write_bytes(b"")
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


@pytest.mark.parametrize("name", ["model.bin.jinja", "tokenizer_config.json"])
def test_binary_file(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    f.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)


def test_non_utf8_file(tmp_path: Path) -> None:
    f = tmp_path / "latin1.jinja"
    f.write_bytes("{{ 'café' }}".encode("latin-1"))
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert "UTF-8" in str(ei.value)


@pytest.mark.parametrize("name", ["big.jinja", "tokenizer_config.json"])
def test_template_over_size_limit(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    if name.endswith(".json"):
        f.write_text(json.dumps({"chat_template": "x" * MAX_TEMPLATE_BYTES}), encoding="utf-8")
    else:
        f.write_text("x" * (MAX_TEMPLATE_BYTES + 1), encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    assert_names_file(ei.value, f)
    assert str(MAX_TEMPLATE_BYTES) in str(ei.value)


def test_template_at_size_limit_loads(tmp_path: Path) -> None:
    f = tmp_path / "edge.jinja"
    f.write_text("x" * MAX_TEMPLATE_BYTES, encoding="utf-8")
    assert len(load_template(f).source) == MAX_TEMPLATE_BYTES


def test_error_message_shape(tmp_path: Path) -> None:
    f = tmp_path / "missing.jinja"
    with pytest.raises(TemplateError) as ei:
        load_template(f)
    err = ei.value
    assert str(err).startswith(f"{f}: ")
    assert err.reason and err.reason in str(err)


# --------------------------------------------------------------------------- hostile inputs

REPO = Path(__file__).resolve().parents[1]

LOAD_CHILD = r"""
import json, sys
from chat_autoparser.analyzer import load_template
from chat_autoparser.errors import TemplateError
try:
    load_template(sys.argv[1]); print(json.dumps("ok"))
except TemplateError as e:
    print(json.dumps(f"TemplateError: {e}"))
"""


def load_in_child(path: Path) -> str:
    """Load in a child process with a memory cap and a time limit: the old loader read
    /dev/zero until memory ran out and blocked on a FIFO forever."""
    code = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n" + LOAD_CHILD
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, capture_output=True, text=True,
                              timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading {path} hung")
    assert proc.returncode == 0, proc.stderr[-500:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_template_linked_to_dev_zero(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").symlink_to("/dev/zero")
    (model / "tokenizer_config.json").write_text('{"chat_template": "{{ 1 }}"}', encoding="utf-8")
    direct = tmp_path / "t.jinja"
    direct.symlink_to("/dev/zero")
    assert load_in_child(direct).startswith("TemplateError") and "not a regular file" in load_in_child(direct)
    # the directory's template is not a file: the loader takes the next one it knows
    assert load_in_child(model) == "ok"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_template_that_is_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "t.jinja"
    os.mkfifo(fifo)
    assert "not a regular file (a FIFO)" in load_in_child(fifo)


def test_deeply_nested_tokenizer_config(tmp_path: Path) -> None:
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text('{"chat_template": "{{ 1 }}", "x": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(cfg)  # was a raw RecursionError
    assert "nests over" in str(ei.value)
    assert json_depth('{"a": "[[[[", "b": [[1], {"c": []}]}') == 4


def test_dir_with_additional_chat_templates(tmp_path: Path) -> None:
    """transformers saves named templates as additional_chat_templates/<name>.jinja beside
    chat_template.jinja, and renders ``tool_use`` when tools are given: so do we."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0, "a": 1}, unk_token="<unk>"))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                unk_token="<unk>")
    fast.chat_template = {"default": "{% for m in messages %}D:{{ m.content }}{% endfor %}",
                          "tool_use": "{% for m in messages %}T{{ tools|length }}:{{ m.content }}{% endfor %}"}
    fast.save_pretrained(tmp_path)
    assert (tmp_path / "additional_chat_templates" / "tool_use.jinja").is_file()
    loaded = load_template(tmp_path)
    assert set(loaded.variants) == {"default", "tool_use"}
    from chat_autoparser import ChatTemplate
    ct, theirs = ChatTemplate(loaded), transformers.AutoTokenizer.from_pretrained(tmp_path)
    messages = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    for t in (None, tools):
        assert ct.render(messages, t, add_generation_prompt=False) == \
            theirs.apply_chat_template(messages, tools=t, tokenize=False)


def test_too_many_additional_chat_templates(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    extra = tmp_path / "additional_chat_templates"
    extra.mkdir()
    for i in range(40):
        (extra / f"t{i}.jinja").write_text("x", encoding="utf-8")
    with pytest.raises(TemplateError, match="more than 32"):
        load_template(tmp_path)
