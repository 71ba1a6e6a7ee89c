"""Which scenarios apply, from the template alone (``generator.verify.applicability``)."""

from __future__ import annotations

import pytest

from chat_autoparser.analyzer.load import from_string
from chat_autoparser.generator.verify.applicability import source_facts

TURNS = "{% for m in messages %}<|{{ m.role }}|>{BODY}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"


def facts(body: str):
    return source_facts(from_string(TURNS.replace("{BODY}", body), name="t.jinja"))


@pytest.mark.parametrize("body, calls, parallel", [
    ("{{ m.content }}{% for c in m.tool_calls or [] %}<call>{{ c.function.name }}</call>{% endfor %}", True, True),
    ("{{ m.content }}{% if m.tool_calls %}<call>{{ m.tool_calls[0].function.name }}</call>{% endif %}", True, False),
    # the result names its call, the call itself is never written
    ("{% if m.role == 'tool' %}{{ m.name }}: {% endif %}{{ m.content }}", False, False),
    # a result without a call before it raises, and the call is never written
    ("{% if m.role == 'tool' and loop.index0 < 2 %}{{ raise_exception('no call') }}{% endif %}"
     "{% if m.role == 'tool' %}{{ m.name }}{% endif %}{{ m.content }}", False, False),
])
def test_calls(body, calls, parallel):
    f = facts(body)
    assert (f.renders_calls, f.renders_parallel) == (calls, parallel)


@pytest.mark.parametrize("body, renders, writes", [
    ("{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}", True, True),
    ("{{ m.content }}", False, False),
    # two block kinds that both render like plain text: neither is reasoning
    ("{% if m.content is string %}{{ m.content }}{% else %}{% for b in m.content %}"
     "{% if b.type == 'text' %}{{ b.text }}{% elif b.type == 'output_text' %}{{ b.text }}{% endif %}"
     "{% endfor %}{% endif %}", False, False),
    # a block kind that renders apart from the answer carries reasoning
    ("{% if m.content is string %}{{ m.content }}{% else %}{% for b in m.content %}"
     "{% if b.type == 'text' %}{{ b.text }}{% elif b.type == 'note' %}[N]{{ b.note }}[/N]{% endif %}"
     "{% endfor %}{% endif %}", True, True),
    # instructed only: a marker named for reasoning, nothing rendered
    ("{% if m.role == 'system' %}Think in <think></think> first. {% endif %}{{ m.content }}", False, True),
])
def test_reasoning(body, renders, writes):
    f = facts(body)
    assert (f.renders_reasoning, f.writes_reasoning) == (renders, writes)
