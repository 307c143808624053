#!/usr/bin/env python3
"""oracle_peer.py -- llama.cpp's own server tests (../shared/peer: tools/server/tests of llama.cpp, pytest) run
against this tree's `./bankml serve`, held to what llama-server b11669 passes here.

It runs `sh ../shared/peer/run.sh bankml` with PEER_ONLY = the baseline (../shared/peer/baseline-llama-b11669.txt,
the tests b11669 passes on this kind of machine) and PEER_BANKML = a wrapper that records each start (the test,
the arguments, the server's stderr, in build/peer/starts/) and then runs ./bankml unchanged. Outcomes go to
build/peer/bankml/ (results.tsv, summary.txt, log/), the runner's output to build/peer/run.log. Then, per
baseline test:
  - passes on bankml                                    -> one passed check
  - fails, listed in testing/peer-expected-failures.txt -> one passed check (an expected failure, not printed)
  - fails, not listed                                   -> a failure, printed with its reason
  - passes but listed                                   -> a failure: remove it from the list (the list only shrinks)
  - no outcome (a time bound, a collection error)       -> a failure
and a malformed or stale line of the list is a failure too. `testing/peer_update.py` prints what to change.

Skipped (a failure under BANKML_REQUIRE_ORACLE=1) without ../shared/peer or the oracle kit. Time bounds, from the
environment or these defaults: PEER_TEST_S per test, PEER_FILE_S per test file, PEER_TOTAL_S for the run.
`--reuse` judges the outcomes of the last run (build/peer/) again without running the suite (to check an edit of
the list).
"""
import os, shutil, signal, subprocess, sys, time

import oracle
import peer_update as pu

# measured on llama-server b11669 at a load average of 8-13 on 2 cores (docs/modules/peer.md): the whole baseline in
# 13 min 44 s, the longest file (test_tool_call.py) 251 s, the longest test 45 s
TEST_S = int(os.environ.get("PEER_TEST_S", "120"))
FILE_S = int(os.environ.get("PEER_FILE_S", "480"))
TOTAL_S = int(os.environ.get("PEER_TOTAL_S", "1200"))

WRAPPER = """#!/bin/bash
# written by testing/oracle_peer.py: records one start of bankml by the peer suite, then runs it unchanged
rec='{starts}'"/$(date +%s%N).$$"
{{ printf 'test\\t%s\\n' "${{PYTEST_CURRENT_TEST:-}}"; printf 'arg\\t%s\\n' "$@"; }} > "$rec.args"
exec '{bankml}' "$@" 2> >(exec tee "$rec.err" >&2)
"""


def main():
    s = oracle.Suite("oracle_peer")
    shared = oracle.shared_or_skip(s)
    peer = os.path.join(shared, "peer")
    run_sh = os.path.join(peer, "run.sh")
    baseline_path = os.path.join(peer, "baseline-llama-b11669.txt")
    if not (os.path.exists(run_sh) and os.path.exists(baseline_path)):
        oracle.skip_all(f"no peer suite at {peer} (run.sh and baseline-llama-b11669.txt)", s)
    oracle.kit_or_skip(s)
    bankml = os.path.join(oracle.ROOT, "bankml")
    if not os.access(bankml, os.X_OK):
        oracle.skip_all("no ./bankml: run make first", s)

    baseline = pu.load_ids(baseline_path)
    expected, bad = pu.load_expected()
    s.check("expected-failures list: every line is `ID<TAB>issue #N: what is missing`", not bad,
            "; ".join(bad[:10]) + (f" ... {len(bad) - 10} more" if len(bad) > 10 else ""))
    stale = [t for t in expected if t not in set(baseline)]
    s.check("expected-failures list: only baseline tests", not stale,
            "not in the baseline (remove): " + ", ".join(stale[:10]))

    top = os.path.join(oracle.ROOT, "build", "peer")
    out, starts = os.path.join(top, "bankml"), os.path.join(top, "starts")
    if "--reuse" in sys.argv[1:]:
        judge(s, baseline, expected, out, starts)
    shutil.rmtree(starts, ignore_errors=True)
    os.makedirs(starts)
    wrapper = os.path.join(top, "bankml-recorded")
    with open(wrapper, "w") as f:
        f.write(WRAPPER.format(starts=starts, bankml=bankml))
    os.chmod(wrapper, 0o755)
    env = dict(os.environ, PEER_ONLY=os.path.abspath(baseline_path), PEER_BANKML=wrapper, PEER_OUT=out,
               PEER_TEST_S=str(TEST_S), PEER_FILE_S=str(FILE_S), PEER_TOTAL_S=str(TOTAL_S))
    log = os.path.join(top, "run.log")
    t0 = time.time()
    with open(log, "w") as lf:
        # its own process group, so that a run past every bound is ended with all its pytest and servers
        p = subprocess.Popen(["sh", run_sh, "bankml"], cwd=oracle.ROOT, env=env, stdout=lf,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=TOTAL_S + FILE_S + 300)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "killed past every bound"
    wall = time.time() - t0
    print(f"peer run: {wall:.0f} s (bounds: {TEST_S} s a test, {FILE_S} s a file, {TOTAL_S} s in all), "
          f"exit {rc}; log build/peer/run.log, outcomes build/peer/bankml/results.tsv")
    if not os.path.exists(os.path.join(out, "results.tsv")):
        with open(log, errors="replace") as f:
            tail = f.read().strip().splitlines()[-5:]
        s.fail("peer run", f"no results.tsv (exit {rc}): " + " | ".join(tail))
        s.finish()
    s.check("peer run within its whole-run bound", wall < TOTAL_S + 60, f"{wall:.0f} s")
    judge(s, baseline, expected, out, starts)


def judge(s, baseline, expected, out, starts):
    """One check per baseline test from OUT/results.tsv and the start records; prints the count line and exits."""
    if not os.path.exists(os.path.join(out, "results.tsv")):
        s.fail("peer run", f"no {out}/results.tsv")
        s.finish()
    res = pu.load_results(out)
    why = pu.start_reasons(starts)
    passed, xfail, now_pass, new_fail, not_run = pu.classify(baseline, expected, res, why)
    for tid, _ in passed:
        s.ok(tid)
    for tid, r in xfail:
        s.ok(f"{tid}  (expected failure: {expected[tid]})")
    for tid, r in now_pass:
        s.fail(tid, f"passes now: remove it from testing/peer-expected-failures.txt (listed: {r})")
    for tid, r in new_fail:
        s.fail(tid, r)
    for tid, r in not_run:
        s.fail(tid, r)
    print(f"peer suite on bankml: {len(passed) + len(now_pass)} of {len(baseline)} baseline tests pass; "
          f"{len(xfail)} listed failures; {len(new_fail)} new failures; {len(now_pass)} listed but passing; "
          f"{len(not_run)} without an outcome")
    if now_pass or new_fail or not_run:
        print("  python3 testing/peer_update.py  prints the changes to make to testing/peer-expected-failures.txt")
    s.finish()


if __name__ == "__main__":
    main()
