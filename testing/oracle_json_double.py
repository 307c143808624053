#!/usr/bin/env python3
"""oracle_json_double.py -- json_put_double (src/base/json.c) against nlohmann::json's dump() of a double.

llama-server b11669 writes probabilities, logprobs and timings with nlohmann::json 3.12.0, whose
double printer is Grisu2 plus a %g-like layout (not always the shortest round-trip form). bankml must
print the same bytes. This suite builds testing/kit_nlohmann_double.cpp with g++ against Debian's
nlohmann-json3-dev header (testing/install_deps.sh installs it), or, without it, llama.cpp's vendored
copy in ~/.cache/llama.cpp-src/vendor; BANKML_NLOHMANN_INCLUDE names another include folder. It
builds testing/json_double_driver.c with src/base/json.c, feeds both the same ~200,000 doubles (fixed
seed) and compares line by line.

Each double is one test. The doubles, by group:
  random-bits      uniformly random 64-bit patterns (every sign, exponent, NaN payloads)
  float-bits       random float32 bit patterns widened to double (logprobs are floats widened)
  float-logprob    log(u) for uniform u, rounded to float32, widened
  float-prob       u and u^k in [0, 1], rounded to float32, widened
  decimal          short decimals as timings are (3 places, ms and tokens per second), both signs
  integers         whole numbers: small, up to 2^53 and past it, powers of two, both signs
  pow10            10^k for k in [-325, 308] and their neighbours one and two ulps away
  layout-edges     neighbours of 1e-5, 1e-4, 1e15, 1e16, 1e17 and 1e21 (where the layout switches)
  subnormal        random subnormals and the ones at the edges
  extremes         0, -0, max, min normal, min subnormal, inf, -inf, NaNs and their neighbours
  known            values named in the brief (-0.49410969018936157, -28.7829132080078125, 0.1f ...)

Without g++ or the header the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
Prints `N passed, N failed, N skipped`; exits 1 on a failure.
"""
import math, os, random, shutil, struct, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

ROOT = oracle.ROOT
BUILD = os.path.join(ROOT, "build")
KIT = os.path.join(BUILD, "kit-nlohmann-double")
DRIVER = os.path.join(BUILD, "json-double-driver")
CFLAGS = ["-std=gnu11", "-D_GNU_SOURCE", "-Iinclude", "-Isrc", "-Itests", "-pthread", "-O2",
          "-Wall", "-Wextra", "-Werror"]
SEED = 20240611


def d2b(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def b2d(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def f32(x):
    """x rounded to float32 and widened back (None when it overflows float32)"""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return None


def ulps(x, n):
    """x and its n neighbours each side (as bit patterns of doubles, same sign)"""
    b = d2b(x)
    out = []
    for i in range(-n, n + 1):
        c = b + i
        if 0 <= c < 1 << 64:
            out.append(c)
    return out


def groups():
    rng = random.Random(SEED)
    g = {}
    g["random-bits"] = [rng.getrandbits(64) for _ in range(60000)]
    fb = []
    for _ in range(40000):
        b32 = rng.getrandbits(32)
        fb.append(d2b(struct.unpack("<f", struct.pack("<I", b32))[0]))
    g["float-bits"] = fb
    lp = []
    for _ in range(35000):
        u = rng.random()
        # logprobs of real tokens: mostly small, some very negative
        x = math.log(u) if u > 0 else -1e30
        if rng.random() < 0.2:
            x *= rng.choice((2.0, 10.0, 50.0))
        y = f32(x)
        lp.append(d2b(y if y is not None else -math.inf))
    lp.append(d2b(f32(-28.782913208007812)))
    g["float-logprob"] = lp
    pr = []
    for _ in range(25000):
        u = rng.random() ** rng.choice((1, 1, 2, 5, 20, 60))
        pr.append(d2b(f32(u)))
    pr += [d2b(f32(x)) for x in (1.0, 0.5, 0.1, 0.9, 0.99, 0.999, 1e-10, 1e-38, 1e-45)]
    g["float-prob"] = pr
    dec = []
    for _ in range(15000):
        x = round(rng.random() * 10 ** rng.randint(-2, 7), 3)
        dec.append(d2b(x if rng.random() < 0.9 else -x))
        t = rng.randint(1, 10**6) / rng.randint(1, 10**5)  # tokens per second, ms per token
        dec.append(d2b(t))
    g["decimal"] = dec
    ints = []
    for i in range(-2000, 2001):
        ints.append(d2b(float(i)))
    for _ in range(5000):
        n = rng.getrandbits(rng.randint(1, 70))
        ints.append(d2b(float(n) if rng.random() < 0.7 else -float(n)))
    for p in range(0, 1024):
        ints.append(d2b(2.0 ** p))
        ints.append(d2b(-(2.0 ** p)))
    for x in (2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 10 ** 15 - 1, 10 ** 15, 10 ** 15 + 1, 10 ** 16, 123456789012345678):
        ints.append(d2b(float(x)))
    g["integers"] = ints
    p10 = []
    for k in range(-325, 309):
        x = float(f"1e{k}")
        if x == 0 or math.isinf(x):
            continue
        p10 += ulps(x, 2)
        p10 += [d2b(-b2d(b)) for b in ulps(x, 1)]
        for m in (2, 3, 5, 7, 9):
            y = float(f"{m}e{k}")
            if y and not math.isinf(y):
                p10.append(d2b(y))
    g["pow10"] = p10
    edges = []
    for x in (1e-5, 1e-4, 9.99999e-5, 1e15, 1e16, 1e17, 1e21, 999999999999999.0, 9999999999999998.0, 0.001):
        edges += ulps(x, 50)
        edges += [d2b(-b2d(b)) for b in ulps(x, 3)]
    g["layout-edges"] = edges
    sub = [rng.randrange(1, 1 << 52) for _ in range(15000)]
    sub += [rng.randrange(1, 1 << rng.randint(1, 52)) | (1 << 63) for _ in range(5000)]
    sub += list(range(1, 200)) + [(1 << 52) - i for i in range(1, 200)] + [1 << i for i in range(52)]
    g["subnormal"] = sub
    ext = [0, 1 << 63, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x0010000000000000, 0x8010000000000000,
           1, 0x8000000000000001, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
           0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF]
    for b in (0x7FEFFFFFFFFFFFFF, 0x0010000000000000, 0x3FF0000000000000):
        ext += ulps(b2d(b), 100)
    for e in range(0, 2047):  # every exponent with its smallest, largest and a middle fraction
        for f in (0, 1, (1 << 51), (1 << 52) - 1):
            ext.append((e << 52) | f)
    g["extremes"] = ext
    known = [-0.49410969018936157, -28.7829132080078125, f32(0.1), 0.1, 1.0, -0.0, 1e20, 1e-7, 1.5e-7,
             f32(-0.6931471805599453), f32(0.3333333333333333), 123.456, 3.141592653589793]
    g["known"] = [d2b(x) for x in known]
    return g


def build(s):
    """builds the kit and the driver; returns None or the reason they cannot be built"""
    gxx = shutil.which("g++")
    if not gxx:
        return "g++ not found"
    inc = os.environ.get("BANKML_NLOHMANN_INCLUDE")
    cands = [inc] if inc else ["/usr/include",
                               os.path.expanduser("~/.cache/llama.cpp-src/vendor")]
    inc = next((c for c in cands if c and os.path.exists(os.path.join(c, "nlohmann", "json.hpp"))), None)
    if not inc:
        return ("nlohmann/json.hpp not found (run testing/install_deps.sh, or set "
                "BANKML_NLOHMANN_INCLUDE)")
    os.makedirs(BUILD, exist_ok=True)
    # /usr/include is on g++'s path already; naming it again breaks libstdc++'s #include_next
    flags = [] if os.path.realpath(inc) == "/usr/include" else ["-isystem", inc]
    src = os.path.join(ROOT, "testing", "kit_nlohmann_double.cpp")
    r = subprocess.run([gxx, "-std=c++17", "-O2"] + flags + ["-o", KIT, src],
                       capture_output=True, text=True)
    if r.returncode:
        s.fail("build kit-nlohmann-double", r.stderr[-2000:])
        return False
    ver = ""
    try:
        with open(os.path.join(inc, "nlohmann", "json.hpp")) as f:
            for line in f:
                if "version " in line:
                    ver = line.split("version", 1)[1].strip()
                    break
    except OSError:
        pass
    s.ok("build kit-nlohmann-double", f"header {inc}/nlohmann/json.hpp {ver}")
    cc = os.environ.get("CC", "gcc")
    r = subprocess.run([cc] + CFLAGS + ["-o", DRIVER, "testing/json_double_driver.c", "src/base/json.c", "-lm"],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        s.fail("build json-double-driver", r.stderr[-2000:])
        return False
    s.ok("build json-double-driver")
    return None


def run(exe, data):
    r = subprocess.run([exe], input=data, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{os.path.basename(exe)} exited {r.returncode}: {r.stderr[-500:]}")
    return r.stdout.split("\n")[:-1]


def main():
    s = oracle.Suite("oracle_json_double")
    why = build(s)
    if why is False:
        s.finish()
    if why:
        oracle.skip_all(why, s)
    g = groups()
    order = list(g)
    allbits = [b for k in order for b in g[k]]
    data = "".join(f"{b:016x}\n" for b in allbits)
    try:
        want = run(KIT, data)
        got = run(DRIVER, data)
    except Exception as e:
        s.fail("run", str(e))
        s.finish()
    if len(want) != len(allbits) or len(got) != len(allbits):
        s.fail("line counts", f"{len(allbits)} in, kit {len(want)}, driver {len(got)}")
        s.finish()
    i = 0
    shown = 0
    for k in order:
        bad = 0
        for b in g[k]:
            if want[i] == got[i]:
                s.passed += 1
            else:
                bad += 1
                s.failed += 1
                if shown < 30:
                    shown += 1
                    print(f"FAIL  {k} {b:016x} ({b2d(b)!r}): nlohmann {want[i]!r}, bankml {got[i]!r}")
            i += 1
        print(f"{'ok   ' if not bad else 'FAIL '} {k}: {len(g[k]) - bad}/{len(g[k])} identical", flush=True)
    # the spot values the brief names, checked against literal text too
    for x, text in ((-0.49410969018936157, "-0.49410969018936157"), (-28.7829132080078125, "-28.782913208007813")):
        j = allbits.index(d2b(x))
        s.check(f"literal {text}", want[j] == text and got[j] == text, f"nlohmann {want[j]!r}, bankml {got[j]!r}")
    s.finish()


if __name__ == "__main__":
    main()
