#!/bin/sh
# install_deps.sh -- system packages the oracle suites need beyond the kit:
# nlohmann-json3-dev (the header testing/oracle_json_double.py compiles its
# oracle against). Idempotent; does nothing where apt-get is absent (the
# suite then skips, or fails under BANKML_REQUIRE_ORACLE=1).
set -eu
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_deps.sh: no apt-get; install nlohmann-json3-dev (or its json.hpp) by hand" >&2
    exit 0
fi
if dpkg -s nlohmann-json3-dev >/dev/null 2>&1; then
    exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
$SUDO apt-get install -y nlohmann-json3-dev >/dev/null 2>&1 ||
    { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y nlohmann-json3-dev >/dev/null; }
