"""oracle_tools_builtin.py -- llama-server b11669's built-in tools (`--tools`, GET/POST /tools) against a real
`bankml serve` beside it, both in router mode (no model) as llama.cpp's tests start them, in the same working
directory with the same HOME. Each request goes to both servers over a fixture tree rebuilt before each one
(files, a git repository with a .gitignore, junk directories, a symlinked directory, invalid UTF-8, a file over
16 KiB); the status, the Content-Type, the body's bytes and, after a write, the fixture's files are compared:
read_file (line ranges, append_loc, limits, base64 through x-resp-type), write_file, edit_file (exact and fuzzy
matches, its refusals), grep_search, file_glob_search (git ls-files and the walk, types, depth, limits, globs),
exec_shell_command (plain and streamed, exit codes, timeouts, output limits, cwd), get_info, the request's
errors (nlohmann's texts, 404s, the x-tool-cwd / x-tool-runtime rules), the 403s without --tools, a subset
--tools list, and the CORS default (localhost only) with tools on. Then bankml's own refusals (a container or
ssh runtime, ignore_case). Standard library only."""
import http.client, json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_tools_builtin")
kit = oracle.kit_or_skip(S)
BIN = os.path.abspath(os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml"))
if not shutil.which("git"):
    oracle.skip_all("git is not installed (file_glob_search and grep_search list files with git ls-files)", S)

WORK = tempfile.mkdtemp(prefix="oracle-tools-")
HOME = os.path.join(WORK, "home")
FX = os.path.join(WORK, "fx")
ENV = dict(os.environ, HOME=HOME, LC_ALL="C")

BIG = "".join(f"line {i:05d} of a file over sixteen KiB\n" for i in range(1, 801))


def build_fixture():
    if os.path.exists(FX):
        shutil.rmtree(FX)
    os.makedirs(HOME, exist_ok=True)
    with open(os.path.join(HOME, "h.txt"), "w") as f:
        f.write("in home\n")
    files = {
        "a.txt": "alpha\nbeta\ngamma\n",
        "noeol.txt": "one\ntwo",
        "empty.txt": "",
        "crlf.txt": "x\r\ny\r\n",
        "big.txt": BIG,
        "dup.txt": "dup\ndup\n",
        "smart.txt": "say \u201chello\u201d   \nit\u2019s \u2014 fine\n",
        "src/main.c": "int main(void)\n{\n    return 0; /* MARK */\n}\n",
        "src/util/u.c": "static int u; /* MARK */\nint v;\n",
        "src/util/deep/d.h": "#define D 1\n",
        "build/out.o": "obj MARK\n",
        "node_modules/m/index.js": "MARK\n",
        "project-alpha/README.md": "alpha\n",
        "project-beta/notes.txt": "beta\n",
        "space name.txt": "spaced\n",
        "repo/tracked.txt": "tracked MARK\n",
        "repo/ignored.log": "ignored MARK\n",
        "repo/.gitignore": "*.log\n",
        "repo/sub/t2.txt": "t2\n",
    }
    for rel, text in files.items():
        p = os.path.join(FX, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    with open(os.path.join(FX, "bad.bin"), "wb") as f:
        f.write(b"ok\xff\xfe bytes\n\xe2\x82 cut\nMARK \xc3\n")
    os.symlink(os.path.join(FX, "src"), os.path.join(FX, "link-src"))
    subprocess.run(["git", "init", "-q", os.path.join(FX, "repo")], check=True, env=ENV)
    subprocess.run(["git", "-C", os.path.join(FX, "repo"), "add", "tracked.txt", ".gitignore"], check=True, env=ENV)


def snapshot():
    out = []
    for d, dirs, files in os.walk(FX):
        dirs[:] = sorted(x for x in dirs if x != ".git")
        for fn in sorted(files):
            p = os.path.join(d, fn)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                out.append([os.path.relpath(p, FX), f.read().decode("latin-1")])
    return out


def call(port, method, path, body=None, headers=None, raw=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = dict(headers or {})
    data = body if raw or body is None else json.dumps(body)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    got = r.read()
    cors = sorted((k.lower(), v) for k, v in r.getheaders() if k.lower().startswith("access-control-"))
    c.close()
    return [r.status, (r.getheader("Content-Type") or "").split(";")[0], got.decode("latin-1"), cors]


def compare(L, B, label, body, headers=None, method="POST", path="/tools", raw=False, files=False):
    build_fixture()
    want = call(L.port, method, path, body, headers, raw)
    if files:
        want.append(snapshot())
    build_fixture()
    got = call(B.port, method, path, body, headers, raw)
    if files:
        got.append(snapshot())
    S.equal(label, got, want)
    return got


def tool(name, params=None, **extra):
    b = {"tool": name}
    if params is not None:
        b["params"] = params
    b.update(extra)
    return b


def fx(*p):
    return os.path.join(FX, *p)


CWD = {"x-tool-cwd": FX}

CASES = [
    # the request's own errors
    ("not JSON", b"{bad", None, True),
    ("an array body", b"[1]", None, True),
    ("no tool", {"params": {}}, None, False),
    ("tool not a string", {"tool": 5}, None, False),
    ("unknown tool", tool("nope", {}), None, False),
    ("stream not a boolean", tool("read_file", {"path": "a.txt"}, stream="yes"), CWD, False),
    ("stream on a tool without it", tool("read_file", {"path": fx("a.txt")}, stream=True), None, False),
    ("params a string", tool("read_file", "x"), None, False),
    ("params a string with x-tool-cwd", tool("read_file", "x"), CWD, False),
    ("params null with x-tool-cwd", tool("read_file", None), CWD, False),
    ("no params", tool("read_file"), None, False),
    # runtimes: b11669's refusals
    ("runtime: unknown scheme", tool("exec_shell_command", {"command": "echo hi"}), {"x-tool-runtime": "fake:x"}, False),
    ("runtime: spawn form", tool("exec_shell_command", {"command": "echo hi"}), {"x-tool-runtime": "docker:img"}, False),
    ("runtime: container option", tool("exec_shell_command", {"command": "echo hi"}),
     {"x-tool-runtime": "docker-container:--privileged"}, False),
    ("runtime: podman option", tool("read_file", {"path": "a"}), {"x-tool-runtime": "podman-container:-x"}, False),
    ("runtime: ssh option", tool("exec_shell_command", {"command": "echo hi"}),
     {"x-tool-runtime": "ssh:-oProxyCommand=touch /tmp/pwned"}, False),
    ("runtime: ssh bad char", tool("grep_search", {"path": ".", "pattern": "x"}), {"x-tool-runtime": "ssh:a b"}, False),
    # read_file
    ("read_file absolute", tool("read_file", {"path": fx("a.txt")}), None, False),
    ("read_file relative to x-tool-cwd", tool("read_file", {"path": "src/main.c"}), CWD, False),
    ("read_file: params' cwd ignored", tool("read_file", {"path": "a.txt", "cwd": "/nowhere"}), CWD, False),
    ("read_file: params' cwd alone ignored", tool("read_file", {"path": "a.txt", "cwd": FX}), None, False),
    ("read_file dot-dot", tool("read_file", {"path": "src/../a.txt"}), CWD, False),
    ("read_file range", tool("read_file", {"path": "a.txt", "start_line": 2, "end_line": 2}), CWD, False),
    ("read_file append_loc", tool("read_file", {"path": "a.txt", "append_loc": True, "start_line": 2}), CWD, False),
    ("read_file no final newline", tool("read_file", {"path": "noeol.txt"}), CWD, False),
    ("read_file empty", tool("read_file", {"path": "empty.txt"}), CWD, False),
    ("read_file CRLF", tool("read_file", {"path": "crlf.txt"}), CWD, False),
    ("read_file invalid UTF-8", tool("read_file", {"path": "bad.bin"}), CWD, False),
    ("read_file missing", tool("read_file", {"path": "nope.txt"}), CWD, False),
    ("read_file a directory", tool("read_file", {"path": "src"}), CWD, False),
    ("read_file over 16 KiB", tool("read_file", {"path": "big.txt"}), CWD, False),
    ("read_file over 16 KiB with end_line", tool("read_file", {"path": "big.txt", "end_line": 1000}), CWD, False),
    ("read_file over 16 KiB, a range", tool("read_file", {"path": "big.txt", "start_line": 700, "end_line": 705,
                                                          "append_loc": True}), CWD, False),
    ("read_file wrong-typed options (defaults)", tool("read_file", {"path": "a.txt", "start_line": "2",
                                                                    "append_loc": 1, "end_line": 2.9}), CWD, False),
    ("read_file ~", tool("read_file", {"path": "~/h.txt"}), None, False),
    ("read_file base64", tool("read_file", {"path": "bad.bin"}), {"x-tool-cwd": FX, "x-resp-type": "base64"}, False),
    ("read_file base64 of a big file", tool("read_file", {"path": "big.txt"}),
     {"x-tool-cwd": FX, "x-resp-type": "base64"}, False),
    ("read_file path not a string", tool("read_file", {"path": ["a"]}), CWD, False),
    ("read_file symlinked directory", tool("read_file", {"path": "link-src/main.c"}), CWD, False),
    # write_file
    ("write_file new, parents made", tool("write_file", {"path": "new/sub/w.txt", "content": "w\u00e9\n"}), CWD, True),
    ("write_file overwrite", tool("write_file", {"path": fx("a.txt"), "content": ""}), None, True),
    ("write_file under a file", tool("write_file", {"path": "a.txt/x", "content": "x"}), CWD, True),
    ("write_file onto a directory", tool("write_file", {"path": "src", "content": "x"}), CWD, True),
    ("write_file no content", tool("write_file", {"path": "z"}), CWD, True),
    # edit_file
    ("edit_file two edits", tool("edit_file", {"path": "a.txt", "edits": [
        {"old_text": "beta", "new_text": "BETA"}, {"old_text": "gamma\n", "new_text": "gamma\ndelta\n"}]}), CWD, True),
    ("edit_file not unique", tool("edit_file", {"path": "dup.txt", "edits": [{"old_text": "dup", "new_text": "x"}]}),
     CWD, True),
    ("edit_file overlap", tool("edit_file", {"path": "a.txt", "edits": [
        {"old_text": "alpha\nbeta", "new_text": "a"}, {"old_text": "beta", "new_text": "b"}]}), CWD, True),
    ("edit_file overlap, reversed", tool("edit_file", {"path": "a.txt", "edits": [
        {"old_text": "beta", "new_text": "b"}, {"old_text": "alpha\nbeta", "new_text": "a"}]}), CWD, True),
    ("edit_file not found", tool("edit_file", {"path": "a.txt", "edits": [{"old_text": "zeta", "new_text": "x"}]}),
     CWD, True),
    ("edit_file fuzzy quotes and spaces", tool("edit_file", {"path": "smart.txt", "edits": [
        {"old_text": "say \"hello\"", "new_text": "say 'bye'"}]}), CWD, True),
    ("edit_file fuzzy dash", tool("edit_file", {"path": "smart.txt", "edits": [
        {"old_text": "it's - fine", "new_text": "ok"}]}), CWD, True),
    ("edit_file fuzzy, two lines", tool("edit_file", {"path": "smart.txt", "edits": [
        {"old_text": "say \"hello\"", "new_text": "A"}, {"old_text": "- fine", "new_text": "B"}]}), CWD, True),
    ("edit_file fuzzy, one line twice", tool("edit_file", {"path": "smart.txt", "edits": [
        {"old_text": "say", "new_text": "A"}, {"old_text": "\"hello\"", "new_text": "B"}]}), CWD, True),
    ("edit_file fuzzy, across lines", tool("edit_file", {"path": "smart.txt", "edits": [
        {"old_text": "\"hello\"\nit's", "new_text": "C"}]}), CWD, True),
    ("edit_file fuzzy beside an exact one", tool("edit_file", {"path": "smart.txt", "edits": [
        {"old_text": "fine", "new_text": "F"}, {"old_text": "it's -", "new_text": "G"}]}), CWD, True),
    ("edit_file no change", tool("edit_file", {"path": "a.txt", "edits": [{"old_text": "beta", "new_text": "beta"}]}),
     CWD, True),
    ("edit_file empty old_text", tool("edit_file", {"path": "a.txt", "edits": [
        {"old_text": "beta", "new_text": "b"}, {"old_text": "", "new_text": "x"}]}), CWD, True),
    ("edit_file edits not an array", tool("edit_file", {"path": "a.txt", "edits": {}}), CWD, True),
    ("edit_file edits empty", tool("edit_file", {"path": "a.txt", "edits": []}), CWD, True),
    ("edit_file an edit not an object", tool("edit_file", {"path": "a.txt", "edits": [3]}), CWD, True),
    ("edit_file no new_text", tool("edit_file", {"path": "a.txt", "edits": [{"old_text": "beta"}]}), CWD, True),
    ("edit_file missing file", tool("edit_file", {"path": "nope", "edits": [{"old_text": "a", "new_text": "b"}]}),
     CWD, True),
    ("edit_file no edits", tool("edit_file", {"path": "a.txt"}), CWD, True),
    # grep_search
    ("grep_search a tree", tool("grep_search", {"path": ".", "pattern": "MARK"}), CWD, False),
    ("grep_search include", tool("grep_search", {"path": FX, "pattern": "MARK", "include": "*.c"}), None, False),
    ("grep_search include with /", tool("grep_search", {"path": FX, "pattern": "MARK", "include": "util/*.c"}),
     None, False),
    ("grep_search exclude", tool("grep_search", {"path": FX, "pattern": "MARK", "exclude": "src/**"}), None, False),
    ("grep_search a git repository", tool("grep_search", {"path": "repo", "pattern": "MARK"}), CWD, False),
    ("grep_search one file", tool("grep_search", {"path": "src/main.c", "pattern": "return",
                                                  "return_line_numbers": True}), CWD, False),
    ("grep_search context", tool("grep_search", {"path": "big.txt", "pattern": "line 0040[05]",
                                                 "context_lines": 2}), CWD, False),
    ("grep_search literal", tool("grep_search", {"path": ".", "pattern": "(void)", "literal": True}), CWD, False),
    ("grep_search regex classes", tool("grep_search", {"path": "src", "pattern": "^\\s+return \\d;"}), CWD, False),
    ("grep_search limit", tool("grep_search", {"path": "big.txt", "pattern": "line"}), CWD, False),
    ("grep_search invalid regex", tool("grep_search", {"path": ".", "pattern": "(ab"}), CWD, False),
    ("grep_search invalid bracket", tool("grep_search", {"path": ".", "pattern": "[ab"}), CWD, False),
    ("grep_search missing path", tool("grep_search", {"path": "nowhere", "pattern": "x"}), CWD, False),
    ("grep_search no pattern", tool("grep_search", {"path": "."}), CWD, False),
    ("grep_search invalid UTF-8 lines", tool("grep_search", {"path": "bad.bin", "pattern": "ok|MARK"}), CWD, False),
    ("grep_search exclude with a class", tool("grep_search", {"path": FX, "pattern": "MARK", "exclude": "[b-r]*"}),
     None, False),
    ("grep_search include and exclude with /", tool("grep_search", {"path": FX, "pattern": "MARK",
                                                                    "include": "src/**", "exclude": "util/*"}),
     None, False),
    # file_glob_search
    ("glob files (walk)", tool("file_glob_search", {"path": "."}), CWD, False),
    ("glob dirs", tool("file_glob_search", {"path": FX, "type": "dir"}), None, False),
    ("glob all *proj*", tool("file_glob_search", {"path": FX, "type": "all", "include": "*proj*"}), None, False),
    ("glob depth 1", tool("file_glob_search", {"path": FX, "max_depth": 1}), None, False),
    ("glob depth 2 all", tool("file_glob_search", {"path": FX, "max_depth": 2, "type": "all"}), None, False),
    ("glob negative depth", tool("file_glob_search", {"path": FX, "max_depth": -3}), None, False),
    ("glob limit", tool("file_glob_search", {"path": FX, "limit": 2}), None, False),
    ("glob limit 0", tool("file_glob_search", {"path": FX, "limit": 0}), None, False),
    ("glob limit over 100", tool("file_glob_search", {"path": FX, "limit": 1000, "include": "*.c"}), None, False),
    ("glob invalid type", tool("file_glob_search", {"path": FX, "type": "bogus"}), None, False),
    ("glob a git repository", tool("file_glob_search", {"path": "repo"}), CWD, False),
    ("glob a git repository, depth 1", tool("file_glob_search", {"path": "repo", "max_depth": 1}), CWD, False),
    ("glob a git repository, dirs", tool("file_glob_search", {"path": "repo", "type": "all"}), CWD, False),
    ("glob path with /", tool("file_glob_search", {"path": FX, "include": "src/**/*.c"}), None, False),
    ("glob anchored **/", tool("file_glob_search", {"path": FX, "include": "**/u.c"}), None, False),
    ("glob class", tool("file_glob_search", {"path": FX, "include": "[a-b]*.txt", "exclude": "[!a]*"}), None, False),
    ("glob ?", tool("file_glob_search", {"path": FX, "include": "?.txt"}), None, False),
    ("glob missing", tool("file_glob_search", {"path": "nowhere"}), CWD, False),
    ("glob a file", tool("file_glob_search", {"path": "a.txt"}), CWD, False),
    ("glob no path", tool("file_glob_search", {}), CWD, False),
    ("glob .. above", tool("file_glob_search", {"path": "src/..", "type": "dir", "max_depth": 1}), CWD, False),
    # exec_shell_command
    ("exec echo", tool("exec_shell_command", {"command": "echo hello"}), None, False),
    ("exec exit code and stderr", tool("exec_shell_command", {"command": "echo out; echo err 1>&2; exit 7"}), None,
     False),
    ("exec in x-tool-cwd", tool("exec_shell_command", {"command": "pwd; ls src"}), CWD, False),
    ("exec writes a file", tool("exec_shell_command", {"command": "echo made > made.txt"}), CWD, True),
    ("exec timeout", tool("exec_shell_command", {"command": "echo start; sleep 5", "timeout": 1}), None, False),
    ("exec max_output_size", tool("exec_shell_command", {"command": "printf 0123456789", "max_output_size": 4}),
     None, False),
    ("exec output over 16 KiB", tool("exec_shell_command", {"command": "cat big.txt"}), CWD, False),
    ("exec stdin is closed", tool("exec_shell_command", {"command": "cat; echo after"}), None, False),
    ("exec a missing x-tool-cwd", tool("exec_shell_command", {"command": "echo x"}), {"x-tool-cwd": "/nowhere/x"},
     False),
    ("exec invalid UTF-8", tool("exec_shell_command", {"command": "printf 'a\\377b\\n'"}), None, False),
    ("exec no command", tool("exec_shell_command", {}), None, False),
    ("exec stream", tool("exec_shell_command", {"command": "echo hello"}, stream=True), None, False),
    ("exec stream exit code", tool("exec_shell_command", {"command": "printf 'x'; exit 4"}, stream=True), None, False),
    ("exec stream no command", tool("exec_shell_command", {}, stream=True), None, False),
    ("exec stream bad runtime", tool("exec_shell_command", {"command": "echo x"}, stream=True),
     {"x-tool-runtime": "nope"}, False),
    ("exec stream stderr and exit", tool("exec_shell_command", {"command": "echo e 1>&2; exit 2"}, stream=True),
     None, False),
    ("exec stream in x-tool-cwd", tool("exec_shell_command", {"command": "pwd"}, stream=True), CWD, False),
    ("exec stream false", tool("exec_shell_command", {"command": "echo y"}, stream=False), None, False),
    # get_info
    ("get_info", tool("get_info", {}), None, False),
    ("get_info in x-tool-cwd", tool("get_info", {}), CWD, False),
]


def tools_server_pair(flags_l, flags_b, name):
    L = oracle.Server([kit.tool("llama-server"), "--host", "127.0.0.1", "--port", "{port}", "--no-webui",
                       *flags_l], name="llama-" + name, env=ENV)
    B = oracle.Server([BIN, "serve", "--listen", "127.0.0.1:{port}", *flags_b], name="bankml-" + name, env=ENV)
    return L, B


old = os.getcwd()
os.chdir(WORK)
try:
    build_fixture()
    L, B = tools_server_pair(["--tools", "all"], ["--tools", "all"], "tools")
    with L, B:
        compare(L, B, "GET /tools", None, method="GET")
        for label, body, headers, files in CASES:
            compare(L, B, label, body, headers, raw=isinstance(body, bytes), files=files)
        for origin in ["http://localhost:8080", "http://127.0.0.1", "http://evil.com", None]:
            h = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Authorization"}
            if origin:
                h["Origin"] = origin
            compare(L, B, f"CORS with --tools: OPTIONS Origin {origin!r}", None, h, method="OPTIONS",
                    path="/completions")
        # bankml's refusals: what b11669 would run elsewhere (a container, ssh) or match as std::regex's icase
        for label, body, headers in [
                ("a running container", tool("exec_shell_command", {"command": "echo hi"}),
                 {"x-tool-runtime": "docker-container:abc123"}),
                ("ssh", tool("read_file", {"path": "a"}), {"x-tool-runtime": "ssh:user@host"}),
                ("ignore_case", tool("grep_search", {"path": FX, "pattern": "mark", "ignore_case": True}), None)]:
            got = call(B.port, "POST", "/tools", json.dumps(body), headers, raw=True)
            S.equal(f"bankml refuses {label}: 501", got[0], 501)
            S.check(f"bankml refuses {label}: the reason", "bankml" in got[2] and "not_supported_error" in got[2],
                    got[2])
    L, B = tools_server_pair([], [], "notools")
    with L, B:
        for method in ["GET", "POST"]:
            compare(L, B, f"no --tools: {method} /tools", tool("read_file", {"path": "a"}) if method == "POST" else None,
                    method=method)
        compare(L, B, "no --tools: CORS default", None, {"Origin": "http://evil.com", "Access-Control-Request-Method":
                                                          "POST"}, method="OPTIONS", path="/completions")
    L, B = tools_server_pair(["--tools", "read_file,grep_search"], ["--tools", "read_file,grep_search"], "some")
    with L, B:
        compare(L, B, "--tools read_file,grep_search: GET /tools", None, method="GET")
        compare(L, B, "--tools read_file,grep_search: a tool not enabled", tool("exec_shell_command",
                                                                                {"command": "echo"}))
    p = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:0", "--tools", "read_file,nope"], capture_output=True,
                       text=True, timeout=30, env=ENV)
    S.equal("--tools with an unknown name: refused at start", (p.returncode, p.stderr.strip().splitlines()[-1:]),
            (1, ['bankml serve: tools setup failed: unknown tool "nope". available tools: read_file, '
                 'file_glob_search, grep_search, exec_shell_command, write_file, edit_file, get_info']))
    p = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:0", "--tools", "all", "--tools-runtime", "docker:x"],
                       capture_output=True, text=True, timeout=30, env=ENV)
    S.check("--tools-runtime: refused at start with the reason", p.returncode == 2 and "not reproduced" in p.stderr,
            p.stderr)
finally:
    os.chdir(old)
    shutil.rmtree(WORK, ignore_errors=True)
S.finish()
