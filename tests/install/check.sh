#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds the quickstart
# against it twice: with find_package(pto) and with pkg-config.
#   check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer/quickstart_installed"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs pto)
cc -std=c11 "$src/examples/quickstart/quickstart.c" $flags -o "$tmp/qs_pkgconfig"
LD_LIBRARY_PATH="$(dirname "$libdir"):${LD_LIBRARY_PATH:-}" "$tmp/qs_pkgconfig"
echo "install: find_package(pto) and pkg-config both build and run the quickstart"
