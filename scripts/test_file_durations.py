"""Each test file's seconds, summed over its tests' setup, call and teardown, from the log of a whole
suite run with `--durations=0`, written to tests/file_durations.json: tests/conftest.py hands the files to
pytest-xdist's workers longest first.

    .venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=0 -p no:cacheprovider > suite.log
    .venv/bin/python scripts/test_file_durations.py suite.log

Refresh it when a file's time changes by minutes: a stale entry costs only balance, never a result.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "file_durations.json"
LINE = re.compile(r"^([0-9.]+)s (?:setup|call|teardown)\s+(tests/[^:\s]+)::")


def file_seconds(log: str) -> dict[str, int]:
    seconds: Counter = Counter()
    for line in log.splitlines():
        match = LINE.match(line)
        if match:
            seconds[match.group(2)] += float(match.group(1))
    return {path: round(s) for path, s in sorted(seconds.items(), key=lambda kv: -kv[1]) if s >= 1}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: test_file_durations.py SUITE_LOG (a pytest log with --durations=0)", file=sys.stderr)
        return 2
    seconds = file_seconds(Path(argv[0]).read_text(errors="replace"))
    if not seconds:
        print(f"{argv[0]}: no --durations=0 lines in it", file=sys.stderr)
        return 2
    OUT.write_text(json.dumps(seconds, indent=0) + "\n")
    print(f"{OUT}: {len(seconds)} files, {sum(seconds.values()) / 60:.1f} test-minutes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
