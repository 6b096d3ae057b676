"""Write ``tests/durations.json`` (seconds per test module) from a JUnit XML report of a full run.

    python -m pytest --junitxml=/tmp/j.xml && python tests/durations.py /tmp/j.xml

``conftest.py`` reads the file to hand the heaviest modules to the xdist workers first (with
``--dist loadscope`` a module runs on one worker; longest-first packing shortens the tail where one
worker still runs a long module while the other is idle). A module the file does not know runs after
the known ones, in collection order; a stale file only costs balance, never a test.
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_of(classname: str) -> str:
    """``tests.a.test_b`` or ``tests.a.test_b.TestC`` → ``tests/a/test_b.py``."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (ROOT / path).is_file():
            return path
    return "/".join(parts) + ".py"


def main(xml_path: str) -> None:
    secs: collections.Counter[str] = collections.Counter()
    for case in ET.parse(xml_path).iter("testcase"):
        secs[module_of(case.get("classname", ""))] += float(case.get("time") or 0.0)
    modules = {k: round(v, 1) for k, v in sorted(secs.items(), key=lambda kv: -kv[1]) if v >= 1.0}
    out = {"_about": "seconds per test module (setup + calls) of one full run on the 2-core machine; "
                     "written by tests/durations.py, read by conftest.py (longest-first scheduling)",
           "modules": modules}
    (ROOT / "tests" / "durations.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(modules)} modules, {sum(secs.values()):.0f} s in all")


if __name__ == "__main__":
    main(sys.argv[1])
