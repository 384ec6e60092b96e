#!/usr/bin/env bash
# Installs Debian's Chromium for the report-page test (tests/analyzers/report/test_page.py), which
# renders index.html headless at 1,280 px and checks that no table or text is wider than the page.
#
#   scripts/install_chromium.sh   # as root; without root it says what to install and exits 0
#
# Idempotent: an installed chromium is not touched.
set -euo pipefail

if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    echo "install_chromium: Chromium is installed" >&2
    exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install_chromium: not installed; as root on Debian/Ubuntu: apt-get install chromium (the page test skips without it)" >&2
    exit 0
fi
echo "install_chromium: apt-get install chromium" >&2
apt-get -qq update >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
command -v chromium >/dev/null
