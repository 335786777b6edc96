#!/usr/bin/env bash
# Installs what the manager's single sign-on test needs: the `oidc-provider` package from
# npm (with its dependencies, `jose` among them) into the build's target directory,
# `<target>/oidc-provider/node_modules`, where the test looks for it. Quick when that
# version is already there; needs Node.js 20 or later and npm.
set -euo pipefail

VERSION=9.13.3
root="$(cd "$(dirname "$0")/../../../.." && pwd)"
dir="${CARGO_TARGET_DIR:-$root/target}/oidc-provider"
installed="$dir/node_modules/oidc-provider/package.json"

if [ -f "$installed" ] && grep -q "\"version\": \"$VERSION\"" "$installed"; then
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "single sign-on test: node and npm are missing; install Node.js 20 or later (e.g. apt-get install -y nodejs npm)" >&2
  exit 0
fi
echo "== installing oidc-provider $VERSION for the single sign-on test"
mkdir -p "$dir"
npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "oidc-provider@$VERSION" >/dev/null
node -e "console.log('oidc-provider', require('$installed').version)"
