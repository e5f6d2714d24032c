"""Every number docs/results/findings.md quotes from a table is in that table. Each `## Table` section cites
its table (the first link to `<folder>/table.md`); in its "What `mini` shows" paragraphs (up to the next
paragraph that opens in bold: what follows quotes scripts and logs, named there) every number written with
one or two decimals must be one the table prints (a cell, a paper number, a τ), a difference of two numbers
printed in one row, a mean of one column's printed numbers, or a p value of the table's CSV, each rounded as quoted
(differences and means: of the cells' means, or of the paper's numbers). A difference computed from the CSV's
unrounded means, where it differs from the printed cells' subtraction, fails."""

from __future__ import annotations

import csv
import itertools
import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
FINDINGS = RESULTS / "findings.md"
NUMBER = re.compile(r"(?<![\d.])\d+\.(\d{1,2})(?![\d.])")
CELL_NUMBER = re.compile(r"-?\d+\.\d+")
P_FIELDS = ("p_value", "p_corrected", "example_p", "example_p_corrected")


def sections() -> dict[str, tuple[str, str]]:
    """`## Table` heading -> (cited table folder, the text of its "What `mini` shows" paragraphs)."""
    out = {}
    for chunk in re.split(r"^## ", FINDINGS.read_text(encoding="utf-8"), flags=re.M)[1:]:
        heading = chunk.splitlines()[0]
        cited = re.search(r"\]\(([\w.-]+)/table\.md\)", chunk)
        shows = re.search(r"^\*\*What `mini` shows\*\*.*?(?=^\*\*)", chunk, flags=re.M | re.S)
        if heading.startswith("Table") and cited and shows:
            out[heading] = (cited.group(1), shows.group(0))
    return out


def table_cells(folder: str) -> list[list[str]]:
    """The cited table.md's body rows, as the text of each value cell."""
    text = (RESULTS / folder / "table.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("| ")][1:]  # the header row left out
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[2:-1]] for line in lines]


def quotable(folder: str, decimals: int) -> set[float]:
    """What a number with `decimals` decimals may be, quoted from the table in `folder`."""
    md = (RESULTS / folder / "table.md").read_text(encoding="utf-8")
    values = {abs(float(x)) for x in CELL_NUMBER.findall(md)}  # every number the table prints
    for pattern in (r"^\**(-?\d+\.\d+)", r"paper (-?\d+\.\d+)"):  # the cells' means, the paper's numbers
        grid = [[m and float(m.group(1)) for m in (re.search(pattern, cell) for cell in row)]
                for row in table_cells(folder)]
        for row in grid:  # differences within a row
            values |= {abs(a - b) for a, b in itertools.combinations([v for v in row if v is not None], 2)}
        for column in zip(*grid):  # a column's mean (over the rows that have one)
            printed = [v for v in column if v is not None]
            values |= {abs(sum(printed) / len(printed))} if len(printed) > 1 else set()
    with open(RESULTS / folder / "table.csv", encoding="utf-8") as f:  # p values, as the CSV has them
        values |= {float(r[k]) for r in csv.DictReader(f) for k in P_FIELDS if r.get(k)}
    return {round(v, decimals) for v in values}


def quoted(text: str) -> list[tuple[str, int]]:
    """The numbers with one or two decimals in `text`, outside code spans and links."""
    text = re.sub(r"`[^`]*`|\]\([^)]*\)", "", text)
    return [(m.group(0), len(m.group(1))) for m in NUMBER.finditer(text.replace(",", ""))]


def test_the_findings_cite_tables_that_are_shipped():
    found = sections()
    assert {"Table 13 (tagging schemes) at `mini`", "Table 9 (pretraining corpora and time) at `mini`"} <= set(found)
    for folder, _ in found.values():
        assert (RESULTS / folder / "table.md").is_file() and (RESULTS / folder / "table.csv").is_file()


@pytest.mark.parametrize("heading", sorted(sections()))
def test_every_number_quoted_from_a_table_is_in_it(heading):
    folder, text = sections()[heading]
    numbers = quoted(text)
    assert len(numbers) >= 5, f"{heading}: expected the section to quote the table's numbers"
    missing = [n for n, decimals in numbers if round(float(n), decimals) not in quotable(folder, decimals)]
    assert not missing, f"findings.md, {heading}: {missing} not in docs/results/{folder}/table.md or table.csv"


def test_a_difference_from_unrounded_means_is_caught():
    """Table 13's BC5-disease IO - BIO: the CSV's means give 5.17, the printed cells 56.24 - 51.08 = 5.16."""
    allowed = quotable("table13_tagging-mini", 2)
    assert round(5.16, 2) in allowed and round(5.17, 2) not in allowed


def test_the_transfer_table_is_the_one_the_rendered_tables_give():
    """findings.md's transfer table is what scripts/transfer_table.py reads from the shipped tables' CSVs: a
    table re-rendered with another outcome, or a verdict edited by hand, fails here."""
    import subprocess
    import sys

    script = RESULTS.parents[1] / "scripts" / "transfer_table.py"
    done = subprocess.run([sys.executable, str(script), "--check", str(FINDINGS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
