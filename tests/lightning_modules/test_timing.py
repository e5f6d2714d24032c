"""The run timing profile (lightning_modules/timing.py): time goes to the innermost open section, once;
other threads are not timed; the parts and `other` add up to the wall time."""

import threading
import time

from lightning_modules.timing import PARTS, Profile


def test_nested_sections_count_their_own_time_once():
    profile = Profile()
    with profile.section("train_steps"):
        time.sleep(0.05)
        with profile.section("checkpoint_writes"):
            time.sleep(0.1)
        time.sleep(0.05)
    metrics = profile.metrics()
    assert set(metrics) == {f"system/time/{part}" for part in PARTS} | {"system/time/wall"}
    assert metrics["system/time/checkpoint_writes"] >= 0.1
    assert 0.1 <= metrics["system/time/train_steps"] < 0.1 + metrics["system/time/checkpoint_writes"]
    assert abs(sum(v for k, v in metrics.items() if k != "system/time/wall") - metrics["system/time/wall"]) < 1e-3
    assert metrics["system/time/other"] >= 0


def test_other_threads_are_not_timed():
    profile = Profile()

    def elsewhere():
        with profile.section("mlflow_logging"):
            time.sleep(0.05)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert profile.metrics()["system/time/mlflow_logging"] == 0


def test_process_start_is_part_of_the_wall_time():
    metrics = Profile(since_process_start=2.0).metrics()
    assert metrics["system/time/process_start_imports"] == 2.0
    assert metrics["system/time/wall"] >= 2.0
