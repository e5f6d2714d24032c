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


@pytest.mark.parametrize("module,argv,message", [
    ("pretrain_throughput", ["--seq-len", "100000"],
     "argument --seq-len: 100,000 is above the most this accepts, 8,192"),
    ("pretrain_throughput", ["--rounds", "0"], "argument --rounds: 0 is below the least, 1"),
    ("finetune_throughput", ["--batch-size", "0"], "argument --batch-size: 0 is below the least, 1"),
    ("finetune_throughput", ["--device", "bogus"], "argument --device: 'bogus' is not a torch device"),
    ("packing_throughput", ["--row-length", "100000"], "argument --row-length: 100,000 is above the most"),
    ("table_benchmark", ["--repeats", "0", "--out", "x"], "argument --repeats: 0 is below the least, 1"),
    ("suite", ["--out", "FILE"], "is a file; give a folder for the results"),
])
def test_a_bad_count_device_or_folder_is_one_usage_line_before_anything_runs(tmp_path, capsys, module, argv,
                                                                            message):
    """Bounded where argparse reads them: `--rounds 0` divided by zero after the whole run, `--seq-len 100000`
    asked for a 320 GB attention matrix, `--out FILE` failed once the results were computed."""
    import importlib

    (tmp_path / "FILE").write_text("kept")
    argv = [str(tmp_path / "FILE") if a == "FILE" else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(f"benchmarks.{module}").main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err.strip().splitlines()[-1]
    assert (tmp_path / "FILE").read_text() == "kept"
