#!/usr/bin/env python3
"""peer_update.py -- after a peer run (testing/oracle_peer.py, or run.sh bankml with the same PEER_OUT), says how
testing/peer-expected-failures.txt should change.

    python3 testing/peer_update.py              # what to remove from the list, what is new, what did not run
    python3 testing/peer_update.py --remove     # also deletes the lines of the listed tests that now pass
    python3 testing/peer_update.py --causes     # also the listed failures grouped by today's reason, with their listed ones

It reads build/peer/bankml/results.tsv (the runner's outcomes: test id, outcome, short reason),
build/peer/starts/ (each `bankml serve` the suite started: the test, its arguments, its stderr) and the list, and
prints three groups:
  now pass       listed tests that passed: remove their lines (--remove does it; the list only shrinks)
  new failures   baseline tests that failed and are not listed: fix bankml, or list each with `issue #N: what is missing`
  not run        baseline tests with no outcome (a time bound, a collection error): raise the bound or fix the file
The list's format: one line per test, `TEST ID <TAB> issue #N: what is missing`; `#` starts a comment line.
This file is also the library testing/oracle_peer.py uses (load_expected, load_results, start_reasons, classify).
"""
import glob, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIST = os.path.join(HERE, "peer-expected-failures.txt")
OUT = os.path.join(ROOT, "build", "peer")
REASON = re.compile(r"^issue #\d+: \S")


def load_ids(path):
    """The test ids of a list file: one per line, `#` comments and blank lines skipped, first TAB field."""
    ids = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip() and not line.startswith("#"):
                ids.append(line.split("\t", 1)[0])
    return ids


def load_expected(path=LIST):
    """({test id: reason}, [problems]) from the expected-failures list. A problem is a line without a TAB, a
    reason that does not start `issue #N: ` followed by words, or a test listed twice."""
    exp, bad = {}, []
    if not os.path.exists(path):
        return exp, bad
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if "\t" not in line:
                bad.append(f"line {n}: no TAB between the test id and its reason: {line[:120]}")
                continue
            tid, reason = line.split("\t", 1)
            if not REASON.match(reason):
                bad.append(f"line {n}: the reason must start `issue #N: ` and say what is missing: {tid}")
                continue
            if tid in exp:
                bad.append(f"line {n}: listed twice: {tid}")
                continue
            exp[tid] = reason
    return exp, bad


def load_results(out):
    """{test id: (outcome, reason)} from OUT/results.tsv (outcome: passed, failed, skipped, not-run)."""
    res = {}
    path = os.path.join(out, "results.tsv")
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 2:
                res[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return res


def start_reasons(starts):
    """{test id: why bankml serve stopped} from the start records oracle_peer.py's wrapper writes (NAME.args:
    `test<TAB>id (phase)` and `arg<TAB>value` lines; NAME.err: the server's stderr). For each test, the last start
    whose stderr is not empty gives its first line that is not the usage line."""
    why = {}
    for args in sorted(glob.glob(os.path.join(starts, "*.args"))):
        tid = None
        with open(args, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("test\t"):
                    tid = re.sub(r" \((setup|call|teardown)\)$", "", line[5:].rstrip("\n"))
                    break
        err = args[:-5] + ".err"
        if not tid or not os.path.exists(err):
            continue
        with open(err, encoding="utf-8", errors="replace") as f:
            lines = [l.strip() for l in f.read(65536).splitlines() if l.strip()]
        lines = [l for l in lines if not l.startswith("usage:")]
        if lines:
            why[tid] = lines[0][:300]
    return why


def start_args(starts):
    """{test id: [argument lists]} from the start records, in start order."""
    out = {}
    for args in sorted(glob.glob(os.path.join(starts, "*.args"))):
        tid, argv = None, []
        with open(args, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("test\t"):
                    tid = re.sub(r" \((setup|call|teardown)\)$", "", line[5:])
                elif line.startswith("arg\t"):
                    argv.append(line[4:])
        if tid:
            out.setdefault(tid, []).append(argv)
    return out


def reason_of(tid, res, why):
    """The failure reason to print: the runner's, with the server's own words when it died at start."""
    outcome, r = res.get(tid, ("not-run", "no outcome recorded (not collected, or its file hit a time bound)"))
    if "Server process died" in r and tid in why:
        r = f"bankml serve exited at start: {why[tid]}"
    if outcome == "skipped":
        r = f"skipped on bankml (passes on llama-server): {r}"
    return outcome, r


def classify(baseline, expected, res, why):
    """Splits the baseline into (passed, expected, now_pass, new_fail, not_run) lists of (id, reason)."""
    passed, xfail, now_pass, new_fail, not_run = [], [], [], [], []
    for tid in baseline:
        outcome, r = reason_of(tid, res, why)
        if outcome == "passed":
            (now_pass if tid in expected else passed).append((tid, expected.get(tid, "")))
        elif outcome == "not-run":
            not_run.append((tid, r))
        elif tid in expected:
            xfail.append((tid, r))
        else:
            new_fail.append((tid, r))
    return passed, xfail, now_pass, new_fail, not_run


def remove_lines(path, ids):
    """Rewrites the list without the lines of these test ids (comments and order kept)."""
    ids = set(ids)
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    keep = [l for l in lines if l.startswith("#") or not l.strip() or l.split("\t", 1)[0].rstrip("\n") not in ids]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(keep)
    os.replace(tmp, path)
    return len(lines) - len(keep)


def main(argv):
    shared = os.environ.get("BANKML_SHARED") or os.path.join(ROOT, "..", "shared")
    baseline_path = os.path.join(shared, "peer", "baseline-llama-b11669.txt")
    out = os.environ.get("PEER_OUT") or os.path.join(OUT, "bankml")
    if not os.path.exists(os.path.join(out, "results.tsv")):
        print(f"no {out}/results.tsv: run `python3 testing/oracle_peer.py` first")
        return 2
    baseline = load_ids(baseline_path)
    expected, bad = load_expected()
    res = load_results(out)
    why = start_reasons(os.path.join(OUT, "starts"))
    passed, xfail, now_pass, new_fail, not_run = classify(baseline, expected, res, why)
    for b in bad:
        print(f"list: {b}")
    stale = [t for t in expected if t not in set(baseline)]
    for t in stale:
        print(f"list: not a baseline test (remove it): {t}")
    print(f"baseline {len(baseline)}: {len(passed)} pass, {len(xfail)} listed and failing, "
          f"{len(now_pass)} listed but passing, {len(new_fail)} new failures, {len(not_run)} not run")
    if now_pass:
        print(f"\nnow pass -- remove from {os.path.relpath(LIST, ROOT)}" + (" (removed)" if "--remove" in argv else "") + ":")
        for tid, r in now_pass:
            print(f"  {tid}\t[{r}]")
        if "--remove" in argv:
            remove_lines(LIST, [t for t, _ in now_pass])
    if new_fail:
        print("\nnew failures -- fix, or list as `ID<TAB>issue #N: what is missing`:")
        for tid, r in new_fail:
            print(f"  {tid}\t{r}")
    if not_run:
        print("\nnot run -- raise the bound or fix the file:")
        for tid, r in not_run:
            print(f"  {tid}\t{r}")
    if "--causes" in argv:
        groups = {}
        for tid, r in xfail:
            groups.setdefault(r, []).append(tid)
        print("\nlisted failures by today's cause:")
        for r, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(ids):4d}  {r}")
            for tid in ids[:3]:
                print(f"          {tid}  [{expected[tid]}]")
            if len(ids) > 3:
                print(f"          ... {len(ids) - 3} more")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
