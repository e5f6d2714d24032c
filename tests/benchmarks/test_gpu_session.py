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
    """The default plan at micro size, in bf16 autocast on the CPU (eager: compiling takes minutes here)."""
    make_wheel(tmp_path / "wheelhouse", "gpu_session_probe", "ANSWER = 42\n")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "BIOABLATE_WORK", "PYTHONPATH",
                                                            "TORCH_LOGS")}
    env.update(BIOABLATE_DATA=str(session_data(data_dir, tmp_path / "data")), PYTHON=sys.executable,
               WHEELHOUSE=str(tmp_path / "wheelhouse"),
               SITE=str(tmp_path / "site"))
    plan = gpu_session.PLANS["pretrain"]
    # generous budgets (a shared 2-core CI machine), but one that cannot fit: compile_cache is skipped
    budgets = [f"{name}=300" for name in plan if name != "compile_cache"]
    command = ["bash", "scripts/gpu_session.sh", str(out), "--device", "cpu", "--size", "micro", "--budget", "100000",
               "--section-budget", *budgets, "compile_cache=1000000", "--work-dir", str(tmp_path / "work"),
               "--threads", "1"]  # one thread: steadier where other jobs share the cores (CI runs two workers)
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]

    data = json.loads((out / "session.json").read_text())
    sections = data["sections"]
    assert list(sections) == plan  # every section, in order: the headline first
    statuses = {name: entry["status"] for name, entry in sections.items()}
    assert statuses == {**{name: "done" for name in plan}, "compile_cache": "skipped"}
    assert "does not fit" in sections["compile_cache"]["reason"]
    assert data["session"]["wall_s"] > 0 and data["session"]["device"] == "cpu"

    install = sections["install"]["result"]
    assert install["packages"] == {"gpu_session_probe": "0.1"} and not install["import_failures"]
    assert install["seconds"] > 0 and (out / "install.log").is_file()
    env_result = sections["environment"]["result"]
    assert env_result["torch"] and env_result["peaks"]["fp32"] > 0 and "gpu_session_probe" in env_result["pip_list"]

    for name, packed in (("headline", False), ("headline_packed", True)):
        r = sections[name]["result"]
        assert r["sides"] == ["ours", "hf-strong"] and r["packing"] is packed and r["max_predictions"] == 16, name
        assert all(r[side]["tokens_per_s"] > 0 and r[side]["dtype"] == "bf16" for side in r["sides"]), name
        assert r["ours"]["warmup_s"] > 0 and r["peak_memory"]["bytes"] > 0
    lightning = sections["lightning_path"]["result"]
    assert [(lightning[k]["steps"], lightning[k]["accumulate"]) for k in ("graphed", "accumulate_2")] == \
        [(4, 1), (2, 2)]
    assert all(lightning[k]["tokens_per_s"] > 0 and lightning[k]["losses"] == lightning[k]["steps"]
               for k in ("graphed", "accumulate_2"))
    profiled = sections["profile_graphed"]["result"]
    assert (profiled["side"], profiled["precision"]) == ("static", "bf16") and profiled["step_wall_s"] > 0
    assert profiled["attention_kernels"]  # SDPA's kernel, named

    summary = (out / "session.md").read_text()
    for name in plan:
        assert f"## {gpu_session.BY_NAME[name].title} (`{name}`)" in summary
    assert "**skipped**: its budget of 1000000 s does not fit" in summary
    assert "| 64 | 8 | hf-strong | bf16 |" in summary and "warm-up (compile) seconds" in summary
    log = (out / "session.log").read_text()
    assert log.count("[lightning_path]") == 2 and "plan pretrain: 7 sections" in log  # the wrapper kept the output


def test_the_default_plan_returns_the_headline_first_and_fits_one_command_with_a_margin(capsys):
    """`--plan` prints each section's budget, compiling included, and the total: the default plan fits the
    480 s command with a minute to spare, the environment's peaks then the headline first; fine-tuning is
    a plan of its own, also within one command."""
    assert gpu_session.main(["--plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["install", "environment", "headline"]
    assert "s of it compiling" in lines[3]
    for plan in gpu_session.PLANS:
        total = sum(gpu_session.BY_NAME[n].budget_s for n in gpu_session.PLANS[plan])
        assert total <= gpu_session.COMMAND_S - (40 if plan == "pretrain" else 0), (plan, total)
    assert lines[-1].split()[:2] == ["total", f"{total_of('pretrain'):.0f}"] and "margin" in lines[-1]
    assert not set(gpu_session.PLANS["pretrain"]) & {"finetune_base", "preflight_finetune", "runs_per_device"}


def total_of(plan: str) -> float:
    return sum(gpu_session.BY_NAME[n].budget_s for n in gpu_session.PLANS[plan])


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
    session.run("headline", lambda: {"after": True})
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    statuses = [sections[n]["status"] for n in ("install", "environment", "headline")]
    assert statuses == ["done", "cut off", "done"]
    assert 1.9 < sections["environment"]["wall_s"] < 10 and sections["environment"]["over_budget"]
    assert sections["environment"]["partial"] == {"first half": "done"}  # what it finished is kept
    assert sections["headline"]["result"]["after"] is True


def test_a_failing_section_is_recorded_with_its_error_and_the_session_goes_on(tmp_path: Path):
    session = gpu_session.Session(session_args(tmp_path))

    def broken() -> dict:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    session.run("preflight_smoke", broken)
    session.run("headline", lambda: {"ran": True})
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    assert sections["preflight_smoke"]["status"] == "failed"
    assert "illegal memory access" in sections["preflight_smoke"]["reason"]
    assert "RuntimeError" in sections["preflight_smoke"]["traceback"]
    assert sections["headline"]["status"] == "done"
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
    session = gpu_session.Session(session_args(tmp_path, "--budget", "30", "--section-budget", "headline=31"))
    ran = []
    session.run("headline", lambda: ran.append(1) or {})
    session.run("finetune_base", lambda: ran.append(2) or {}, skip=None)  # 170 s > 30 s left
    session.run("environment", lambda: ran.append(3) or {})  # 20 s fits
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    assert ran == [3]
    assert sections["headline"]["status"] == sections["finetune_base"]["status"] == "skipped"
    assert "its budget of 31 s does not fit" in sections["headline"]["reason"]


def test_only_runs_the_named_sections_and_always_checks_the_install(tmp_path: Path):
    session = gpu_session.Session(session_args(tmp_path, "--only", "headline"))
    for name in ("install", "environment", "headline"):
        session.run(name, lambda: {"ran": True})
    sections = json.loads((tmp_path / "session.json").read_text())["sections"]
    assert {n: e["status"] for n, e in sections.items()} == {"install": "done", "environment": "skipped",
                                                             "headline": "done"}
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
    (["--section-budget", "headline=nan"], "argument --section-budget: expected a number of seconds above 0"),
    (["--base-rounds", "0"], "argument --base-rounds: 0 is below the least, 1"),
])
def test_a_budget_or_count_that_cannot_be_is_one_usage_line(tmp_path: Path, capsys, argv, message):
    """`--budget -5` ran no section and exited 0."""
    with pytest.raises(SystemExit) as stop:
        gpu_session.main(["--out", str(tmp_path / "out"), "--device", "cpu", *argv])
    assert stop.value.code == 2 and message in capsys.readouterr().err.strip().splitlines()[-1]
