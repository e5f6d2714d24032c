"""The vocabulary tables (Tables 1 and 8) as `Grid`s of text cells, from the rows ablations/tables/vocab_compare.py
computes from the staged vocabularies; render.py writes them in every format."""

from __future__ import annotations

from ablations.results import TableLayout
from ablations.tables.render import Grid
from ablations.tables.stats import Cell, TableData


def table1_grid(rows: list) -> Grid:
    """Table 1 (ablations.tables.vocab_compare.table1): each term's word pieces per vocabulary, with the paper's
    split beside ours where they differ; the plot counts the pieces."""
    from ablations.tables.vocab_compare import CHECK, same_split

    vocabs = list(rows[0].splits) if rows else []
    body, records = [], []
    figure = TableData(TableLayout(title="Table 1: word pieces per term", rows="term", columns="vocabulary"),
                       [r.term for r in rows], vocabs, {})
    for row in rows:
        cells = [row.term, row.category]
        for v in vocabs:
            ours, paper = row.splits[v], row.paper.get(v)
            same = None if paper is None else same_split(ours, paper)
            cells.append(ours if same in (None, True) else f"{ours} (paper: {paper})")
            pieces = 1 if ours == CHECK else ours.count("-") + 1
            records.append({"row": row.term, "column": v, "category": row.category, "ours": ours,
                            "paper": paper, "match": "" if same is None else str(same).lower(),
                            "pieces": pieces})
            figure.cells[(row.term, v)] = Cell(row.term, v, values={0: float(pieces)}, planned_seeds=(0,))
        body.append(cells)
    compared = [r for r in records if r["match"]]
    notes = ["Word pieces joined by '-' ('##' dropped); ✓: the term is one vocabulary entry. The paper prints "
             "original casing; uncased vocabularies are compared case-insensitively."]
    if compared:
        notes.append(f"Matches the paper: {sum(r['match'] == 'true' for r in compared)}/{len(compared)} cells.")
    return Grid("Table 1: how vocabularies split biomedical terms", ["term", "category", *vocabs], body, notes,
                records, figure, "word pieces")


def table8_grid(rows: list, general_vocab: str, domain_vocab: str) -> Grid:
    """Table 8 (ablations.tables.vocab_compare.table8): average input length in word pieces per dataset."""
    def f1(x: float | None) -> str:
        return "" if x is None else f"{x:.1f}"

    body, records = [], []
    figure = TableData(TableLayout(title="Table 8: average input length", rows="task", columns="vocabulary"),
                       [r.dataset for r in rows], [general_vocab, domain_vocab], {})
    for r in rows:
        body.append([r.dataset, f1(r.general), f1(r.paper_general), f1(r.domain), f1(r.paper_domain),
                     f"{r.ratio:.3f}", "" if r.paper_ratio is None else f"{r.paper_ratio:.3f}"])
        for vocab, ours, paper in ((general_vocab, r.general, r.paper_general),
                                   (domain_vocab, r.domain, r.paper_domain)):
            records.append({"row": r.dataset, "column": vocab, "mean": ours, "paper": paper,
                            "deviation_pct": None if paper is None else 100 * (ours - paper) / paper})
            figure.cells[(r.dataset, vocab)] = Cell(r.dataset, vocab, values={0: ours}, planned_seeds=(0,),
                                                    paper=paper)
    notes = ["Mean number of word pieces of the fine-tuning input (special tokens included, relation entities "
             "dummified, no truncation) over all splits; 'paper': Gu et al., Table 8."]
    return Grid("Table 8: average input length in word pieces, general vs in-domain vocabulary",
                ["dataset", general_vocab, "paper", domain_vocab, "paper", "ratio", "paper ratio"], body, notes,
                records, figure, "word pieces per input", "l" + "r" * 6)

