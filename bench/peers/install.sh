#!/usr/bin/env bash
# Install the peers that bench/run.sh compares vlad with, from the package
# registries, on a fresh Debian (bookworm) machine:
#   - Chez Scheme (Debian package `chezscheme`, command `scheme`)
#   - a Python venv in bench/peers/.venv with HIPS autograd and JAX (CPU)
#   - optionally PyTorch (pass --torch; the PyPI wheel is large: it pulls in
#     CUDA libraries even though only the CPU is used here)
# A peer that fails to install is reported and skipped; run.sh skips whatever
# is missing.  Re-running is cheap: installed pieces are kept.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
want_torch=0
for a in "$@"; do
  case "$a" in
    --torch) want_torch=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
status=0
sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"

# --- Chez Scheme --------------------------------------------------------------
if command -v scheme >/dev/null 2>&1 || command -v chezscheme >/dev/null 2>&1; then
  echo "chez: already installed"
else
  echo "chez: installing the Debian package chezscheme"
  if $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chezscheme; then
    echo "chez: ok"
  else
    echo "chez: FAILED to install (run.sh will skip it)"; status=1
  fi
fi

# --- Python peers ---------------------------------------------------------------
py="${PYTHON:-python3}"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  if ! "$py" -m venv "$venv"; then
    echo "python: cannot create a venv ($py -m venv); trying apt python3-venv"
    $sudo apt-get install -y -qq python3-venv python3-pip && "$py" -m venv "$venv" || { echo "python: FAILED"; exit 1; }
  fi
fi
pip="$venv/bin/python -m pip"
$pip install -q --upgrade pip >/dev/null 2>&1 || true
for pkg in numpy autograd "jax[cpu]"; do
  if $pip install -q "$pkg"; then echo "python: $pkg ok"; else echo "python: $pkg FAILED (run.sh will skip it)"; status=1; fi
done
if [ "$want_torch" = 1 ]; then
  if $pip install -q torch; then echo "python: torch ok"; else echo "python: torch FAILED (optional; skipped)"; fi
else
  echo "python: torch not requested (pass --torch to add it)"
fi
"$venv/bin/python" - <<'PY'
import importlib
for m in ("numpy", "autograd", "jax", "torch"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m} {getattr(mod, '__version__', '?')}")
    except Exception as e:
        print(f"  {m}: not available ({type(e).__name__})")
PY
exit $status
