"""test_header_info.py -- what /api/tags and /api/show say of each registry entry from its header alone
(engine_header_info, the seed's header_info): `bankml` {native, reason, file, found} with the first gate's reason
for stories260K (plays), a copy whose architecture reads `mamba` (the plan refuses it), one whose first tensor has
type 99 (the guard refuses it), one cut inside its header (the guard needs more bytes), one pinned and then removed;
/api/show nests the same object under bankml.native and lists the completion capability only for a file that
plays; a listing loads nothing (/api/ps holds the startup model only). Standard library only; needs ../shared/models/stories260K.gguf.
Ends with "N passed, N failed, N skipped"."""
import json, os, shutil, struct, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("test_header_info")
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
STORIES = os.path.join(shared, "models", "stories260K.gguf")


def variants(d):
    """name -> bytes of the GGUF variants."""
    src = open(STORIES, "rb").read()
    i = src.find(b"general.architecture")
    j = src.find(b"llama", i + 20)
    mamba = bytearray(src)
    mamba[j:j + 5] = b"mamba"
    t = src.find(b"token_embd.weight")
    n_dims = struct.unpack("<I", src[t + 17:t + 21])[0]
    at = t + 21 + 8 * n_dims
    badtype = bytearray(src)
    badtype[at:at + 4] = struct.pack("<I", 99)
    return {"mamba": bytes(mamba), "badtype": bytes(badtype), "cut": src[:300], "gone": src[:1000]}


def run():
    d = tempfile.mkdtemp(prefix="bankml-header-info-")
    try:
        for name, data in variants(d).items():
            with open(os.path.join(d, name + ".gguf"), "wb") as f:
                f.write(data)
            p = subprocess.run([BIN, "pin", os.path.join(d, name + ".gguf"), "--fork", os.path.join(d, "r.FORK.json"),
                                "--write"], capture_output=True, text=True)
            S.check(f"pin {name}", p.returncode == 0, p.stderr[-300:])
        os.remove(os.path.join(d, "gone.gguf"))
        fork = os.path.join(d, "s.FORK.json")
        subprocess.run([BIN, "pin", STORIES, "--fork", fork, "--write"], check=True, capture_output=True)
        srv = oracle.Server.bankml(STORIES, extra=["--fork", fork, "--registry", d], name="bankml-header-info")
        with srv:
            st, tags = srv.get("/api/tags")
            got = {m["name"]: m["bankml"] for m in tags["models"]} if st == 200 else {}
            plan = "bankML's native forward pass does not play it: architecture mamba is not supported ("
            want = {
                "stories260k:latest": {"native": True, "reason": None, "file": "stories260K.gguf", "found": True},
                "cut:latest": {"native": False, "reason": "the guard needs more header bytes: the file is truncated",
                               "file": "cut.gguf", "found": True},
                "gone:latest": {"native": False, "reason": "pinned, but the file is not on this machine",
                                "file": "gone.gguf", "found": False},
            }
            for k, v in want.items():
                S.equal(f"/api/tags {k}", got.get(k), v)
            m = got.get("mamba:latest", {})
            S.check("/api/tags mamba:latest: the plan's reason", m.get("native") is False and
                    str(m.get("reason", "")).startswith(plan) and m.get("found") is True, json.dumps(m))
            b = got.get("badtype:latest", {})
            S.check("/api/tags badtype:latest: the guard's reason", b.get("native") is False and
                    str(b.get("reason", "")).startswith("the guard refuses it: ") and "99" in b.get("reason", ""),
                    json.dumps(b))
            for name, caps in (("stories260k", ["completion"]), ("mamba", []), ("cut", [])):
                st, show = srv.post("/api/show", {"model": name})
                S.equal(f"/api/show {name}: bankml.native and capabilities",
                        [st, show.get("bankml", {}).get("native"), show.get("capabilities")],
                        [200, got.get(name + ":latest"), caps])
            st, ps = srv.get("/api/ps")
            S.equal("a listing loads nothing: /api/ps holds the startup model only", [st, [x["name"] for x in
                    ps.get("models", [])]], [200, ["stories260k:latest"]])
    finally:
        shutil.rmtree(d, ignore_errors=True)


S.run("harness", run)
S.finish()
