#!/usr/bin/env bash
# The web view's browser tests (tests/ui) drive Debian's Chromium through Playwright; Playwright
# never downloads a browser of its own. Installs the package when it is missing; idempotent
# (apt keeps its cache outside the checkout).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
