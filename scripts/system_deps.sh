#!/usr/bin/env bash
# Installs the Debian packages the tests use, when they are missing and apt is available.
# Without apt (or without root) it says what is missing; the tests that need them then skip with a reason.
set -u
missing=()
for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "note: apt-get not found; missing ${missing[*]} (related tests will skip)"; exit 0
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null \
  || echo "note: could not install ${missing[*]} (related tests will skip)"
exit 0
