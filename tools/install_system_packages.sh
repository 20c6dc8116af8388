#!/usr/bin/env bash
# Install the Debian packages the course needs beyond Python:
#   bubblewrap                              the sandbox of every grading kernel (always)
#   postgresql                              the PostgreSQL gradebook's tests (always; a local
#                                           server is started by the tests, never as a service)
#   chromium, chromium-driver, fonts        the browser tests in tests/e2e/ (with --browser)
#   nodejs, npm                             Node.js, to run JupyterHub's proxy (always)
#   configurable-http-proxy                 JupyterHub's proxy, from npm (`npm install -g`, the
#                                           version pinned below), for deploy/jupyterhub/ and
#                                           its smoke test tests/test_jupyterhub.py (always)
# Idempotent and quiet: installs only what is missing (apt-get first, then npm). Playwright's
# own browser download (`playwright install`) is never used: the tests point Playwright at
# /usr/bin/chromium.
# Where it cannot install (no apt-get, as on macOS or Fedora; not root and no sudo), it says
# what it could not install and what follows from each, and exits 0: without bubblewrap
# `course autograde` refuses to grade unless given --unsafe-no-sandbox, and `make demo` grades
# the demo class (the course's own notebooks) without the sandbox. README.md ("What each
# system needs") has the commands for other systems.
set -euo pipefail

CHP_VERSION=4.6.3  # configurable-http-proxy; 4.6 runs on Debian 12's Node 18 as well as newer

packages=()
command -v bwrap >/dev/null || packages+=(bubblewrap)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
# initdb: Debian keeps it in /usr/lib/postgresql/VERSION/bin, Fedora on PATH (tests/test_postgres.py)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null ||
    packages+=(postgresql)
# The browser tests use COURSE_E2E_CHROMIUM when set (tests/e2e/labui.py), else Debian's
if [ "${1:-}" = "--browser" ] && [ ! -x "${COURSE_E2E_CHROMIUM:-/usr/bin/chromium}" ]; then
    packages+=(chromium chromium-driver fonts-dejavu-core)
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# What is lost without a package, said when it could not be installed.
consequence() {
    case "$1" in
        bubblewrap) echo "no sandbox: \`course autograde\` refuses to grade unless given" \
            "--unsafe-no-sandbox (student code could then reach your files); \`make demo\`" \
            "grades the demo class (the course's own notebooks) without it; \`make test\`" \
            "fails its sandbox tests" ;;
        postgresql) echo "tests/test_postgres.py (\`make test\`) fails: it starts a PostgreSQL" \
            "server; grading with the sqlite gradebook is unaffected" ;;
        nodejs | npm | configurable-http-proxy) echo "no JupyterHub proxy: deploy/jupyterhub/ and its test" \
            "(\`make test-deep\`) fail; grading is unaffected" ;;
        *) echo "the browser tests, tests/e2e/ (\`make test\`), fail" ;;
    esac
}
cannot_install() {
    echo "install_system_packages.sh: could not install system packages ($1)." >&2
    for package in "${packages[@]}"; do
        echo "  not installed: $package: $(consequence "$package")" >&2
    done
    echo "  The commands for Debian/Ubuntu, Fedora, macOS and WSL: README.md," \
        "\"What each system needs\"." >&2
}

# configurable-http-proxy from npm, once node and npm are there (now or after apt-get below).
install_proxy() {
    command -v configurable-http-proxy >/dev/null && return 0
    if ! command -v npm >/dev/null; then
        echo "install_system_packages.sh: no npm here; install Node.js, then" \
            "npm install -g configurable-http-proxy@$CHP_VERSION" >&2
        return 0
    fi
    if ! $SUDO npm install -g --silent --no-fund --no-audit \
        "configurable-http-proxy@$CHP_VERSION" >"$log" 2>&1; then
        cat "$log" >&2
        echo "install_system_packages.sh: npm failed for configurable-http-proxy" >&2
        return 1
    fi
}

if [ ${#packages[@]} -eq 0 ]; then
    install_proxy
    exit 0
fi

if ! command -v apt-get >/dev/null; then
    command -v configurable-http-proxy >/dev/null || packages+=(configurable-http-proxy)
    cannot_install "no apt-get here"
    exit 0
fi
if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then
    command -v configurable-http-proxy >/dev/null || packages+=(configurable-http-proxy)
    cannot_install "not root, and no sudo"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq &&
       $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    cannot_install "apt-get failed, above"
    exit 1
fi
command -v bwrap >/dev/null || { echo "install_system_packages.sh: bwrap still missing" >&2; exit 1; }
install_proxy
