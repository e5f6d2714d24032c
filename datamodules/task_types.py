"""The task types: what a dataset's `task_type` names (ner, pico, re, similarity, classification, qa,
qa-extractive), one `TASK_TYPES` entry each, declared once for built-in and user datasets alike.

A task type is a kind of data, a task kind (task_kinds.py) a kind of output: relation extraction and yes/no
QA are both `classification`, but read, cut and described differently. Modules ask the entry
(`TASK_TYPES.of(spec.task_type).relation`) instead of comparing names, and choices select task types by
property (`TASK_TYPES.names(lambda t: t.tagged)`), so a new task type needs no other edit. It lives apart
from task_kinds.py, which imports transformers, so the encoders and registries can read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bioablate_core.registry import Registry


@dataclass(frozen=True)
class UserForm:
    """A `task_type:` of a user dataset YAML: its required `fields`, `optional` ones, and default `columns`."""

    fields: tuple[str, ...]
    optional: tuple[str, ...]
    columns: dict[str, int]
    count_unit: str
    inputs: str | None = None  # the input form its records build (None: its task type's)
    multi_label: bool = False  # `multi_label: true` applies: each instance has a list of labels


@dataclass(frozen=True)
class TaskType:
    """One task type (module docstring)."""

    kind: str  # a name in datamodules.task_kinds.TASK_KINDS
    title: str
    inputs: str
    metrics: tuple[str, ...] = ()  # that can score a user dataset of it, the default first
    forms: dict[str, UserForm] = field(default_factory=dict)
    blurb: bool = True  # one of BLURB's six: the BLURB score averages within each, then over them
    # True: cut the longer text of a pair; "only_second": keep the first (a question) whole
    truncation: bool | str = True
    class_weights: bool = False  # the loss is a cross-entropy over one class per example
    unit: str = "instance"  # one resampling unit, as a table's notes name it (unless a scoring group says)
    group_by: str | None = None  # the instance attribute whose equal values stay on one side of a carve or fold
    unlabeled: str | None = None  # what its gold answers are where they are not classes or entity types

    @property
    def tagged(self) -> bool:
        """A tag per word: the tagging choices apply, and gold answers are spans of words."""
        return self.kind == "token"

    @property
    def spans(self) -> bool:
        """An answer span in a context (extractive QA)."""
        return self.kind == "span"

    @property
    def scored(self) -> bool:
        """Its gold answer is a number (a similarity score), not a class."""
        return self.kind == "regression"

    @property
    def sequence(self) -> bool:
        """One output per example, from one vector (classes, labels or a number): the classifiers apply."""
        return not (self.tagged or self.spans)

    @property
    def relation(self) -> bool:
        """A sentence with a head and a tail entity: the relation inputs and featurizers apply."""
        return self.inputs == "relation"


class TaskTypes(Registry[TaskType]):
    def of(self, name: str) -> TaskType:
        """Task type `name`'s entry; a task kind named directly gets a plain one-text entry of that kind."""
        return self.get(name) if name in self else TaskType(kind=name, title=name, inputs="text", blurb=False)


TASK_TYPES = TaskTypes("task type")

_TAGGED = dict(fields=("tokens", "tags"), optional=("id",), columns={"token": 0, "tag": -1})
_CLASS_METRICS = ("accuracy", "relation_micro_f1", "positive_class_f1")
TASK_TYPES.register("ner", TaskType(
    "token", "Named Entity Recognition", "words", ("entity_f1",),
    {"ner": UserForm(**_TAGGED, count_unit="mentions")}, unit="sentence"))
TASK_TYPES.register("pico", TaskType(
    "token", "PICO Extraction", "words", ("pico_word_macro_f1", "entity_f1"),
    {"pico": UserForm(**_TAGGED, count_unit="PICO spans")}, unit="sentence"))
TASK_TYPES.register("re", TaskType(
    "classification", "Relation Extraction", "relation", ("relation_micro_f1", "positive_class_f1", "accuracy"),
    {"re": UserForm(("text", "label", "head", "tail"), ("id",), {"text": 0, "label": 1}, "pairs")},
    class_weights=True, group_by="text"))
TASK_TYPES.register("similarity", TaskType(
    "regression", "Sentence Similarity", "pair", ("pearson",),
    {"similarity": UserForm(("text_a", "text_b", "label"), ("id",), {"text_a": 0, "text_b": 1, "label": 2}, "pairs")},
    unlabeled="scores"))
TASK_TYPES.register("classification", TaskType(
    "classification", "Document Classification", "text", _CLASS_METRICS,
    {"classification": UserForm(("text", "label"), ("id",), {"text": 0, "label": 1}, "instances", multi_label=True),
     "pair-classification": UserForm(("text_a", "text_b", "label"), ("id",), {"text_a": 0, "text_b": 1, "label": 2},
                                     "pairs", inputs="pair")},
    class_weights=True, unit="document"))
# QA keeps the whole question and cuts the reference text
TASK_TYPES.register("qa", TaskType(
    "classification", "Question Answering", "question-text", _CLASS_METRICS,
    {"qa": UserForm(("question", "context", "label"), ("id",), {"question": 0, "context": 1, "label": 2},
                    "questions")},
    truncation="only_second", class_weights=True, group_by="text_a"))
# BioBERT's Table 6: an answer span in a context; a user dataset gives it in a whole-file format (custom/qa.py)
TASK_TYPES.register("qa-extractive", TaskType(
    "span", "Extractive Question Answering", "question-context", ("squad_v1", "bioasq_factoid", "bioasq_list"),
    {"qa-extractive": UserForm((), (), {}, "questions")}, blurb=False, group_by="question_id",
    unlabeled="answer spans"))

# The BLURB score's task types, in its order
BLURB_TASK_TYPES = tuple(TASK_TYPES.names(lambda t: t.blurb))
