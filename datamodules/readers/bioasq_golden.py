"""BioASQ Task B factoid and list questions from the official golden files, as extractive QA.

Files (MANIFEST section 9): `BioASQ/golden/{4,5,6}B{1..5}_golden.json` and `BioASQ/golden/7B_golden.json`,
`{"questions": [{id, body, type, exact_answer, snippets: [{text, ...}], ...}]}`.

Each snippet of a question is one context (one `QAInstance`, id `<question id>_<nnn>` as BioBERT numbers
them). `exact_answer` is, for a factoid question, a list of synonyms or a list of lists of synonyms (the
4b-7b files: `[["NGF"], ["nerve growth factor"]]`; the official evaluation accepts a match with any of
them); for a list question a list of lists, one synonym group per answer item.

Answers are located in each snippet case-insensitively, as whole words: per answer item (the factoid
answer, or each list item), the first occurrence of any of its synonyms (the earliest; the longest
synonym there). For training (`locate_only=True`), snippets where nothing was located are dropped, and
so are questions whose answer is in none of their snippets: SQuAD-style training needs a span. For
evaluation every snippet is kept, located or not, so a question whose answer appears nowhere counts as
wrong; a question without snippets becomes one instance with an empty context, so it too is scored (and
wrong).

`golden_splits` builds train / dev / test from chosen files (e.g. train on 4b-5b, test on 6b) and drops
training questions whose id is in the test set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

from bioablate_core.errors import DataFormatError
from datamodules.instances import AnswerSpan, QAInstance
from datamodules.readers import bound
from datamodules.readers.jsonfile import load_json_object
from datamodules.spec import SPLITS, Reader, Splits

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

GOLDEN_FILES = tuple(f"BioASQ/golden/{year}B{batch}_golden.json" for year in (4, 5, 6) for batch in range(1, 6))
GOLDEN_7B = "BioASQ/golden/7B_golden.json"
QA_TYPES = ("factoid", "list")


@dataclass
class GoldenCounts:
    """What reading golden files found and dropped (question = a question; snippet = one context)."""

    questions: int = 0
    snippets: int = 0
    located_snippets: int = 0  # snippets where an answer was found
    located_questions: int = 0  # questions with an answer in at least one snippet
    dropped_questions: int = 0  # training: answer in no snippet
    dropped_snippets: int = 0  # training: snippets without an answer (incl. those of dropped questions)
    test_overlap_dropped: int = 0  # training questions whose id is also a test question
    blank_answers: int = 0  # questions whose exact_answer is blank (kept at test, where they are wrong)

    def __add__(self, other: "GoldenCounts") -> "GoldenCounts":
        return GoldenCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def read_golden_file(path: Path, question_types: Sequence[str] = ("factoid",), locate_only: bool = False
                     ) -> tuple[list[QAInstance], GoldenCounts]:
    """The question x snippet instances of one golden file's questions of `question_types`, in file
    order, and the counts. `locate_only`: training data (see the module docstring)."""
    path = Path(path)
    unknown = set(question_types) - set(QA_TYPES)
    if unknown:
        raise ValueError(f"question types {sorted(unknown)} are not extractive; known: {', '.join(QA_TYPES)}")
    data = load_json_object(path, 'a JSON object {"questions": [...]}')
    if not isinstance(data.get("questions"), list):
        raise DataFormatError(path, None, 'expected a JSON object {"questions": [...]}')
    instances: list[QAInstance] = []
    counts = GoldenCounts()
    seen: dict[str, int] = {}  # question id -> its index: two questions with one id would merge into one
    for index, question in enumerate(data["questions"]):
        if not isinstance(question, dict):
            raise DataFormatError(path, None, f"questions[{index}]: expected an object")
        qid = question.get("id", f"questions[{index}]")
        if isinstance(qid, str) and qid in seen:
            raise DataFormatError(path, None, f"questions[{index}]: id {qid!r} occurs twice (also questions"
                                              f"[{seen[qid]}]); give each question its own id")
        seen.setdefault(qid, index)
        if "type" not in question:
            raise DataFormatError(path, None, f"question {qid} has no key 'type'")
        if question["type"] in question_types:
            instances += _question(path, qid, question, locate_only, counts)
    return instances, counts


def golden_splits(data_dir: Path, train: Sequence[str], test: Sequence[str], dev: Sequence[str] = (),
                  question_types: Sequence[str] = ("factoid",)) -> tuple[Splits, GoldenCounts]:
    """Train (answers located; see the module docstring), dev and test (every snippet) from golden files
    relative to `data_dir`, e.g. `golden_splits(d, train=GOLDEN_FILES[:10], test=GOLDEN_FILES[10:])`.
    A train or dev question whose id is also a test question is dropped (counted), so nothing leaks."""
    data_dir = Path(data_dir)
    counts = GoldenCounts()
    splits: Splits = {name: [] for name in SPLITS}
    for split, names in (("test", test), ("dev", dev), ("train", train)):
        first_file: dict[str, str] = {}  # question id -> the file of this split that has it
        for name in names:
            instances, file_counts = read_golden_file(data_dir / name, question_types, locate_only=split == "train")
            for qid in dict.fromkeys(x.question_id for x in instances):
                if first_file.setdefault(qid, name) != name:
                    raise DataFormatError(data_dir / name, None, f"question {qid} is also in {first_file[qid]} "
                                          f"({split} split): a question belongs in one file")
            splits[split] += instances
            counts += file_counts
    test_ids = {x.question_id for x in splits["test"]}
    for split in ("train", "dev"):
        leaked = {x.question_id for x in splits[split]} & test_ids
        counts.test_overlap_dropped += len(leaked)
        splits[split] = [x for x in splits[split] if x.question_id not in leaked]
    return splits, counts


def golden_reader(train: Sequence[str], test: Sequence[str], question_types: Sequence[str] = ("factoid",)
                  ) -> Reader:
    """A `DatasetSpec` reader of `golden_splits` (train and test files; dev is left to the spec's protocol;
    picklable, for DDP's spawn start method)."""
    return bound(_read_golden, train, test, question_types)


def _read_golden(train: Sequence[str], test: Sequence[str], question_types: Sequence[str], data_dir: Path) -> Splits:
    return golden_splits(data_dir, train=train, test=test, question_types=question_types)[0]


def locate(context: str, synonyms: Sequence[str]) -> AnswerSpan | None:
    """The first case-insensitive occurrence of any synonym in `context` as whole words (at equal starts
    the longest), or None. Whole words: "AD" must not be found in "had", and a span that starts or ends
    inside a word cannot be a token span, so training on it would teach a different answer ("Stroop
    tests" for "Stroop Test"). Matched with a regex so the span is in `context`'s own characters even
    where lowercasing would change a string's length."""
    best = None
    for synonym in synonyms:
        if not synonym.strip():
            continue
        # a word boundary only where the synonym's own edge is a word character ("IL-2+" may end anywhere)
        pattern = ((r"(?<!\w)" if re.match(r"\w", synonym) else "") + re.escape(synonym)
                   + (r"(?!\w)" if re.search(r"\w$", synonym) else ""))
        match = re.search(pattern, context, re.IGNORECASE)
        if match and (best is None or (match.start(), -match.end()) < (best.start, -best.end)):
            best = AnswerSpan(match.start(), match.end())
    return best


def answer_items(path: Path, qid: str, question_type: str, exact: Any) -> tuple[tuple[str, ...], ...]:
    """`exact_answer` -> synonym groups: one group for a factoid (all its synonyms, however nested),
    one per item for a list question; blank strings and groups left empty are dropped."""
    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        raise DataFormatError(path, None, f"question {qid}: exact_answer holds {type(value).__name__}, "
                                          "expected strings or lists of strings")
    if not isinstance(exact, list) or not exact:
        raise DataFormatError(path, None, f"question {qid}: exact_answer must be a non-empty list")
    if question_type == "factoid":
        groups = [strings(exact)]
    else:
        groups = [strings(item) for item in exact]
    # blank synonyms are dropped: 4B5 has a factoid answered [[" "]], which no prediction can match
    groups = [tuple(dict.fromkeys(s for s in group if s.strip())) for group in groups]
    return tuple(group for group in groups if group)


def _question(path: Path, qid: str, question: dict[str, Any], locate_only: bool,
              counts: GoldenCounts) -> list[QAInstance]:
    for key in ("id", "body", "exact_answer"):
        if key not in question:
            raise DataFormatError(path, None, f"question {qid} has no key {key!r}")
    if not isinstance(question["body"], str):
        raise DataFormatError(path, None, f"question {qid}: body must be a string")
    snippets = question.get("snippets", [])
    if not isinstance(snippets, list):
        raise DataFormatError(path, None, f"question {qid}: snippets must be a list")
    question_type = question["type"]
    groups = answer_items(path, qid, question_type, question["exact_answer"])
    texts = []
    for index, snippet in enumerate(snippets):
        if not isinstance(snippet, dict) or not isinstance(snippet.get("text"), str):
            raise DataFormatError(path, None, f"question {qid}: snippets[{index}] has no string key 'text'")
        texts.append(snippet["text"])
    # no snippet: one empty context, so that evaluation still scores the question (as wrong)
    contexts = texts or [""]
    located = [tuple(sorted({s for s in (locate(text, group) for group in groups) if s is not None}))
               for text in contexts]
    counts.questions += 1
    counts.blank_answers += not groups
    counts.snippets += len(texts)
    counts.located_snippets += sum(1 for spans in located if spans)
    counts.located_questions += any(located)
    if locate_only:
        counts.dropped_questions += not any(located)
        counts.dropped_snippets += sum(1 for spans in located if not spans) - (not texts)
    answers = tuple(dict.fromkeys(s for group in groups for s in group))
    return [QAInstance(id=f"{qid}_{n:03d}", question_id=qid, question=question["body"], context=text,
                       answers=answers, answer_spans=spans, question_type=question_type,
                       answer_groups=groups if question_type == "list" else ())
            for n, (text, spans) in enumerate(zip(contexts, located)) if spans or not locate_only]
