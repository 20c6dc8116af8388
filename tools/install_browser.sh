#!/usr/bin/env bash
# Install Debian's Chromium (and chromedriver) for the end-to-end tests in tests/e2e/.
# Idempotent and quiet: does nothing when /usr/bin/chromium is already there.
# Playwright's own browser download (`playwright install`) is not used: tests point
# Playwright at /usr/bin/chromium.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { $SUDO apt-get update -qq &&
       $SUDO apt-get install -y -qq --no-install-recommends \
           chromium chromium-driver fonts-dejavu-core; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "install_browser.sh: apt-get failed" >&2
    exit 1
fi

test -x /usr/bin/chromium || { echo "install_browser.sh: /usr/bin/chromium still missing" >&2; exit 1; }
