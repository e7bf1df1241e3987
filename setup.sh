#!/usr/bin/env bash
# Set-up and first build, on a fresh Debian or Ubuntu machine (Python 3.11+, Node 20+):
# system packages for a browser and a Vulkan adapter, a .venv from the pinned
# requirements.txt, node_modules from package-lock.json, then `python build.py`.
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing() { for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done; }

. /etc/os-release
# Debian ships a real Chromium; Ubuntu's is a snap stub, so there Playwright brings its own.
pkgs="mesa-vulkan-drivers"
python3 -c 'import ensurepip' 2>/dev/null || pkgs="$pkgs python3-venv"
[ "${ID:-}" = debian ] && pkgs="$pkgs chromium"
todo=$(missing $pkgs)
if [ -n "$todo" ]; then
  echo "setup: installing system packages: $todo"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $todo
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
if [ "${ID:-}" != debian ] && [ -z "${TINYGPT_CHROMIUM:-}" ]; then
  .venv/bin/python -m playwright install --with-deps chromium
fi

npm ci --no-audit --no-fund --loglevel=error
.venv/bin/python build.py
