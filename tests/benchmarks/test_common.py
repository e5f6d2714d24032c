"""benchmarks.common: the peak-memory measurement the suite reports per section, and `--precision auto`."""

from __future__ import annotations

import mmap
import sys

import pytest

from benchmarks.common import bf16_native, peak_memory, reset_peak_memory, resolve_precision


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS is read from /proc")
def test_cpu_peak_memory_sees_an_allocation_and_resets_after_it():
    reset_peak_memory("cpu")
    before = peak_memory("cpu")
    # 64 MiB of fresh pages, each touched: a tensor could come from heap memory a long-lived worker
    # freed earlier and that is still resident (seen under xdist), which no peak would show
    block = mmap.mmap(-1, 64 * 2 ** 20)
    for offset in range(0, len(block), mmap.PAGESIZE):
        block[offset] = 1
    during = peak_memory("cpu")
    block.close()
    reset_peak_memory("cpu")
    after = peak_memory("cpu")
    assert before["what"] == during["what"] == "peak_rss"
    assert during["bytes"] - before["bytes"] >= 60 * 2 ** 20
    assert after["bytes"] < during["bytes"] - 30 * 2 ** 20  # the section after starts from the current RSS


def test_precision_auto_is_bf16_only_where_the_device_computes_it_natively():
    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("bf16", "cpu") == "bf16"
    assert resolve_precision("auto", "cpu") == ("bf16" if bf16_native("cpu") else "fp32")
