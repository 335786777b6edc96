#!/usr/bin/env bash
# Installs what the manager's browser test needs: headless Chromium and chromedriver
# (Debian's `chromium` and `chromium-driver`, with fonts to render pages). Idempotent
# and quick when both are there; without root it only says what is missing (the test
# then fails and says so too).
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "browser test: chromium/chromedriver missing and not root; install them with:" >&2
  echo "  sudo apt-get install -y chromium chromium-driver fonts-liberation" >&2
  exit 0
fi
echo "== installing chromium and chromium-driver for the browser test"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-liberation fonts-dejavu-core >/dev/null
chromium --version 2>/dev/null | grep -v 'unexpected operator' || true
