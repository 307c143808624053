#!/usr/bin/env python3
"""test_fuzz.py -- a smoke run of every libFuzzer target of tests/fuzz_*.c in `make test` (issue #22).

Each target is built as `make fuzz` builds it (clang's libFuzzer with ASan + UBSan, build/fuzz/fuzz_NAME) and run
for FUZZ_SMOKE_S seconds (60 unless told) from a copy of its committed seeds (tests/fuzz-seeds/fuzz_NAME), two
targets at a time (the machine's two cores). Per target, one check: the fuzzer exits 0, its final statistics say
it executed at least 100 inputs, and its output holds no sanitizer report, crash, leak, timeout or out-of-memory
line. A finding fails the suite with the fuzzer's last lines; the input that caused it is kept in
build/fuzz/smoke-NAME/ (libFuzzer writes crash-*/leak-*/timeout-* files there).

The long runs (10 M executions a target) are `make fuzz FUZZ_SECONDS=...` by hand; their counts are in
docs/oracles.md. Under `make asan` this suite is skipped (the targets carry the sanitizers themselves; `make test`
runs them). Without clang (and its libFuzzer runtime, Debian's libclang-rt-14-dev) it is skipped with the reason,
a failure under BANKML_REQUIRE_ORACLE=1. Standard library only."""
import glob, os, re, shutil, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_fuzz")
ROOT = oracle.ROOT
SECONDS = int(os.environ.get("FUZZ_SMOKE_S", "60"))
CC = os.environ.get("FUZZ_CC", "clang")
BAD = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|"
                 r"runtime error:|==\d+==ERROR|Test unit written to|SUMMARY: ")

if "asan" in (os.environ.get("BANKML_BIN") or ""):
    print("test_fuzz: skipped under make asan (the fuzz targets carry ASan + UBSan themselves; make test runs them)")
    print("0 passed, 0 failed, 0 skipped", flush=True)
    sys.exit(0)
if not shutil.which(CC):
    oracle.skip_all(f"{CC} is not installed (Debian 12: apt-get install clang libclang-rt-14-dev)", S)
if not oracle.find_shared():
    oracle.skip_all("../shared is missing (fuzz_tokenizer reads its vocabularies)", S)

names = sorted(os.path.basename(p)[:-2] for p in glob.glob(os.path.join(ROOT, "tests", "fuzz_*.c")))
targets = [f"build/fuzz/{n}" for n in names]
t0 = time.time()
b = subprocess.run(["make", "-s", "-j2", f"FUZZ_CC={CC}"] + targets, cwd=ROOT, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, errors="replace")
if b.returncode != 0:
    S.fail("the fuzz targets build", b.stdout[-3000:])
    S.finish()
print(f"   built {len(names)} targets in {time.time() - t0:.0f} s", flush=True)
vocab = os.path.join(oracle.find_shared(), "vocab")


def run_one(name, results):
    work = os.path.join(ROOT, "build", "fuzz", f"smoke-{name}")
    shutil.rmtree(work, ignore_errors=True)
    corpus = os.path.join(work, "corpus")
    seeds = os.path.join(ROOT, "tests", "fuzz-seeds", name)
    if os.path.isdir(seeds):
        shutil.copytree(seeds, corpus)
    else:
        os.makedirs(corpus)
    env = dict(os.environ, BANKML_FUZZ_VOCAB_DIR=vocab)
    p = subprocess.run([os.path.join(ROOT, "build", "fuzz", name), f"-max_total_time={SECONDS}", "-timeout=10",
                        "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={work}/", corpus],
                       cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace")
    results[name] = (p.returncode, p.stdout)


results = {}
for i in range(0, len(names), 2):
    ths = [threading.Thread(target=run_one, args=(n, results)) for n in names[i:i + 2]]
    for t in ths:
        t.start()
    for t in ths:
        t.join()

for n in names:
    rc, out = results[n]
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", out)
    runs = int(m.group(1)) if m else 0
    bad = [ln for ln in out.splitlines() if BAD.search(ln)]
    tail = "\n".join(out.splitlines()[-25:])
    S.check(f"{n}: {SECONDS} s from its seeds, no finding ({runs} executions)",
            rc == 0 and runs >= 100 and not bad, f"exit {rc}, {runs} executions, {bad[:3]}\n{tail}")
S.finish()
