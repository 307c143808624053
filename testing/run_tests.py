#!/usr/bin/env python3
"""Runs every test suite of bankml and prints one closing line.

Suites, in order: the C unit tests (build/unit-tests), then every
testing/test_*.py (CLI and other black-box tests of ./bankml), then every
testing/oracle_*.py (comparisons with llama.cpp b11669; each skips itself with
a reason when the oracle kit or ../shared is missing).

Each suite ends with a line "N passed, N failed[, N skipped]"; a suite that
exits non-zero without such a line counts as one failure. The last line
printed here is the sum. With BANKML_REQUIRE_ORACLE=1 (CI) a skipped test is a
failure. BANKML_ORACLE=skip leaves the oracle suites out (make asan).
Arguments filter suites by substring: `run_tests.py cli guard`. Lines starting
"ok " are counted but not echoed unless BANKML_VERBOSE=1.
"""
import glob, os, re, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COUNT = re.compile(r"^(?:\w+: )?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$")


def run_suite(name, argv):
    print(f"== {name}", flush=True)
    t0 = time.time()
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    last = None
    quiet = os.environ.get("BANKML_VERBOSE") != "1"
    for line in p.stdout:
        # passing checks are counted, not listed (BANKML_VERBOSE=1 lists them)
        if not (quiet and line.startswith("ok ")):
            sys.stdout.write("   " + line)
        if line.strip():
            last = line
    rc = p.wait()
    m = COUNT.match(last.strip()) if last else None
    if not m:
        print(f"   {name}: exited {rc} without a count line: 1 failure", flush=True)
        return 0, 1, 0
    ok, bad, skip = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if rc != 0 and bad == 0:
        print(f"   {name}: exited {rc} with no failure counted: 1 failure", flush=True)
        bad = 1
    print(f"   ({time.time() - t0:.1f} s)", flush=True)
    return ok, bad, skip


def main():
    filters = sys.argv[1:]
    suites = [("unit", [os.environ.get("BANKML_UNIT", "build/unit-tests")])]
    py = sys.executable or "python3"
    for f in sorted(glob.glob(os.path.join(HERE, "test_*.py"))):
        suites.append((os.path.basename(f)[:-3], [py, f]))
    if os.environ.get("BANKML_ORACLE") != "skip":
        for f in sorted(glob.glob(os.path.join(HERE, "oracle_*.py"))):
            suites.append((os.path.basename(f)[:-3], [py, f]))
    if filters:
        suites = [s for s in suites if any(x in s[0] for x in filters)]
    tp = tf = ts = 0
    for name, argv in suites:
        ok, bad, skip = run_suite(name, argv)
        tp, tf, ts = tp + ok, tf + bad, ts + skip
    if os.environ.get("BANKML_REQUIRE_ORACLE") == "1" and ts:
        print(f"BANKML_REQUIRE_ORACLE=1: {ts} skipped tests count as failures")
        tf, ts = tf + ts, 0
    print(f"{tp} passed, {tf} failed, {ts} skipped")
    return 1 if tf else 0


if __name__ == "__main__":
    sys.exit(main())
