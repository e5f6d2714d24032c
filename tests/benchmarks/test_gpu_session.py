"""The lent-GPU session script (scripts/gpu_session.sh -> benchmarks.gpu_session), rehearsed on the CPU so it
cannot rot between lent sessions: the wrapper installs a wheelhouse and the session runs every section at
toy size, recording each in session.json and session.md; a section whose budget does not fit is skipped
and recorded so; one that runs past its cut-off is stopped and the session goes on."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_session

REPO_ROOT = Path(__file__).resolve().parents[2]
SIDES = ("ours", "hf-naive", "hf-strong")


def make_wheel(folder: Path, name: str, source: str) -> Path:
    """A real (minimal) wheel of one module `name` with `source`, installable by pip offline."""
    info = f"{name}-0.1.dist-info"
    files = {f"{name}.py": source,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{info}/top_level.txt": f"{name}\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(f"{info}/RECORD", "\n".join(record + [f"{info}/RECORD,,"]) + "\n")
    return wheel


def build_wheelhouse():
    """scripts/build_wheelhouse.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("build_wheelhouse", REPO_ROOT / "scripts" / "build_wheelhouse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def session_data(data_dir: Path, folder: Path) -> Path:
    """A data folder holding only what scripts/build_wheelhouse.py packs for the device (links into the
    staged data): every section must run on that alone."""
    for part in build_wheelhouse().DATA:
        (folder / part).parent.mkdir(parents=True, exist_ok=True)
        (folder / part).symlink_to(data_dir / part)
    return folder


@pytest.mark.slow
def test_cpu_rehearsal_records_every_section_and_skips_the_one_over_budget(data_dir: Path, tmp_path: Path):
    make_wheel(tmp_path / "wheelhouse", "gpu_session_probe", "ANSWER = 42\n")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "BIOABLATE_WORK", "PYTHONPATH")}
    env.update(BIOABLATE_DATA=str(session_data(data_dir, tmp_path / "data")), PYTHON=sys.executable,
               WHEELHOUSE=str(tmp_path / "wheelhouse"),
               SITE=str(tmp_path / "site"))
    # generous budgets (a shared 2-core CI machine), but one that cannot fit: runs_per_device is skipped
    budgets = [f"{name}=300" for name in gpu_session.SECTION_NAMES if name != "runs_per_device"]
    command = ["bash", "scripts/gpu_session.sh", str(out), "--device", "cpu", "--size", "micro", "--budget", "100000",
               "--section-budget", *budgets, "runs_per_device=1000000", "--work-dir", str(tmp_path / "work"),
               "--threads", "1"]  # one thread: steadier where other jobs share the cores (CI runs two workers)
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]

    data = json.loads((out / "session.json").read_text())
    sections = data["sections"]
    assert list(sections) == gpu_session.SECTION_NAMES  # every section, in order
    statuses = {name: entry["status"] for name, entry in sections.items()}
    assert statuses == {**{name: "done" for name in gpu_session.SECTION_NAMES}, "runs_per_device": "skipped"}
    assert "does not fit" in sections["runs_per_device"]["reason"]
    assert data["session"]["wall_s"] > 0 and data["session"]["device"] == "cpu"

    install = sections["install"]["result"]
    assert install["packages"] == {"gpu_session_probe": "0.1"} and not install["import_failures"]
    assert install["seconds"] > 0 and (out / "install.log").is_file()
    env_result = sections["environment"]["result"]
    assert env_result["torch"] and env_result["peaks"]["fp32"] > 0 and "gpu_session_probe" in env_result["pip_list"]

    step_ab = sections["step_ab"]["result"]  # eager sides on a CPU: compiling takes minutes here
    for rows in ("8", "16"):
        assert step_ab[rows]["batch_size"] == int(rows) and step_ab[rows]["sides"] == ["today", "static"]
        assert step_ab[rows]["static"]["syncs"] == 0 < step_ab[rows]["today"]["syncs"]
        assert step_ab[rows]["static"]["host_us"] > 0 and step_ab[rows]["static"]["tokens_per_s"] > 0
    assert sections["profile_step"]["result"]["side"] == "static"
    assert sections["profile_step"]["result"]["step_wall_s"] > 0
    launches = sections["launch_overhead"]["result"]
    assert launches["all_ran"] and 0 < launches["issue_us"] <= launches["drained_us"]
    profiled = sections["profile_pretrain"]["result"]
    assert profiled["step_wall_s"] > 0 and profiled["top_host_ops"][0]["self_cpu_ms"] > 0
    for name in ("preflight_pretrain", "pretrain_base"):
        r = sections[name]["result"]
        assert all(r[side]["tokens_per_s"] > 0 for side in SIDES), name
        assert r["peak_memory"]["bytes"] > 0 and sections[name]["wall_s"] > 0
    assert [t["task"] for t in sections["preflight_finetune"]["result"]["results"]] == ["bc5-chem"]
    finetune = sections["finetune_base"]["result"]
    assert [t["task"] for t in finetune["results"]] == ["bc5-chem", "chemprot"]
    assert all(t[side]["examples_per_s"] > 0 for t in finetune["results"] for side in SIDES)
    smoke = sections["preflight_smoke"]["result"]
    assert smoke["pretrain_steps"] == 10 and 0.0 <= smoke["test_f1"] <= 1.0

    summary = (out / "session.md").read_text()
    for section in gpu_session.SECTIONS:
        assert f"## {section.title} (`{section.name}`)" in summary
    assert "**skipped**: its budget of 1000000 s does not fit" in summary
    assert "| bc5-chem | hf-strong |" in summary and "test F1" in summary
    assert (out / "session.log").read_text().count("[preflight_smoke]") == 2  # the wrapper kept the output


def session_args(tmp_path: Path, *extra: str):
    args = gpu_session.parser().parse_args(["--out", str(tmp_path), "--device", "cpu", *extra])
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def test_a_section_past_its_cut_off_is_stopped_and_the_sections_before_and_after_are_kept(tmp_path: Path):
    session = gpu_session.Session(session_args(tmp_path, "--section-budget", "environment=1"))

    def endless(progress: dict) -> dict:
        progress["first half"] = "done"
        while True:  # Python between steps, as a training loop is: the alarm stops it
            time.sleep(0.05)

    session.run("install", lambda: {"seconds": 1.0})
    progress: dict = {}
    session.run("environment", lambda: endless(progress), partial=progress)  # cut off at twice its budget: 2 s
    session.run("preflight_pretrain", lambda: {"after": True})
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    statuses = [sections[n]["status"] for n in ("install", "environment", "preflight_pretrain")]
    assert statuses == ["done", "cut off", "done"]
    assert 1.9 < sections["environment"]["wall_s"] < 10 and sections["environment"]["over_budget"]
    assert sections["environment"]["partial"] == {"first half": "done"}  # what it finished is kept
    assert sections["preflight_pretrain"]["result"]["after"] is True


def test_a_failing_section_is_recorded_with_its_error_and_the_session_goes_on(tmp_path: Path):
    session = gpu_session.Session(session_args(tmp_path))

    def broken() -> dict:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    session.run("preflight_smoke", broken)
    session.run("pretrain_base", lambda: {"ran": True})
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    assert sections["preflight_smoke"]["status"] == "failed"
    assert "illegal memory access" in sections["preflight_smoke"]["reason"]
    assert "RuntimeError" in sections["preflight_smoke"]["traceback"]
    assert sections["pretrain_base"]["status"] == "done"
    assert "**failed**: RuntimeError: CUDA error" in (tmp_path / "session.md").read_text()


def test_a_section_after_the_hf_trainer_turned_tf32_on_starts_from_the_sessions_precision_and_lightning_can_ask(
        tmp_path: Path):
    """The failure of the first H100 session: the HF Trainer (torch_compile, bf16) turned TF32 on through
    torch's new API after the benchmarks had turned it off through the legacy one, and Lightning's check at
    the next CUDA `fit` (torch.get_float32_matmul_precision) raised. Each section now starts from the
    precision the session started with (not IEEE fp32 forced on every section: a bf16 section is not an
    fp32 one), and Lightning can ask."""
    from transformers.utils.import_utils import enable_tf32

    backends = [torch.backends, torch.backends.cuda.matmul, torch.backends.cudnn, torch.backends.mkldnn,
                torch.backends.mkldnn.matmul]
    before = [b.fp32_precision for b in backends]
    try:
        for backend in backends:  # a fresh process's state, whatever the tests before set
            backend.fp32_precision = "none"
        session = gpu_session.Session(session_args(tmp_path))
        torch.backends.cuda.matmul.allow_tf32 = False  # what benchmarks.common did before
        enable_tf32.__wrapped__(True)  # what TrainingArguments does on a GPU (lru_cache'd: the function itself)
        with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
            torch.get_float32_matmul_precision()
        session.run("preflight_smoke", lambda: {"asked": torch.get_float32_matmul_precision(),
                                                "matmul": torch.backends.cuda.matmul.fp32_precision,
                                                "global": torch.backends.fp32_precision})
        sections = json.loads((tmp_path / "session.json").read_text())["sections"]
        result = sections["preflight_smoke"]["result"]
        assert (result["asked"], result["matmul"], result["global"]) == ("highest", "none", "none")
    finally:
        for backend, value in zip(backends, before):
            backend.fp32_precision = value


def test_a_section_is_skipped_when_its_budget_exceeds_what_is_left(tmp_path: Path):
    session = gpu_session.Session(session_args(tmp_path, "--budget", "30", "--section-budget", "pretrain_base=31"))
    ran = []
    session.run("pretrain_base", lambda: ran.append(1) or {})
    session.run("finetune_base", lambda: ran.append(2) or {}, skip=None)  # 170 s > 30 s left
    session.run("environment", lambda: ran.append(3) or {})  # 20 s fits
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    assert ran == [3]
    assert sections["pretrain_base"]["status"] == sections["finetune_base"]["status"] == "skipped"
    assert "its budget of 31 s does not fit" in sections["pretrain_base"]["reason"]


def test_only_runs_the_named_sections_and_always_checks_the_install(tmp_path: Path):
    session = gpu_session.Session(session_args(tmp_path, "--only", "pretrain_base"))
    for name in ("install", "environment", "pretrain_base"):
        session.run(name, lambda: {"ran": True})
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    assert {n: e["status"] for n, e in sections.items()} == {"install": "done", "environment": "skipped",
                                                             "pretrain_base": "done"}
    assert sections["environment"]["reason"] == "not named by --only"


def test_the_install_check_names_a_carried_module_that_does_not_import(tmp_path: Path):
    wheels = [make_wheel(tmp_path / "wheelhouse", "fine_probe", "X = 1\n"),
              make_wheel(tmp_path / "wheelhouse", "broken_probe", "import a_module_the_image_lacks\n")]
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
                    *map(str, wheels)], check=True)
    sys.path.insert(0, str(site))
    try:
        args = session_args(tmp_path / "out", "--installed", str(site), "--install-seconds", "1")
        expected = "broken_probe: broken_probe.*ModuleNotFoundError.*a_module_the_image_lacks"
        with pytest.raises(RuntimeError, match=expected):
            gpu_session.install_section(args)
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("fine_probe", None)


def test_the_wheelhouse_size_check_counts_the_travelling_tree_and_fails_loudly_over_the_limit(tmp_path, capsys):
    folder = tmp_path / "wheelhouse"
    folder.mkdir()
    (folder / "big.whl").write_bytes(os.urandom(3 * 2 ** 20))
    wheelhouse = build_wheelhouse()
    tree_mib = wheelhouse.travelling_tree_bytes() / 2 ** 20
    assert tree_mib > 1  # the checkout's files are counted, not only the wheelhouse
    assert wheelhouse.fits(folder, limit_mib=tree_mib + 3.5)
    assert not wheelhouse.fits(folder, limit_mib=tree_mib + 2.5)
    assert "DOES NOT FIT" in capsys.readouterr().err


def test_an_interpreter_without_torch_is_one_line_saying_so(tmp_path: Path):
    """The default PYTHON (the system's python3) may lack torch: one line and exit 2, not a traceback of
    ModuleNotFoundError from every section."""
    no_torch = tmp_path / "python-without-torch"
    no_torch.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")  # -S: no site-packages, so no torch
    no_torch.chmod(0o755)
    done = subprocess.run(["bash", "scripts/gpu_session.sh", str(tmp_path / "out"), "--device", "cpu"],
                          env={**os.environ, "PYTHON": str(no_torch), "WHEELHOUSE": str(tmp_path / "none")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == (
        f"gpu_session.sh: {no_torch} cannot import torch, so there is no GPU environment to measure; set PYTHON "
        "to the interpreter that holds torch"), done.stderr[-2000:]


@pytest.mark.parametrize("argv,message", [
    (["--budget", "-5"], "argument --budget: expected a number of seconds above 0, got '-5'"),
    (["--section-budget", "pretrain_base=nan"], "argument --section-budget: expected a number of seconds above 0"),
    (["--base-rounds", "0"], "argument --base-rounds: 0 is below the least, 1"),
])
def test_a_budget_or_count_that_cannot_be_is_one_usage_line(tmp_path: Path, capsys, argv, message):
    """`--budget -5` ran no section and exited 0."""
    with pytest.raises(SystemExit) as stop:
        gpu_session.main(["--out", str(tmp_path / "out"), "--device", "cpu", *argv])
    assert stop.value.code == 2 and message in capsys.readouterr().err.strip().splitlines()[-1]
