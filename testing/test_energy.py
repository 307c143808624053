"""test_energy.py -- the RAPL energy of each completion in /bankml/metrics (energy_j, joules_per_token, and the
totals; spec §2.3) and /bankml/usage's package_watts, read from $BANKML_RAPL_DIR (a stand-in for
/sys/class/powercap/intel-rapl:0, which this machine may not have): a counter that does not move gives exactly 0 J;
one a thread advances gives energy over the completion and joules per token = energy / completion tokens; no
counter gives null. Standard library only; needs ../shared/models/stories260K.gguf. Ends with
"N passed, N failed, N skipped"."""
import os, shutil, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("test_energy")
shared = oracle.shared_or_skip(S)
MODEL = os.path.join(shared, "models", "stories260K.gguf")


def write(d, name, v):
    tmp = os.path.join(d, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(f"{v}\n")
    os.replace(tmp, os.path.join(d, name))


def serve(fork, rapl):
    env = dict(os.environ, BANKML_RAPL_DIR=rapl)
    return oracle.Server.bankml(MODEL, extra=["--fork", fork], name="bankml-energy", env=env)


def last(srv):
    st, m = srv.get("/bankml/metrics")
    return m if st == 200 else {}


def run():
    d = tempfile.mkdtemp(prefix="bankml-rapl-")
    fork = oracle.pinned_fork(MODEL, prefix="bankml-energy-")
    try:
        write(d, "energy_uj", 5000000)
        write(d, "max_energy_range_uj", 262143328850)
        body = {"prompt": "Once upon a time", "n_predict": 12, "temperature": 0}
        with serve(fork, d) as B:
            B.post("/completion", body)
            m = last(B)
            r = m.get("records", [{}])[-1]
            S.equal("a counter that does not move: 0 J exactly", [r.get("energy_j"), r.get("joules_per_token"),
                                                                  m.get("energy_j"), m.get("joules_per_token")],
                    [0.0, 0.0, 0.0, 0.0])
            stop = []

            def tick():   # 1 J per second, in 1 ms steps
                v = 5000000
                while not stop:
                    v += 1000
                    write(d, "energy_uj", v)
                    time.sleep(0.001)

            th = threading.Thread(target=tick)
            th.start()
            try:
                body = {"prompt": "Once upon a time", "n_predict": 200, "temperature": 0, "ignore_eos": True}
                B.post("/completion", body)
                m = last(B)
                r = m["records"][-1]
                e = r.get("energy_j")
                S.check("a moving counter: energy over the completion", isinstance(e, float) and e > 0, str(r))
                S.check("joules_per_token = energy_j / completion_tokens",
                        e is not None and r["completion_tokens"] == 200 and
                        abs(r["joules_per_token"] - e / 200) <= 1e-12 * max(1.0, e), str(r))
                S.check("totals: the sum over the measured completions", abs(m["energy_j"] - e) < 1e-9 and
                        abs(m["joules_per_token"] - e / 212) < 1e-12, str({k: m[k] for k in ("energy_j",
                                                                                          "joules_per_token")}))
                st, u = B.get("/bankml/usage")
                w = u.get("package_watts")
                S.check("/bankml/usage: package_watts from the counter", isinstance(w, float) and w > 0, str(u))
            finally:
                stop.append(1)
                th.join()
        with serve(fork, os.path.join(d, "absent")) as B:
            B.post("/completion", {"prompt": "Once", "n_predict": 2})
            m = last(B)
            r = m["records"][-1]
            S.equal("no counter: null", [r.get("energy_j"), r.get("joules_per_token"), m.get("energy_j"),
                                         m.get("joules_per_token")], [None, None, None, None])
            st, u = B.get("/bankml/usage")
            S.equal("no counter: package_watts null", u.get("package_watts"), None)
    finally:
        shutil.rmtree(d, ignore_errors=True)


S.run("harness", run)
S.finish()
