#!/bin/sh
# install_deps.sh -- system packages the test suites need beyond the kit:
# nlohmann-json3-dev (the header testing/oracle_json_double.py and
# testing/oracle_json_str.py compile their oracles against), golang-go (Go's
# encoding/json, the oracle testing/oracle_json_str.py runs for Ollama's bytes),
# curl (testing/test_readme_curl.py runs README's curl
# lines as written) and chromium (Debian's, headless: testing/test_ui.py
# drives the chat page through the DevTools protocol), clang with its libFuzzer runtime (testing/test_fuzz.py
# builds and smoke-runs the fuzz targets). Idempotent; does nothing where apt-get is absent (the
# suites then skip, or fail under BANKML_REQUIRE_ORACLE=1).
set -eu
PKGS="nlohmann-json3-dev golang-go curl chromium clang libclang-rt-14-dev"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_deps.sh: no apt-get; install $PKGS (or their equivalents) by hand" >&2
    exit 0
fi
MISSING=
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || MISSING="$MISSING $p"
done
[ -z "$MISSING" ] && exit 0
SUDO=
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
# shellcheck disable=SC2086
$SUDO apt-get install -y $MISSING >/dev/null 2>&1 ||
    { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y $MISSING >/dev/null; }
