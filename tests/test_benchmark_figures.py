"""The benchmark figures in the documents are the ones the benchmarks kept (tools/benchmark_figures.py).

No timing is asserted: these tests check that every table of ``docs/benchmarks.md`` and the
README's headline paragraph are what ``python -m chat_autoparser.tools.benchmark_figures`` writes from
``benchmarks/results/*.json``, that each result names the committed code it measured, and that
an edit by hand is caught.
"""

from __future__ import annotations

import doctest
import json
import re

import pytest

import chat_autoparser.tools.benchmark_figures as bf


def test_doctests() -> None:
    assert doctest.testmod(bf).failed == 0


def test_every_block_has_its_result_and_says_it() -> None:
    """Each ``bench:NAME`` block in the documents is written from a kept result, and agrees with it."""
    results = bf.load_results()
    content = bf.blocks(results)
    for path in (bf.DOC, bf.README):
        text = path.read_text(encoding="utf-8")
        names = re.findall(r"<!-- bench:([\w-]+) -->", text)
        assert names, f"{path.name} has no benchmark block"
        filled, missing = bf.fill(text, content)
        assert not missing, f"{path.name}: no saved result for {missing}"
        assert filled == text, f"{path.name} differs from benchmarks/results: run python -m chat_autoparser.tools.benchmark_figures"
    assert bf.main(["--check"]) == 0


def test_results_name_committed_code() -> None:
    """A kept result was measured on a commit, with no uncommitted change, by the command it names."""
    results = bf.load_results()
    assert set(bf.WRITERS) <= set(results), f"no kept result for {sorted(set(bf.WRITERS) - set(results))}"
    for name, saved in results.items():
        assert re.fullmatch(r"[0-9a-f]{7,40}", saved["commit"]), f"{name}: measured on {saved['commit']!r}"
        assert saved["command"].startswith(f"python benchmarks/{name}.py"), saved["command"]
        assert saved["benchmark"] == name and saved["machine"]["cpus"]


@pytest.mark.parametrize("name", sorted(bf.WRITERS))
def test_a_changed_figure_is_caught(name: str) -> None:
    """A figure edited by hand in a block no longer equals what the results write."""
    results = bf.load_results()
    text = bf.DOC.read_text(encoding="utf-8")
    content = bf.blocks(results)
    block = content[name]
    digit = re.search(r"\d", block)
    assert digit, f"{name}'s block holds no figure"
    edited = block[:digit.start()] + str((int(digit.group()) + 1) % 10) + block[digit.end():]
    tampered = text.replace(block, edited, 1)
    assert tampered != text, f"{name}'s block is not in docs/benchmarks.md"
    assert bf.fill(tampered, content)[0] == text


def test_missing_result_is_reported(tmp_path) -> None:
    """A block whose benchmark kept nothing is reported, not left silently as it was."""
    (tmp_path / "render_parity.json").write_text(json.dumps(bf.load_results()["render_parity"]))
    content = bf.blocks(bf.load_results(tmp_path))
    _, missing = bf.fill(bf.DOC.read_text(encoding="utf-8"), content)
    assert set(missing) == {"analysis_speed", "parse_speed", "parse_instructions"}
