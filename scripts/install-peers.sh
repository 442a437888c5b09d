#!/bin/sh
# Installs the real peers the interoperability tests and benchmarks run
# next to libkinesis (never part of the product): the KCL 2.x and 3.x, the
# KPL and the MultiLangDaemon, pinned in tests/lab/java/pom.xml, fetched
# from Maven Central into tests/lab/java/.m2 and built with the lab's Java
# harness (tests/lab/README.md).  Installs a JDK and Maven with apt-get
# when missing.  Only what changed is rebuilt.
set -eu
cd "$(dirname "$0")/.."

if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  echo "install-peers: installing a JDK and Maven"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    openjdk-17-jdk-headless maven
fi

# make interop runs its tests with pytest
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install -q pytest

KCLPY=amazon_kclpy==3.2.0
K=tests/lab/kclpy
if [ "$(cat $K/.kn-version 2>/dev/null)" != "$KCLPY" ]; then
  echo "install-peers: $KCLPY into $K"
  rm -rf $K && mkdir -p $K/dl
  python3 -m pip download -q --no-deps --no-binary :all: -d $K/dl "$KCLPY"
  tar -xzf $K/dl/*.tar.gz -C $K/dl --wildcards '*/amazon_kclpy/*.py'
  mv $K/dl/*/amazon_kclpy $K/amazon_kclpy && rm -rf $K/dl
  echo "$KCLPY" > $K/.kn-version
fi

J=tests/lab/java
stamp=$J/.m2/.kn-peers-stamp
sum=$(find $J -path $J/.m2 -prune -o -name target -prune -o -type f \
        \( -name pom.xml -o -name '*.java' \) -print | LC_ALL=C sort | xargs cat | sha256sum)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] \
   && [ -d $J/kcl2/target/lib ] && [ -d $J/kcl3/target/lib ] \
   && [ -d $J/kpl/target/lib ] && [ -d $J/multilang/target/lib ]; then
  exit 0
fi
echo "install-peers: mvn package in $J"
(cd $J && mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$PWD/.m2" package) \
  || { echo "install-peers: mvn failed" >&2; exit 1; }
echo "$sum" > "$stamp"
