#!/usr/bin/env bash
# Installs what the output archive's test needs: moto's S3-compatible server
# (`moto_server`, from the Python package index) into a virtual environment in the build's
# target directory, `<target>/moto/bin/moto_server`, where the test looks for it. Quick
# when that version is already there; needs Python 3.9 or later with venv.
set -euo pipefail

VERSION=5.2.5
root="$(cd "$(dirname "$0")/../../../.." && pwd)"
dir="${CARGO_TARGET_DIR:-$root/target}/moto"

if [ -x "$dir/bin/moto_server" ] && "$dir/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$VERSION')" 2>/dev/null; then
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m venv --help >/dev/null 2>&1; then
  echo "output archive test: python3 with venv is missing (e.g. apt-get install -y python3-venv)" >&2
  exit 0
fi
echo "== installing moto $VERSION (an S3-compatible server) for the output archive test"
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$VERSION"
"$dir/bin/python" -c "import moto; print('moto', moto.__version__)"
