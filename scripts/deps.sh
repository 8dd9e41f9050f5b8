#!/bin/sh
# Installs the Debian packages named on the command line that are missing. As root it runs
# apt-get; otherwise it prints the exact apt-get line to run and fails, so nothing half-works.
set -eu
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "gpuscope: installing Debian packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends $missing >/dev/null
else
  echo "gpuscope: missing Debian packages; run this, then try again:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi
