"""Call ids (generator/call_ids.py): unique per request, stable for the same request, in the shape
the template accepts; over the corpus, a five-turn tool conversation built from our parses
renders every next turn wherever the template renders that conversation at all."""

from __future__ import annotations

import json

import pytest

from chat_autoparser import ChatTemplate
from chat_autoparser.analyzer.caps import tool_forms
from chat_autoparser.errors import RenderError
from chat_autoparser.generator.assemble import default_call_id
from chat_autoparser.generator.call_ids import SHAPES, call_ids, learn_id_shape

MISTRAL_CHECK = """{%- for m in messages %}{%- if m.role == 'assistant' and m.tool_calls %}{%- for c in m.tool_calls %}
{%- if c.id is not string or c.id|length != 9 %}{{ raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{% endif %}
[TOOL_CALLS]{{ c.function.name }}{% endfor %}{%- elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.tool_call_id }}{{ m.content }}[/TOOL_RESULTS]
{%- else %}[INST]{{ m.content }}[/INST]{% endif %}{% endfor %}"""


def test_default_ids_unchanged_without_basis():
    assert call_ids() is default_call_id
    assert call_ids("", "call")(0, "f", "x") == default_call_id(0, "f", "x")


@pytest.mark.parametrize("shape", SHAPES)
def test_ids_differ_by_basis_and_repeat_for_the_same(shape):
    a, b = call_ids("turn 1", shape), call_ids("turn 2", shape)
    assert a(0, "f", "") == call_ids("turn 1", shape)(0, "f", "")
    assert a(0, "f", "") != b(0, "f", "")
    assert len({a(i, n, "") for i in (0, 1) for n in ("f", "g")}) == 4
    assert a(0, "f", "text before") == a(0, "f", "")  # one-shot and streamed parsers see different text


def test_unknown_shape():
    with pytest.raises(ValueError):
        call_ids("x", "uuid")


def test_learned_shape():
    ct = ChatTemplate.from_string(MISTRAL_CHECK, name="checks-ids.jinja")
    assert learn_id_shape(lambda m: ct.render(m, add_generation_prompt=False)) == "alnum9"
    plain = ChatTemplate.from_pretrained("templates/chatml-think.jinja")
    assert learn_id_shape(lambda m: plain.render(m, add_generation_prompt=False)) == "call"

    def refuses(_):
        raise RenderError("no")
    assert learn_id_shape(refuses) == "call"


def test_parser_ids_per_prompt():
    ct = ChatTemplate.from_pretrained("templates/chatml-think.jinja")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    out = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    one = ct.parser(tools=tools, prompt="turn one").parser.parse(out)["tool_calls"][0]["id"]
    again = ct.parser(tools=tools, prompt="turn one").parser.parse(out)["tool_calls"][0]["id"]
    two = ct.parser(tools=tools, prompt="turn two").parser.parse(out)["tool_calls"][0]["id"]
    assert one == again != two


def _conversation(ct: ChatTemplate, tools, output: str, ids_of=None, turns: int = 5):
    """Five turns: render the prompt, parse ``output`` after it (ids from ``ids_of(turn, i)`` when
    given, else ours), append the call and its result. The ids, or the RenderError met."""
    as_string = tool_forms(ct.caps).args_as_string
    conv = [{"role": "user", "content": "What is the weather in Paris?"}]
    ids = []
    for turn in range(turns):
        prompt = ct.render(conv, tools)
        message = ct.parser(tools=tools, prompt=prompt).parser.parse(output)
        calls = message.get("tool_calls") or []
        if not calls:
            return None
        for i, c in enumerate(calls):
            if ids_of is not None:
                c["id"] = ids_of(turn, i)
            if not as_string:
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        ids += [c["id"] for c in calls]
        conv.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
        conv += [{"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"], "content": "sunny"}
                 for c in calls]
    ct.render(conv, tools)
    return ids


def test_corpus_five_turn_conversations(corpus_entry, fixed_points):
    from chat_autoparser.analyzer import load_template
    from chat_autoparser.generator.verify.fixed_point import RT_TOOLS
    fp = fixed_points(corpus_entry.path).get("tool_call")
    if fp is None or not fp.ok or fp.skipped or not fp.with_tools:
        pytest.skip("no held tool-call fixed point (template-report says why)")
    ct = ChatTemplate(load_template(corpus_entry.path))
    tools = list(RT_TOOLS)
    try:  # the control: ids every template accepts (nine alphanumerics, distinct)
        control = _conversation(ct, tools, fp.generated, ids_of=lambda t, i: f"rt{t:03d}c{i:03d}")
    except RenderError as e:
        pytest.skip(f"the template refuses this conversation with any ids: {e}")
    assert control is not None, "the call is not read after a later turn's prompt"
    ids = _conversation(ct, tools, fp.generated)
    ours = [i for i in ids if i not in fp.generated]  # (an id the model writes is its own: kept)
    assert len(ours) == len(set(ours)), f"ids repeat: {ids}"


@pytest.mark.parametrize("name,output", [
    ("extra/mistralai-Mistral-7B-Instruct-v0.3.jinja", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("llama.cpp/mistralai-Mistral-Nemo-Instruct-2407.jinja", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ("llama.cpp/Mistral-Small-3.2-24B-Instruct-2506.jinja", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'),
])
def test_templates_that_check_ids(corpus_root, name, output):
    """A model that writes no id: the default ids (call_ + hex) make the next turn raise; ids in
    the learned shape render five turns, none repeated."""
    from chat_autoparser.generator.verify.fixed_point import RT_TOOLS
    ct = ChatTemplate.from_pretrained(corpus_root / name)
    assert ct.id_shape == "alnum9"
    parser = ct.parser
    ct.parser = lambda *a, **k: parser(*a, id_factory=default_call_id, **k)  # what 0.1.0 did
    with pytest.raises(RenderError, match="Tool call IDs"):
        _conversation(ct, list(RT_TOOLS), output)
    ct.parser = parser
    ids = _conversation(ct, list(RT_TOOLS), output)
    assert len(ids) == len(set(ids)) == 5 and all(len(i) == 9 and i.isalnum() for i in ids)
