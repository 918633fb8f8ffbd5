#!/usr/bin/env bash
# Build the isolated virtualenv for one SGLang release, CPU only.
#   fidelity/setup_venv.sh 0.5.23
# The venv lives outside the repository ($MESHSAT_FIDELITY_CACHE, default
# $HOME/.cache/meshsat-fidelity/<version>). torch is the CPU 2.13.0 wheel; sglang and
# every other package go in with --no-deps so pip can never pull a CUDA torch.
# Idempotent: a second run only re-checks.
set -euo pipefail
VERSION="${1:?usage: setup_venv.sh SGLANG_VERSION}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${MESHSAT_FIDELITY_CACHE:-$HOME/.cache/meshsat-fidelity}"
VENV="$CACHE/$VERSION"
PY="${PYTHON:-python3.11}"
if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$CACHE"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
torch_ok() {
  "$VENV/bin/python" -c 'import importlib.metadata as m,sys; sys.exit(0 if m.version("torch").startswith("2.13.0") else 1)' 2>/dev/null
}
torch_ok || "${PIP[@]}" --no-deps "torch==2.13.0"
REQ="$HERE/requirements/$VERSION.txt"
[ -f "$REQ" ] || REQ="$HERE/requirements/base.txt"
"${PIP[@]}" --no-deps -r "$REQ" "sglang==$VERSION"
"$VENV/bin/python" -m pip uninstall -y -q torchvision 2>/dev/null || true
torch_ok || { echo "setup_venv.sh: torch was replaced; expected 2.13.0" >&2; exit 1; }
echo "$VENV"
