"""Where the assistant's turn starts in a render (``analyzer.turns.assistant_region``)."""

from __future__ import annotations

from chat_autoparser.analyzer.turns import assistant_region

USER = "Userq7needle"


def test_the_generation_prompt_places_the_turn():
    prompt = f"<|im_start|>user\n{USER}<|im_end|>\n"
    rendered = prompt + "<|im_start|>assistant\n<tool_call>X</tool_call><|im_end|>\n"
    start, header = assistant_region(rendered, prompt, "<|im_start|>assistant\n", anchor=USER, limit=len(rendered))
    assert rendered[start + header:].startswith("<tool_call>")


def test_a_prefix_of_the_generation_prompt_ends_at_a_token():
    """A turn written with no header: ``<|im`` of the generation prompt is not ``<|im_end|>``;
    the turn starts after what the prompt itself writes to close the user's turn."""
    prompt = f"<|im_start|>user\n{USER}<|im_end|>"
    rendered = prompt + "<tool_call>X</tool_call>"
    start, header = assistant_region(rendered, prompt, "<|im_start|>assistant\n", anchor=USER, limit=len(rendered))
    assert rendered[start + header:] == "<tool_call>X</tool_call>"


def test_with_no_generation_prompt_the_user_turns_closer_is_not_the_assistants():
    """A template that writes the system prompt into the last user message only (so the common
    prefix with the bare prompt ends early) and no generation prompt: the turn starts after
    ``[/INST]``, which closes the user's turn."""
    nogen = f"[INST] Be brief.\n\n{USER}[/INST]"
    rendered = f"[INST] {USER}[/INST][TOOL_CALLS] [X]</s>"
    start, header = assistant_region(rendered, nogen, "", anchor=USER, limit=len(rendered))
    assert rendered[start + header:].startswith("[TOOL_CALLS]")
