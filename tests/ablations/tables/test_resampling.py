"""The statistics a reviewer asks for, each against an independent computation on data built by hand: the
bootstrap CI over test units (sentences, not mentions); the two-level bootstrap over seeds and test units
against its closed-form variance (seeds that differ, test sets that agree), on seeds that flip sign, and on
identical seeds (exactly one seed's interval); the paired permutation test on two prediction sets that
differ in known sentences (per seed and pooled); the resamples a 26-test correction needs; the
many-comparison correction (Holm on a known list, and in a table), "n too small" below 3 seeds, and the
seeds needed against statsmodels' own solve, with its range and its large-effect case."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ttest_rel
from statsmodels.stats.power import TTestPower

from ablations.results import FINISHED, CellRun, TableLayout
from ablations.tables.inference import correct, seeds_needed, seeds_needed_range
from ablations.tables.render import render_data
from ablations.tables.resampling import ResamplingCache, hierarchical, paired_test, resamples_for
from ablations.tables.scored_units import units_from_records
from ablations.tables.stats import table_data
from datamodules.registry import get_dataset

B = 4000  # resamples on both sides: Monte Carlo error of a percentile well under the tolerance below
TOL = 0.02


def ner_records(sentences: list[tuple[int, int, int]]) -> list[dict]:
    """One test-prediction record per sentence (the run artifact's form) from (gold mentions, of them
    predicted, spurious predictions)."""
    records = []
    for i, (mentions, hit, spurious) in enumerate(sentences):
        gold = [[3 * j, 3 * j + 1, "Chemical"] for j in range(mentions)]
        pred = gold[:hit] + [[100 + 3 * j, 101 + 3 * j, "Chemical"] for j in range(spurious)]
        records.append({"id": f"s{i}", "gold": gold, "prediction": pred})
    return records


# 20 sentences of 5 mentions each, 12 found whole and 8 missed whole, 5 sentences with 3 spurious mentions:
# the errors cluster by sentence, as real NER errors do
SENTENCES = [(5, 5, 0)] * 12 + [(5, 0, 0)] * 8 + [(0, 0, 3)] * 5


def numpy_f1_interval(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, seed: int = 1) -> tuple[float, float]:
    """Percentile bootstrap of micro F1, drawing whole rows of (tp, fp, fn): the reference computation."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(tp), size=(B, len(tp)))
    t, p, n = tp[draws].sum(1), fp[draws].sum(1), fn[draws].sum(1)
    f1 = 2 * t / (2 * t + p + n)
    return float(np.percentile(f1, 2.5)), float(np.percentile(f1, 97.5))


def test_bootstrap_ci_of_entity_f1_resamples_sentences_not_mentions():
    units = units_from_records(get_dataset("bc5-chem"), ner_records(SENTENCES))
    assert units.unit_name == "sentence" and len(units) == 25
    assert units.score(range(25)) == pytest.approx(2 * 60 / (2 * 60 + 15 + 40))  # tp 60, fp 15, fn 40
    ours = hierarchical([[(units,)]], n_resamples=B)
    tp = np.array([h for _, h, _ in SENTENCES])
    fp = np.array([s for *_, s in SENTENCES])
    fn = np.array([m - h for m, h, _ in SENTENCES])
    by_sentence = numpy_f1_interval(tp, fp, fn)
    assert ours.low == pytest.approx(by_sentence[0], abs=TOL) and ours.high == pytest.approx(by_sentence[1], abs=TOL)
    # resampling mentions instead (one row per gold or spurious mention) gives a far narrower interval
    mentions = [(1, 0, 0)] * 60 + [(0, 0, 1)] * 40 + [(0, 1, 0)] * 15  # (tp, fn, fp) per mention
    m = np.array(mentions)
    by_mention = numpy_f1_interval(m[:, 0], m[:, 2], m[:, 1])
    assert abs(ours.low - by_mention[0]) > 3 * TOL and abs(ours.high - by_mention[1]) > 3 * TOL


def accuracy_units(correct_units: np.ndarray) -> "ScoredUnits":  # noqa: F821 -- scored_units.ScoredUnits
    """A PubMedQA run whose answer to test question i is right where `correct_units[i]` (accuracy: counts)."""
    return units_from_records(get_dataset("pubmedqa"), [{"id": f"q{i}", "gold": "yes",
                                                         "prediction": "yes" if c else "no"}
                                                        for i, c in enumerate(correct_units)])


def two_level_variance(correct_units: np.ndarray) -> float:
    """The closed-form variance of the two-level bootstrap's mean accuracy, seeds x units correctness matrix
    c (k x n): draws of k seeds (uniform, with replacement) and of n units (one draw shared by the seeds):
    Var = (1/k) [popvar_s(acc_s) + (1/k) sum_s popvar_u(c_s - c_mean) / n] + popvar_u(c_mean) / n."""
    k, n = correct_units.shape
    c = correct_units.astype(float)
    mean = c.mean(axis=0)
    within = sum(np.var(c[s] - mean) for s in range(k)) / n
    return (np.var(c.mean(axis=1)) + within / k) / k + np.var(mean) / n


def test_seeds_that_differ_on_a_test_set_they_share_widen_the_cell_interval_as_the_closed_form_says():
    """Three seeds right on the first 100, 140, 180 of the same 200 questions (accuracy 0.5, 0.7, 0.9): the
    cell's interval reaches the extreme seeds' own scores, its variance is the closed form's (seeds and units),
    and three seeds of one accuracy (0.7, their errors on different questions) give one over 3 times
    narrower. The units alone (the seeds held, what the fixed-model interval measured) spread 0.024."""
    n = 200
    spread = np.array([[i < m for i in range(n)] for m in (100, 140, 180)])
    runs = [[(accuracy_units(c),)] for c in spread]
    found = hierarchical(runs, n_resamples=B)
    assert found.estimate == pytest.approx(0.7) and found.seeds == 3 and found.units == n
    # P(all three draws the 0.5 seed) = 1/27 > 2.5%: the ends lie within the units' noise (0.035) of 0.5 and 0.9
    assert found.low < 0.55 and found.high > 0.85
    assert found.sd ** 2 == pytest.approx(two_level_variance(spread), rel=0.08)
    # the spread over units alone, seeds held: popvar(c_mean) / n
    assert found.unit_sd ** 2 == pytest.approx(np.var(spread.mean(axis=0)) / n, rel=0.08)
    alike = np.array([[(i + shift) % n < 140 for i in range(n)] for shift in (0, 20, 40)])
    same = hierarchical([[(accuracy_units(c),)] for c in alike], n_resamples=B)
    assert same.estimate == pytest.approx(0.7) and same.sd ** 2 == pytest.approx(two_level_variance(alike), rel=0.08)
    assert (found.high - found.low) > 3 * (same.high - same.low)


def test_identical_seeds_give_exactly_one_seeds_interval():
    """k seeds that predict alike: the shared unit draws (a stream of their own) make the cell's interval one
    seed's, to the last bit; each seed's copy of the test set resampled on its own narrowed it by sqrt(k)."""
    units = units_from_records(get_dataset("bc5-chem"), ner_records(SENTENCES))
    one = hierarchical([[(units,)]], n_resamples=B)
    for k in (2, 3, 5):
        many = hierarchical([[(units,)]] * k, n_resamples=B)
        assert (many.low, many.high, many.estimate) == (one.low, one.high, one.estimate)
    # and a difference of a run with itself is nothing, on every resample
    itself = hierarchical([[(units, units)]] * 3, n_resamples=1000)
    assert (itself.low, itself.high, itself.p_value) == (0.0, 0.0, 1.0)


def test_seeds_that_flip_sign_give_a_difference_interval_over_zero_where_the_fixed_model_test_is_sure():
    """a - b on 200 shared questions: +0.1 on seeds 0 and 2 (a right on 20 questions b misses), -0.1 on seed 1.
    Drawing three seeds, all three are seed 1 with probability 1/27 (3.7% > 2.5%): the interval's low end is
    about -0.1, its high end +0.1, and the resamples at or below zero are those with two or three draws of
    seed 1, 7/27 of them: p about 2 x 7/27. The fixed-model test pooled over the seeds calls the same runs a
    clear difference (+0.033 on 600 question pairs, 60 of them differing)."""
    n = 200
    base = np.array([i < 100 for i in range(n)])
    better = np.array([i < 120 for i in range(n)])
    worse = np.array([i < 80 for i in range(n)])
    seeds = [(better, base), (worse, base), (better, base)]
    pairs = [[(accuracy_units(a), accuracy_units(b))] for a, b in seeds]
    found = hierarchical(pairs, n_resamples=B)
    assert found.estimate == pytest.approx(0.1 / 3)
    assert found.low < 0 < found.high
    assert found.low == pytest.approx(-0.1, abs=0.04) and found.high == pytest.approx(0.1, abs=0.04)
    assert found.p_value == pytest.approx(2 * 7 / 27, abs=0.08)
    fixed = paired_test([[(a, b)] for [(a, b)] in pairs], n_resamples=999)
    assert fixed.difference == pytest.approx(0.1 / 3) and fixed.p_value < 0.05


def test_a_difference_large_over_seeds_and_units_is_marked_among_26_tests():
    """table6_blurb corrects 26 tests together. A two-level bootstrap p is at least 2 / (n + 1): with 1,000
    resamples Holm's smallest corrected p is 26 x 2 / 1001 = 0.052, nothing could be marked. Counted for the
    correction, 2,080 resamples: a difference that holds on every seed and in most questions reaches
    26 x 2 / 2081 = 0.025 and is marked, the 25 others (p 1) not."""
    n = 300
    assert resamples_for(1) == 1000 and resamples_for(26) == 2080
    pairs = [[(accuracy_units(np.array([i < 200 + 10 * s for i in range(n)])),
               accuracy_units(np.array([i < 100 + 5 * s for i in range(n)])))] for s in range(3)]
    alone = hierarchical(pairs)
    among = hierarchical(pairs, comparisons=26)
    assert (alone.resamples, among.resamples) == (1000, 2080) and among.low > 0.25
    assert alone.p_value == pytest.approx(2 / 1001) and among.p_value == pytest.approx(2 / 2081)
    others = [1.0] * 25
    assert correct([alone.p_value, *others])[0] > 0.05 > correct([among.p_value, *others])[0]


# a: every mention of 40 sentences found; b: misses every mention of 4 five-mention sentences
PAIRED = [(5, 5, 0)] * 4 + [(1, 1, 0)] * 36


def test_paired_permutation_test_swaps_whole_sentences_per_seed_and_pooled():
    spec = get_dataset("bc5-chem")
    a = units_from_records(spec, ner_records(PAIRED))
    b = units_from_records(spec, ner_records([(5, 0, 0)] * 4 + [(1, 1, 0)] * 36))
    # only the 4 sentences that differ matter; |difference| reaches the observed one only when all 4 swap the
    # same way: p = 2 / 2^4 (swapping mentions one by one would give 2 / 2^20)
    found = paired_test([[(a, b)]], n_resamples=9999)
    assert found.difference == pytest.approx(1 - 2 * 36 / (2 * 36 + 20)) and found.units == 40
    assert found.p_value == pytest.approx(2 / 16, abs=0.015)
    # pooled over two seeds with the same pattern: all 8 differing sentences must swap the same way
    pooled = paired_test([[(a, b)], [(a, b)]], n_resamples=9999)
    assert pooled.p_value == pytest.approx(2 / 256, abs=0.004)
    # identical predictions: no difference, p = 1
    assert paired_test([[(a, a)]], n_resamples=999).p_value == pytest.approx(1.0)


def test_paired_test_of_accuracy_differs_in_known_instances():
    spec = get_dataset("pubmedqa")
    gold = ["yes"] * 30
    a = units_from_records(spec, [{"id": str(i), "gold": g, "prediction": g} for i, g in enumerate(gold)])
    b = units_from_records(spec, [{"id": str(i), "gold": g, "prediction": "no" if i < 6 else g}
                                  for i, g in enumerate(gold)])
    found = paired_test([[(a, b)]], n_resamples=9999)
    assert found.difference == pytest.approx(6 / 30) and found.p_value == pytest.approx(2 / 64, abs=0.01)


def test_a_test_among_many_gets_the_permutations_a_correction_needs_to_mark_it():
    """At least 1,000 permutations for every test set (a 1,000-unit one got 250 under the old cap sized for
    rescoring), and for a test among 26 corrected together 2,080: Holm over 26 tests makes 2 / 1001 0.052,
    and 2 / 2081 0.025. The same clear difference (half the questions flipped) is then marked."""
    spec = get_dataset("pubmedqa")
    gold = ["yes"] * 1000
    a = units_from_records(spec, [{"id": str(i), "gold": g, "prediction": g} for i, g in enumerate(gold)])
    b = units_from_records(spec, [{"id": str(i), "gold": g, "prediction": "no" if i % 2 else g}
                                  for i, g in enumerate(gold)])
    alone, among = paired_test([[(a, b)]]), paired_test([[(a, b)]], comparisons=26)
    assert (alone.resamples, among.resamples) == (1000, 2080)
    assert alone.p_value == pytest.approx(2 / 1001) and among.p_value == pytest.approx(2 / 2081)
    others = [1.0] * 25
    assert correct([alone.p_value, *others])[0] > 0.05 > correct([among.p_value, *others])[0]


def test_holm_on_a_known_list():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> running max 0.06 for the last
    assert correct([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert correct([0.01, 0.04, 0.03, 0.005], "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])


def test_holm_s_full_garbage_collection_scans_only_what_the_call_made():
    """statsmodels' Holm ends in gc.collect(), which in a process holding torch walks every object it made; a
    table corrects several families per render. `correct` runs it with the objects made before frozen (gc.freeze,
    not a patched gc.collect), and unfreezes them after."""
    import gc

    frozen_at_full = []
    callback = lambda phase, info: phase == "start" and info["generation"] == 2 and \
        frozen_at_full.append(gc.get_freeze_count())  # noqa: E731
    gc.callbacks.append(callback)
    try:
        assert correct([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
        gc.disable()  # no collection of the interpreter's own in between: only statsmodels' counts
        try:
            correct([0.2, 0.01, 0.5])
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(callback)
    assert frozen_at_full and all(count > 1000 for count in frozen_at_full) and gc.get_freeze_count() == 0


def finished(row, column, seed, value):
    return CellRun(row, column, row, seed, FINISHED, value, run_id=f"{row}-{column}-{seed}")


def test_table_marks_are_corrected_across_the_table_and_need_three_seeds():
    layout = TableLayout(title="t", rows="task", columns="scheme", baseline="bio", column_order=("bio", "io"))
    base = {"bc5-chem": [0.90, 0.91, 0.92], "ncbi-disease": [0.80, 0.82, 0.81], "jnlpba": [0.70, 0.71, 0.72]}
    io = {"bc5-chem": [0.93, 0.935, 0.945], "ncbi-disease": [0.812, 0.835, 0.818], "jnlpba": [0.705, 0.716, 0.72]}
    runs = [finished(t, "bio", s, v) for t, vs in base.items() for s, v in enumerate(vs)]
    runs += [finished(t, "io", s, v) for t, vs in io.items() for s, v in enumerate(vs)]
    raw = {t: float(ttest_rel(io[t], base[t]).pvalue) for t in base}
    order = sorted(raw, key=raw.get)  # Holm by hand: k-th smallest times (3 - k), running maximum
    holm, running = {}, 0.0
    for k, t in enumerate(order):
        running = max(running, min(1.0, raw[t] * (3 - k)))
        holm[t] = running
    assert raw["ncbi-disease"] < 0.05 and holm["ncbi-disease"] >= 0.05  # a mark the correction removes
    data = table_data(layout, runs)
    for t in base:
        assert data.cell(t, "io").p_corrected == pytest.approx(holm[t])
        assert data.cell(t, "io").significant == (holm[t] < 0.05)
    assert data.cell("bc5-chem", "io").significant
    md = render_data(data)
    assert "Holm-corrected (paired t-test over seeds)" in md  # no predictions resampled here
    # uncorrected, the raw p values decide
    none = table_data(TableLayout(**{**layout.__dict__, "correction": "none"}), runs)
    assert none.cell("ncbi-disease", "io").significant
    # two seeds: a large difference is still "n too small", never marked
    two = table_data(layout, [r for r in runs if r.seed < 2 and r.task == "bc5-chem"])
    cell = two.cell("bc5-chem", "io")
    assert cell.p_value is not None and cell.n_too_small and not cell.significant
    assert "never marked below 3 seeds, as here." in render_data(two) and "†" not in render_data(two).split("\n\n")[2]


def test_seeds_needed_match_statsmodels_solve_for_the_paper_difference_or_an_effect():
    layout = TableLayout(title="t", rows="task", columns="scheme", baseline="bio", column_order=("bio", "io"),
                         paper={"bc5-chem": {"bio": 93.33, "io": 93.11}})
    runs = [finished("bc5-chem", "bio", s, v) for s, v in enumerate([0.90, 0.91, 0.92])]
    runs += [finished("bc5-chem", "io", s, v) for s, v in enumerate([0.905, 0.912, 0.93])]
    differences = np.array([0.5, 0.2, 1.0])  # io - bio per seed, x100
    sd = float(np.std(differences, ddof=1))
    cell = table_data(layout, runs).cell("bc5-chem", "io")
    expected = TTestPower().solve_power(effect_size=0.22 / sd, alpha=0.05, power=0.8, alternative="two-sided")
    assert cell.effect == pytest.approx(-0.22) and cell.seeds_needed == math.ceil(expected)
    given = table_data(TableLayout(**{**layout.__dict__, "effect": 1.0}), runs).cell("bc5-chem", "io")
    expected = TTestPower().solve_power(effect_size=1.0 / sd, alpha=0.05, power=0.8, alternative="two-sided")
    assert given.seeds_needed == max(2, math.ceil(expected))
    assert seeds_needed(1.0, 0.0) is None and seeds_needed(0.0, 1.0) is None


def test_a_failed_power_solve_prints_nothing_in_a_fresh_process():
    """statsmodels warns where its solver finds no root (an effect 20 spreads wide), and its first failed
    solve imports a module that sets an "always" filter for that warning: in a process that had not imported
    it yet, the warning reached `bioablate table`'s stderr through seeds_needed's own filter (2026-11-29)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "from ablations.tables.inference import seeds_needed; "
                           "print(seeds_needed(20.0, 1.0), seeds_needed(-20.0, 1.0))"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[3], timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["2", "2"] and done.stderr == "", done.stderr


def test_seeds_needed_has_a_range_from_the_spreads_own_interval_and_2_for_a_large_effect():
    """The spread of 3 seeds has 2 degrees of freedom: its 95% interval is sd x sqrt(2 / chi2(2) quantiles),
    sd x [0.5207, 6.2847], so the seeds needed span a factor of about 40. An effect 20 spreads wide is
    detected with 2 seeds (power 0.97 > 0.8), where statsmodels' solver (and its power) give NaN."""
    from scipy.stats import chi2

    low_sd, high_sd = 0.4 * math.sqrt(2 / chi2.ppf(0.975, 2)), 0.4 * math.sqrt(2 / chi2.ppf(0.025, 2))
    assert low_sd / 0.4 == pytest.approx(0.5207, abs=1e-4) and high_sd / 0.4 == pytest.approx(6.2847, abs=1e-4)
    solve = lambda sd: TTestPower().solve_power(effect_size=0.22 / sd, alpha=0.05, power=0.8,  # noqa: E731
                                                alternative="two-sided")
    assert seeds_needed_range(0.22, 0.4, 2) == (math.ceil(solve(low_sd)), math.ceil(solve(high_sd)))
    assert seeds_needed(0.22, 0.4) == math.ceil(solve(0.4))
    with pytest.warns(Warning):  # statsmodels: no root, NaN
        assert math.isnan(TTestPower().solve_power(effect_size=20, alpha=0.05, power=0.8, alternative="two-sided"))
    assert seeds_needed(20.0, 1.0) == 2 and seeds_needed(-20.0, 1.0) == 2
    # statsmodels' power where it is finite: 2 seeds reach 0.733 at an effect 10 spreads wide, 3 seeds
    # 0.99999958; its solver answers 2.0 there, the answer is 3
    assert TTestPower().power(effect_size=10, nobs=2, alpha=0.05, alternative="two-sided") == \
        pytest.approx(0.7328, abs=1e-4)
    assert TTestPower().solve_power(effect_size=10, alpha=0.05, power=0.8, alternative="two-sided") == 2.0
    assert seeds_needed(10.0, 1.0) == 3


def test_results_are_cached_by_what_they_were_computed_from(tmp_path):
    cache, calls = ResamplingCache(tmp_path), []
    compute = lambda: calls.append(1) or {"low": 0.1, "high": 0.2}  # noqa: E731
    assert cache.get(["interval", ["r1"], "score", 100], compute) == {"low": 0.1, "high": 0.2}
    assert ResamplingCache(tmp_path).get(["interval", ["r1"], "score", 100], compute) == {"low": 0.1, "high": 0.2}
    ResamplingCache(tmp_path).get(["interval", ["r1"], "score", 200], compute)
    assert len(calls) == 2  # a second render read the first result; other resamples computed anew


def test_a_queue_too_short_to_repay_a_fork_is_computed_in_this_process_in_order(tmp_path):
    """A fork of a process with Lightning and MLflow loaded is not repaid by a micro table's resamples
    (milliseconds each): they are computed here, each result kept under its own key."""
    import os

    cache = ResamplingCache(tmp_path, collect=True)
    for i in range(6):
        assert cache.get(["interval", [f"r{i}"], "score", 100], lambda i=i: {"i": i, "pid": os.getpid()}) is None
    cache.run_pending()
    again = ResamplingCache(tmp_path)
    values = [again.get(["interval", [f"r{i}"], "score", 100], lambda: pytest.fail("not kept")) for i in range(6)]
    assert values == [{"i": i, "pid": os.getpid()} for i in range(6)]


def test_question_level_metrics_resample_whole_questions():
    records = [{"id": f"p{i}", "gold": "1" if i % 4 == 0 else "0", "prediction": 0.9 if i % 8 == 0 else 0.1,
                "group": f"q{i // 4}"} for i in range(40)]
    units = units_from_records(get_dataset("bioelectra-rerank"), records)
    assert units.unit_name == "question" and len(units) == 10 and all(len(u.golds) == 4 for u in units.units)
    # questions 0, 2, 4, ...: the relevant candidate ranks first (1); the others rank it last among ties (1/4)
    assert units.score(range(10)) == pytest.approx((5 * 1 + 5 * 0.25) / 10)
    assert units.score([0, 0, 1]) == pytest.approx((1 + 1 + 0.25) / 3)  # a question drawn twice counts twice


SLOW_RESAMPLING = """
import os, sys, time
from ablations.tables.resampling import ResamplingCache

def slow(i):
    def compute():
        with open(sys.argv[1], "a") as started:
            started.write(f"{os.getpid()}\\n")
        time.sleep(3)
        return {"i": i}
    return compute

cache = ResamplingCache(None, collect=True)
for i in range(4):
    cache.get([i], slow(i))
cache.run_pending()
"""


def _alive(pid: int) -> bool:
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:4]  # a zombie is gone
    except FileNotFoundError:
        return False


def test_resampling_workers_of_a_killed_parent_exit_at_once_and_quietly(tmp_path):
    """A SIGKILLed `table --stats` left each forked worker to finish its resampling, then print a
    `BrokenPipeError` traceback sending the result to nobody; now they die with their parent, silently."""
    import os
    import signal
    import subprocess
    import sys
    import time

    started, stderr = tmp_path / "started", tmp_path / "stderr"
    with stderr.open("w") as err:
        parent = subprocess.Popen([sys.executable, "-c", SLOW_RESAMPLING, str(started)], stderr=err,
                                  env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    def workers() -> list[int]:  # the first result is computed in the parent, timed; the rest in workers
        pids = [int(pid) for pid in started.read_text().split()] if started.exists() else []
        return [pid for pid in pids if pid != parent.pid]

    deadline = time.monotonic() + 60
    while len(workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the two workers (the CI machine's two cores) are resampling
    workers = workers()
    assert len(workers) == 2, workers
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    killed = time.monotonic()
    while any(_alive(pid) for pid in workers) and time.monotonic() - killed < 10:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers)
    time.sleep(0.5)
    assert "BrokenPipeError" not in stderr.read_text() and stderr.read_text() == ""
