"""Task heads (the paper's Featurizer + Predict modules, Sec. 2.4; Tables 12 and 14) with their losses.

`finetune.head` (`HEADS`) names the layers around the output layer:
    linear       the output layer alone (standard)
    bilstm       a BiLSTM over the encoder output, then the output layer
    crf          token tasks: linear emissions + a CRF (pytorch-crf) over the tagged positions, Viterbi
                 decoding, transitions constrained so decoding never emits a sequence the scheme forbids
    bilstm-crf   both
Sequence tasks also take `finetune.re_feature` (`RE_FEATURES`) and `finetune.classifier` (`CLASSIFIERS`).
The options are registered in the torch-free choice_names.py; this module builds them. What a head predicts
per example is the task kind's (datamodules/task_kinds.py), attached at the end of this module. Token heads
compact the tagged positions (`tag_mask`) into one dense sequence per example, so a CRF sees consecutive tags.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Mapping

import torch
from torch import nn
from torch.nn import functional as F
from torchcrf import CRF

from datamodules.encoders import IGNORE_INDEX
from datamodules.task_kinds import TASK_KINDS
from datamodules.task_types import TASK_TYPES

# the options, each registered whole there (torch-free: a misspelt name answers before torch loads)
from lightning_modules.choice_names import CLASSIFIERS, HEADS, RE_FEATURES, HeadLayers

NEG_INF = -1e4  # score of a forbidden CRF transition: never chosen, yet finite for the log-sum-exp


def masked_mean(values: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """The mean of `values` over its rows where `real` is True (a static-shape batch's filler rows are not)."""
    weight = real.to(values.dtype).view(-1, *[1] * (values.dim() - 1)).expand_as(values)
    return (values * weight).sum() / weight.sum()


def compact(values: torch.Tensor, mask: torch.Tensor, fill: float | int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's `mask`ed `values` moved to the front in order, [B, T, ...] -> [B, U, ...], and a [B, U] mask."""
    counts = mask.sum(1)
    width = max(int(counts.max()), 1)
    order = torch.argsort((~mask.bool()).int(), dim=1, stable=True)[:, :width]
    gathered = torch.gather(values, 1, order.view(*order.shape, *([1] * (values.dim() - 2))).expand(
        *order.shape, *values.shape[2:]))
    new_mask = torch.arange(width, device=mask.device)[None, :] < counts[:, None]
    fill_value = torch.as_tensor(fill, dtype=gathered.dtype, device=gathered.device)
    shape = (*new_mask.shape, *([1] * (values.dim() - 2)))
    return torch.where(new_mask.view(shape), gathered, fill_value), new_mask


class ConstrainedCRF(CRF):
    """pytorch-crf's CRF whose forbidden transitions are pinned to NEG_INF before every use, so neither
    training nor Viterbi can put probability on a sequence that the tagging scheme forbids."""

    def __init__(self, num_tags: int, allowed: tuple[set[int], set[tuple[int, int]], set[int]]):
        super().__init__(num_tags, batch_first=True)
        starts, pairs, ends = allowed
        self.register_buffer("forbid_start", torch.tensor([i not in starts for i in range(num_tags)]))
        self.register_buffer("forbid_end", torch.tensor([i not in ends for i in range(num_tags)]))
        self.register_buffer("forbid_pair", torch.tensor(
            [[(i, j) not in pairs for j in range(num_tags)] for i in range(num_tags)]))

    def pin(self) -> None:
        with torch.no_grad():
            self.start_transitions.masked_fill_(self.forbid_start, NEG_INF)
            self.end_transitions.masked_fill_(self.forbid_end, NEG_INF)
            self.transitions.masked_fill_(self.forbid_pair, NEG_INF)

    def nll(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor,
            real: torch.Tensor | None = None) -> torch.Tensor:
        """The mean negative log-likelihood over the rows (`real`: over those where it is True)."""
        self.pin()
        if real is None:
            return -self(emissions.float(), tags, mask, reduction="mean")
        llh = self(emissions.float(), tags.clamp(min=0), mask, reduction="none")
        return -masked_mean(llh, real)

    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        self.pin()
        return self.decode(emissions.float(), mask)

    def marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """P(tag at t | the whole sequence), [B, U, tags], by forward-backward in log space."""
        self.pin()
        emissions, valid = emissions.float(), mask.bool()[..., None]
        steps = emissions.shape[1]
        alpha = [self.start_transitions + emissions[:, 0]]
        for t in range(1, steps):
            step = torch.logsumexp(alpha[-1][:, :, None] + self.transitions, dim=1) + emissions[:, t]
            alpha.append(torch.where(valid[:, t], step, alpha[-1]))
        beta = [self.end_transitions.expand_as(alpha[0])]
        for t in range(steps - 2, -1, -1):
            step = torch.logsumexp(self.transitions + (emissions[:, t + 1] + beta[0])[:, None, :], dim=2)
            beta.insert(0, torch.where(valid[:, t + 1], step, beta[0]))
        # alpha_t + beta_t is log P(tag at t, sequence) + log Z: normalised over the tags it is the marginal
        return (torch.stack(alpha, 1) + torch.stack(beta, 1)).softmax(-1)


class TokenTagger(nn.Module):
    """Token classification over the tagged positions, with the layers of a `HEADS` option."""

    def __init__(self, layers: HeadLayers, hidden_size: int, num_tags: int, dropout: float,
                 allowed: tuple[set[int], set[tuple[int, int]], set[int]]):
        super().__init__()
        self.layer = layers.layer(hidden_size) if layers.layer is not None else None
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(self.layer.out_size if self.layer else hidden_size, num_tags)
        self.crf = ConstrainedCRF(num_tags, allowed) if layers.crf else None

    def forward(self, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.layer is not None:
            hidden = self.layer(hidden, batch["attention_mask"])
        return self.out(self.dropout(hidden)).float()

    def loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.crf is None:
            return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
        emissions, mask = compact(logits, batch["tag_mask"])
        tags, _ = compact(batch["labels"], batch["tag_mask"])
        return self.crf.nll(emissions, tags, mask, batch.get("real"))

    def adversarial_view(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The distributions ALUM compares, one row per tagged position ([N, tags])."""
        return logits[batch["tag_mask"].bool()]

    def probabilities(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Each tag's probability per position ([B, T, tags]; tagged positions only): softmax or CRF marginal."""
        if self.crf is None:
            return logits.float().softmax(-1)
        tagged = batch["tag_mask"].bool()
        emissions, mask = compact(logits, tagged)
        out = torch.zeros_like(logits, dtype=torch.float)
        out[tagged] = self.crf.marginals(emissions, mask)[mask]  # both in row order, positions in order
        return out

    def predict(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Tag id per position ([B, T]); only the tagged positions are meaningful."""
        if self.crf is None:
            return logits.argmax(-1)
        emissions, mask = compact(logits, batch["tag_mask"])
        paths = self.crf.viterbi(emissions, mask)
        out = torch.zeros_like(batch["tag_mask"], dtype=torch.long)
        for row, path in enumerate(paths):
            out[row, batch["tag_mask"][row].bool()] = torch.tensor(path, device=out.device)
        return out


@dataclass(frozen=True)
class SequenceOutput:
    """A sequence task kind's loss, decision rule and probabilities, for a `SequenceClassifier`."""

    # (logits, labels, class weights, real rows or None) -> the mean loss over the real rows
    loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None], torch.Tensor]
    predict: Callable[[torch.Tensor], torch.Tensor]  # logits -> the raw prediction the encoder decodes
    probabilities: Callable[[torch.Tensor], torch.Tensor] | None  # None: no distribution (a number)
    # the distributions ALUM compares (softmax over the last dimension); None: there are none
    adversarial_view: Callable[[torch.Tensor], torch.Tensor] | None
    weighted: bool = False  # the loss takes a weight per class (finetune.class_weights)


def _class_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None,
                real: torch.Tensor | None = None) -> torch.Tensor:
    return F.cross_entropy(logits, labels, weight=weights, ignore_index=IGNORE_INDEX)


def _labels_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None,
                 real: torch.Tensor | None = None) -> torch.Tensor:
    if real is None:
        return F.binary_cross_entropy_with_logits(logits, labels.float())
    return masked_mean(F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="none"), real)


def _number_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None,
                 real: torch.Tensor | None = None) -> torch.Tensor:
    if real is None:
        return F.mse_loss(logits.squeeze(-1), labels.float())
    return masked_mean(F.mse_loss(logits.squeeze(-1), labels.float(), reduction="none"), real)


def _best_class(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(-1)


def _labels_on(logits: torch.Tensor) -> torch.Tensor:
    return (logits > 0).long()  # sigmoid(logit) > 0.5


def _number(logits: torch.Tensor) -> torch.Tensor:
    return logits.squeeze(-1)


def _relevance(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().softmax(-1)[..., -1]


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().softmax(-1)


def _sigmoid(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().sigmoid()


def _unchanged(logits: torch.Tensor) -> torch.Tensor:
    return logits


def _bernoullis(logits: torch.Tensor) -> torch.Tensor:
    """One Bernoulli per label, as logits (0, l) -> sigmoid(l)."""
    return torch.stack([torch.zeros_like(logits), logits], -1)


ONE_CLASS = SequenceOutput(_class_loss, _best_class, _softmax, _unchanged, weighted=True)
LABEL_SET = SequenceOutput(_labels_loss, _labels_on, _sigmoid, _bernoullis)
A_NUMBER = SequenceOutput(_number_loss, _number, None, None)
# trained as classification (Bio-ELECTRA's weighted re-ranker weights that loss); predicts the last
# (relevant) class's probability, the candidate's score that a ranking metric orders by
RELEVANCE = replace(ONE_CLASS, predict=_relevance)


class SequenceClassifier(nn.Module):
    """One prediction for a whole sequence; `output` (the task kind's) is its loss and decision rule."""

    def __init__(self, layers: HeadLayers, feature: str, classifier: str, hidden_size: int, num_labels: int,
                 dropout: float, output: SequenceOutput, class_weights: tuple[float, ...] | None = None):
        super().__init__()
        if layers.crf:
            raise ValueError("a CRF needs a sequence of tags; a sequence task predicts one output")
        self.output, self.feature = output, feature
        self.featurizer = RE_FEATURES.get(feature)
        self.layer = layers.layer(hidden_size) if layers.layer is not None else None
        width = (self.layer.out_size if self.layer else hidden_size) * self.featurizer.vectors
        self.dropout = nn.Dropout(dropout)
        self.out = CLASSIFIERS.get(classifier)(width, hidden_size, num_labels, dropout)
        # the cross-entropy's weight per class (finetune.class_weights); training only, never saved
        weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float)
        if weights is not None and (not output.weighted or len(weights) != num_labels):
            raise ValueError(f"class weights need {num_labels} classes of one label each, got {class_weights}")
        self.register_buffer("class_weights", weights, persistent=False)

    def featurize(self, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat(self.featurizer.build(hidden, batch), -1)

    def forward(self, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.layer is not None:
            hidden = self.layer(hidden, batch["attention_mask"])
        return self.out(self.dropout(self.featurize(hidden, batch))).float()

    def loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.output.loss(logits, batch["labels"], self.class_weights, batch.get("real"))

    def adversarial_view(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The distributions ALUM compares: classes, a Bernoulli per label, or none for regression."""
        if self.output.adversarial_view is None:
            raise ValueError("adversarial training needs a classification head, not regression")
        return self.output.adversarial_view(logits)

    def probabilities(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Each class's (softmax) or label's (sigmoid) probability, [B, classes]; None for regression."""
        return None if self.output.probabilities is None else self.output.probabilities(logits)

    def predict(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.output.predict(logits)


class SpanPredictor(nn.Module):
    """Extractive QA: a start and an end logit per position, as BERT's SQuAD head; the loss is the mean of
    their cross-entropies against labels [B, 2]. `predict` returns the logits for `datamodules.qa_spans`."""

    def __init__(self, layers: HeadLayers, hidden_size: int, dropout: float):
        super().__init__()
        if layers.crf:
            raise ValueError("a CRF tags a sequence; extractive QA predicts a span")
        self.layer = layers.layer(hidden_size) if layers.layer is not None else None
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(self.layer.out_size if self.layer else hidden_size, 2)

    def forward(self, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.layer is not None:
            hidden = self.layer(hidden, batch["attention_mask"])
        return self.out(self.dropout(hidden)).float()

    def _masked(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[B, 2, T] start and end logits with padding at NEG_INF: no probability goes to padding."""
        return logits.masked_fill(~batch["attention_mask"].bool()[..., None], NEG_INF).transpose(1, 2)

    def loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        masked = self._masked(logits, batch)
        return (F.cross_entropy(masked[:, 0], batch["labels"][:, 0])
                + F.cross_entropy(masked[:, 1], batch["labels"][:, 1])) / 2

    def adversarial_view(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """ALUM compares the start and the end distributions over positions ([B, 2, T])."""
        return self._masked(logits, batch)

    def probabilities(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> None:
        return None  # an answer's probability is over its question's n-best spans (datamodules.qa_spans)

    def predict(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return logits


@dataclass(frozen=True)
class HeadSpec:
    """The head as chosen, from the config or an exported model's record (`metadata()`); `build` makes it."""

    head: str = HEADS.default
    re_feature: str = RE_FEATURES.default
    classifier: str = CLASSIFIERS.default
    dropout: float = field(default=0.1, metadata={"shapes_weights": False})  # training only

    @classmethod
    def from_config(cls, finetune_cfg: Any, task_type: str) -> HeadSpec:
        ft = finetune_cfg
        return cls(ft.head, ft.re_feature if TASK_TYPES.of(task_type).relation else RE_FEATURES.default, ft.classifier,
                   float(ft.dropout))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> HeadSpec:
        return cls(**{key: metadata[key] for key in cls.__dataclass_fields__})

    def metadata(self) -> dict[str, Any]:
        return asdict(self)

    def weight_choices(self) -> dict[str, Any]:
        """The choices that shape the head's weights: a head built with the same ones loads another's."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("shapes_weights", True)}

    def build(self, task_encoder, hidden_size: int, class_weights: tuple[float, ...] | None = None) -> nn.Module:
        """The head module of this spec for `task_encoder`'s task kind."""
        return TASK_KINDS.part(task_encoder.output_kind, "head")(self, task_encoder, hidden_size, class_weights)


# ------------------------------------------------------------------ this layer's part of each task kind
# (datamodules/task_kinds.py): (HeadSpec, task encoder, hidden size, class weights) -> the head module

def _token_head(spec: HeadSpec, task_encoder, hidden_size: int, class_weights) -> nn.Module:
    allowed = task_encoder.scheme.allowed_transitions(task_encoder.tags)
    return TokenTagger(HEADS.get(spec.head), hidden_size, task_encoder.num_labels, spec.dropout, allowed)


def _span_head(spec: HeadSpec, task_encoder, hidden_size: int, class_weights) -> nn.Module:
    return SpanPredictor(HEADS.get(spec.head), hidden_size, spec.dropout)


def sequence_head(output: SequenceOutput) -> Callable[..., nn.Module]:
    """The head part of a kind with one output per example, decided by `output`."""
    def build(spec: HeadSpec, task_encoder, hidden_size: int, class_weights) -> nn.Module:
        return SequenceClassifier(HEADS.get(spec.head), spec.re_feature, spec.classifier, hidden_size,
                                  task_encoder.num_labels, spec.dropout, output, class_weights)
    return build


TASK_KINDS.attach("token", head=_token_head)
TASK_KINDS.attach("span", head=_span_head)
TASK_KINDS.attach("classification", head=sequence_head(ONE_CLASS))
TASK_KINDS.attach("multilabel", head=sequence_head(LABEL_SET))
TASK_KINDS.attach("regression", head=sequence_head(A_NUMBER))
TASK_KINDS.attach("ranking", head=sequence_head(RELEVANCE))
