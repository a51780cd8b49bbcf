#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds the quickstart
# against it twice: with find_package(pto) and with pkg-config; checks that
# the header, the library, the CMake package and pto.pc agree on the version,
# and that the licence, the docs and the man page are installed.
#   check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# The version, from its one home: include/pto/version.h.
want=$(sed -n 's/^#define PTO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$src/include/pto/version.h" |
  paste -sd.)
[[ "$want" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAILED: cannot read the version from pto/version.h: '$want'"; exit 1; }
for f in share/doc/pto/LICENSE share/doc/pto/README.md share/doc/pto/architecture.md share/man/man1/pto.1 \
  include/pto/version.h; do
  [ -s "$tmp/prefix/$f" ] || { echo "FAILED: the install has no $f"; exit 1; }
done
cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" -DPTO_EXPECT_VERSION="$want" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer/quickstart_installed"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs pto)
cc -std=c11 "$src/examples/quickstart/quickstart.c" $flags -o "$tmp/qs_pkgconfig"
LD_LIBRARY_PATH="$(dirname "$libdir"):${LD_LIBRARY_PATH:-}" "$tmp/qs_pkgconfig"
got=$(PKG_CONFIG_PATH="$libdir" pkg-config --modversion pto)
[ "$got" = "$want" ] || { echo "FAILED: pto.pc says version '$got', pto/version.h says '$want'"; exit 1; }
cat >"$tmp/v.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <pto/pto.h>
int main(void) {
  char h[32];
  snprintf(h, sizeof h, "%d.%d.%d", PTO_VERSION_MAJOR, PTO_VERSION_MINOR, PTO_VERSION_PATCH);
  printf("%s\n", pto_version());
  return strcmp(h, pto_version()) != 0;
}
C
cc -std=c11 "$tmp/v.c" $flags -o "$tmp/v"
got=$(LD_LIBRARY_PATH="$(dirname "$libdir"):${LD_LIBRARY_PATH:-}" "$tmp/v") ||
  { echo "FAILED: pto_version() is '$got', the header says otherwise"; exit 1; }
[ "$got" = "$want" ] || { echo "FAILED: pto_version() is '$got', pto/version.h says '$want'"; exit 1; }
echo "install: version $want in the header, pto_version(), the CMake package and pto.pc"
echo "install: find_package(pto) and pkg-config both build and run the quickstart"
