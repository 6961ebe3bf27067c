#!/usr/bin/env bash
# Make /usr/bin/chromium available for the headless explorer test
# (test/explorer.test.ts drives it through playwright-core, which does not
# download browsers by itself). Safe to run repeatedly: it only touches apt
# when the binary is missing, so CI pays the install cost once per image.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [[ -x "$CHROMIUM" ]]; then
  echo "chromium already present: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  exit 0
fi

# CI runs this as root; fall back to sudo for local use, and fail loudly
# rather than half-installing when neither is possible.
SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "ensure-chromium: must run as root (or with sudo available) to install chromium" >&2
    exit 1
  fi
fi

# noninteractive: no debconf prompts can block a CI job.
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y chromium

if [[ ! -x "$CHROMIUM" ]]; then
  echo "ensure-chromium: apt-get finished but $CHROMIUM is still missing" >&2
  exit 1
fi
echo "chromium installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
