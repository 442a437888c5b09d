#!/bin/sh
# Installs what building and testing need, only what is missing: Debian
# packages (as root, with apt-get) and the pinned test servers (npm ci).
set -eu
cd "$(dirname "$0")/.."

PKGS="build-essential cmake pkg-config libcurl4-openssl-dev libssl-dev \
libjansson-dev libsqlite3-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev \
libmicrohttpd-dev libpq-dev postgresql \
clang clang-format libclang-rt-dev valgrind nodejs npm python3 \
python3-dev python3-venv"

missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing="$missing $p"
done
if [ -n "$missing" ]; then
  # npm and nodejs may come from elsewhere on this machine; only ask apt for
  # them when the commands are missing too.
  want=""
  for p in $missing; do
    case "$p" in
      nodejs) command -v node >/dev/null 2>&1 || want="$want $p" ;;
      npm) command -v npm >/dev/null 2>&1 || want="$want $p" ;;
      python3) command -v python3 >/dev/null 2>&1 || want="$want $p" ;;
      *) want="$want $p" ;;
    esac
  done
  if [ -n "$want" ]; then
    echo "install-deps: installing$want"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $want
  fi
fi

# The Prometheus server and promtool scrape kncat --metrics in the tests;
# without the exporters and web assets Debian recommends.
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || {
  echo "install-deps: installing prometheus"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends prometheus
}

python3 -c 'import botocore, boto3' 2>/dev/null || {
  echo "install-deps: python3 needs boto3/botocore for the interoperability tests" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-boto3
}

# Test servers and interoperability clients, pinned by the lock file.
stamp=tests/lab/node_modules/.kn-lock-stamp
if [ ! -f "$stamp" ] || ! cmp -s tests/lab/package-lock.json "$stamp"; then
  echo "install-deps: npm ci in tests/lab"
  (cd tests/lab && npm ci --no-audit --no-fund --loglevel=error)
  cp tests/lab/package-lock.json "$stamp"
fi
