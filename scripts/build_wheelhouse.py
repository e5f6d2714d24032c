"""Build `wheelhouse/`: what a lent GPU machine needs to run bioablate's `base` path and has not got.

    python scripts/build_wheelhouse.py                 # wheels for the device (Python 3.12, manylinux x86_64) + data
    python scripts/build_wheelhouse.py --python-version 3.11 --out /tmp/wheelhouse-311   # a local rehearsal's

The GPU machine's image (scripts/gpu_image_packages.txt, from the device documentation) has torch,
transformers, Lightning, scipy, pandas... but not MLflow, Optuna, OmegaConf, seqeval, pytorch-crf,
submitit and some of their dependencies, and it reaches no package index. So this resolves the project's
dependencies (pyproject.toml) for the image's Python and platform against the image's package versions,
keeps what the image lacks, and downloads those as wheels (building the pure-Python ones that PyPI has
only as source: seqeval, antlr4-python3-runtime), plus the project's own wheel. MLflow: `mlflow-skinny`,
the `mlflow` package without the UI's JavaScript (what the full `mlflow` wheel adds), with SQLAlchemy
and Alembic for the sqlite store every run logs to: the run and benchmark paths never serve the UI.

It also packs `data.tar.gz`: the staged files the GPU session reads (BC5-chem, ChemProt, the PubMed
pretraining corpus, two vocabularies), since the device sees only the repository, not ../shared/data.

One device command carries at most 64 MiB, the working tree included: the total is printed and the
script fails (exit 1) when the tree and the wheelhouse together would not fit. `wheelhouse/` is ignored
by git; carry it with the device call (`carry: ["wheelhouse"]`); scripts/gpu_session.sh installs it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
IMAGE_PACKAGES = REPO / "scripts" / "gpu_image_packages.txt"
LIMIT_MIB = 64  # what one device command carries, the working tree included
# `mlflow` is the UI's JavaScript on top of `mlflow-skinny`; the sqlite tracking store needs these two
# (the full wheel requires them, the skinny one does not)
MLFLOW_RUN_PATH = ["sqlalchemy>=1.4,<3", "alembic>=1.7,!=1.10.0,<2"]
# manylinux tags pip must be told one by one (it matches N exactly); the image runs glibc >= 2.35
PLATFORMS = ["manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "linux_x86_64"]
# the staged files the GPU session reads (relative to the data directory)
DATA = ["BC5CDR-chem-IOB", "ChemProt", "pretrain/pubmed-abstracts", "vocab/pubmedbert-uncased",
        "vocab/bert-base-uncased"]


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages() -> dict[str, str | None]:
    """The image's packages: normalized name -> version where the documentation gives one."""
    out: dict[str, str | None] = {}
    for line in IMAGE_PACKAGES.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[normalized(name)] = version or None
    return out


def requirements() -> list[str]:
    """pyproject.toml's dependencies, `mlflow` replaced by what its run path needs."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    out = []
    for dep in deps:
        name = re.match(r"[A-Za-z0-9_.-]+", dep).group(0)
        if normalized(name) == "mlflow":
            out += [dep.replace(name, "mlflow-skinny", 1), *MLFLOW_RUN_PATH]
        else:
            out.append(dep)
    return out


def uv() -> list[str]:
    found = shutil.which("uv") or (Path(sys.executable).parent / "uv")
    if not Path(found).exists():
        sys.exit("build_wheelhouse: needs uv to resolve for another Python (pip install uv)")
    return [str(found)]


def resolve(python_version: str, image: dict[str, str | None]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(name, version) of every package the requirements need, resolved for the image's Python and
    platform with the image's known versions as constraints: those the image lacks (to carry), and
    those it has (what a rehearsal installs in place of the image)."""
    with tempfile.TemporaryDirectory() as tmp:
        reqs, cons = Path(tmp) / "requirements.in", Path(tmp) / "constraints.txt"
        # accelerate (extra `bench`, on the image): the benchmarks' HF Trainer baselines
        reqs.write_text("\n".join([*requirements(), "accelerate"]) + "\n")
        cons.write_text("".join(f"{name}=={v}\n" for name, v in image.items() if v))
        done = subprocess.run([*uv(), "pip", "compile", str(reqs), "-c", str(cons), "--python-version", python_version,
                               "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--no-annotate",
                               "--quiet", "--index-url", "https://pypi.org/simple"],
                              capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"build_wheelhouse: resolving failed:\n{done.stderr}")
    pinned = [line.split("==") for line in done.stdout.splitlines() if "==" in line and not line.startswith("#")]
    pinned = [(name.strip(), version.split(";")[0].strip()) for name, version in pinned]
    return ([(n, v) for n, v in pinned if normalized(n) not in image],
            [(n, v) for n, v in pinned if normalized(n) in image])


def download(name: str, version: str, python_version: str, out: Path) -> None:
    """The binary wheel for the device's Python and platform, else one built here from a pure-Python
    source distribution (it must come out `none-any`: a compiled one would not run there)."""
    spec = f"{name}=={version}"
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                          "--python-version", python_version, "--implementation", "cp", *platforms,
                          "--dest", str(out), spec], capture_output=True, text=True)
    if got.returncode == 0:
        return
    with tempfile.TemporaryDirectory() as tmp:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-binary", name,
                                "--wheel-dir", tmp, spec], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if built.returncode or not wheels or not wheels[0].name.endswith("-none-any.whl"):
            sys.exit(f"build_wheelhouse: no wheel of {spec} for Python {python_version} manylinux x86_64:\n"
                     f"{got.stderr[-1500:]}\n{built.stderr[-1500:]}")
        shutil.move(str(wheels[0]), out / wheels[0].name)


def own_wheel(out: Path) -> str:
    """bioablate's wheel, built from this checkout."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", tmp,
                               str(REPO)], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("bioablate-*.whl"))
        if done.returncode or len(wheels) != 1:
            sys.exit(f"build_wheelhouse: building bioablate's wheel failed:\n{done.stderr[-3000:]}")
        shutil.move(str(wheels[0]), out / wheels[0].name)
        return wheels[0].name


def pack_data(data_dir: Path, out: Path) -> Path:
    missing = [part for part in DATA if not (data_dir / part).exists()]
    if missing:
        sys.exit(f"build_wheelhouse: {data_dir} lacks {', '.join(missing)} (--data-dir: the staged data)")
    target = out / "data.tar.gz"
    with tarfile.open(target, "w:gz", compresslevel=9) as tar:
        for part in DATA:
            tar.add(data_dir / part, arcname=f"data/{part}")
    return target


def travelling_tree_bytes() -> int:
    """Bytes of what a device call sends besides carried paths: tracked and untracked-not-ignored files,
    and a shared/ folder inside the checkout (it travels, ignored or not)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    files = {REPO / f for f in listed if f and (REPO / f).is_file()}
    if (REPO / "shared").is_dir():
        files |= {f for f in (REPO / "shared").rglob("*") if f.is_file()}
    return sum(f.stat().st_size for f in files)


def fits(folder: Path, limit_mib: float = LIMIT_MIB) -> bool:
    """Whether `folder` (carried) and the travelling tree fit in one device command: prints the sizes,
    and a loud line to stderr where they do not."""
    house, tree, mib = folder_bytes(folder), travelling_tree_bytes(), 2 ** 20
    print(f"wheelhouse {folder}: {house / mib:.1f} MiB; working tree {tree / mib:.1f} MiB; together "
          f"{(house + tree) / mib:.1f} MiB of the {limit_mib:g} MiB one device command carries")
    if house + tree > limit_mib * mib:
        print(f"build_wheelhouse: DOES NOT FIT: {(house + tree) / mib:.1f} MiB > {limit_mib:g} MiB: carry less "
              "(--no-data, fewer packages) or shrink the tree", file=sys.stderr)
        return False
    return True


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "wheelhouse", help="(default: ./wheelhouse, git-ignored)")
    parser.add_argument("--python-version", default="3.12", help="the device image's Python (default 3.12)")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data",
                        help="staged data to pack (default: ../shared/data)")
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB, help="what one device command carries")
    parser.add_argument("--no-data", action="store_true", help="wheels only (a local rehearsal has the data)")
    parser.add_argument("--image-requirements", type=Path,
                        help="also write the image's packages this needs, pinned (the image's versions where the "
                             "device documentation gives them, else the resolved ones): a rehearsal's stand-in")
    args = parser.parse_args(argv)

    image = image_packages()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    carried, on_image = resolve(args.python_version, image)
    if args.image_requirements:
        args.image_requirements.write_text("".join(f"{n}=={image[normalized(n)] or v}\n" for n, v in on_image))
    with ThreadPoolExecutor(4) as pool:  # pip's start-up and index look-ups overlap
        list(pool.map(lambda package: download(*package, args.python_version, args.out), carried))
    wheels = sorted(p.name for p in args.out.glob("*.whl"))
    if len(wheels) != len(carried):
        sys.exit(f"build_wheelhouse: {len(carried)} packages but {len(wheels)} wheels: {wheels}")
    ours = own_wheel(args.out)
    if not args.no_data:
        pack_data(args.data_dir.resolve(), args.out)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    manifest = {"python_version": args.python_version, "commit": commit, "bioablate_wheel": ours,
                "packages": dict(carried), "data": None if args.no_data else DATA,
                "files": {p.name: p.stat().st_size for p in sorted(args.out.iterdir())}}
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")

    for name, size in sorted(manifest["files"].items(), key=lambda item: -item[1]):
        print(f"{size / 2 ** 20:8.2f} MiB  {name}")
    print(f"{len(carried)} packages + bioablate")
    return 0 if fits(args.out, args.limit_mib) else 1

if __name__ == "__main__":
    raise SystemExit(main())
