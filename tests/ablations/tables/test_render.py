"""One renderer for the vocabulary tables: `bioablate vocab compare` prints exactly what `bioablate table`
writes for the same Table 1, in each format."""

from __future__ import annotations

import pytest

from ablations.cli import main

VOCABS = ["bert-base-uncased", "pubmedbert-uncased"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["markdown", "latex", "csv"])
def test_vocab_compare_prints_the_table_command_s_table(fmt, capsys, tmp_path, data_dir):
    spec = tmp_path / "terms.yaml"
    spec.write_text(f"name: terms\nkind: vocab\nvocab: {{table: terms, vocabs: [{', '.join(VOCABS)}]}}\n")
    assert main(["table", str(spec), "--work-dir", str(tmp_path / "work"), "--data-dir", str(data_dir),
                 "--format", fmt]) == 0
    from_table = capsys.readouterr().out
    vocab_args = [a for v in VOCABS for a in ("--vocab", v)]
    assert main(["vocab", "compare", *vocab_args, "--no-table8", "--data-dir", str(data_dir), "--format", fmt]) == 0
    assert capsys.readouterr().out == from_table
    if fmt == "markdown":
        assert "| lymphoma | disease | l-ym-ph-oma | ✓ |" in from_table


def test_vocab_compare_unknown_format_is_a_one_line_error(capsys):
    assert main(["vocab", "compare", "--format", "html"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bioablate: error: unknown table format 'html'; known: csv")
