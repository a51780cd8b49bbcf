#!/usr/bin/env bash
# Installs pto into a temporary prefix and uses it as a user's project
# would, in the build as configured and in a second build of the other MPI
# setting (built here, in BUILD_DIR/install-check-mpi-on|off, kept between
# runs): the quickstart is built against every exported target with
# find_package(pto) (pto::pto, pto::pto_shared, pto::pto_static), and with
# each pkg-config command of the README's "Using pto from your project"
# (shared with an rpath, and libpto.a with `pkg-config --static`; also
# with the build tree's pto.pc, uninstalled); a C++-only project
# (tests/install/cxx) links pto::pto_shared and pto::pto_static. Every
# program runs without LD_LIBRARY_PATH; those linked statically must not
# need libpto.so. Checks that the header, the library, the CMake package
# and pto.pc agree on the version, and that the licence, the docs (the
# README's links resolving) and the man page are installed.
#   check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The version, from its one home: include/pto/version.h.
want=$(sed -n 's/^#define PTO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$src/include/pto/version.h" |
  paste -sd.)
[[ "$want" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAILED: cannot read the version from pto/version.h: '$want'"; exit 1; }
qs="$src/examples/quickstart/quickstart.c"

fail() { echo "FAILED ($label): $*"; exit 1; }
# needs_libpto PROGRAM: whether it has libpto.so.N as a DT_NEEDED entry
needs_libpto() { readelf -d "$1" | grep -q 'NEEDED.*\[libpto\.so'; }
# run_quickstart PROGRAM WHAT: runs it with no LD_LIBRARY_PATH, checks "ok"
run_quickstart() {
  local out
  out=$(env -u LD_LIBRARY_PATH "$1" 2>&1) || { echo "$out"; fail "$2: exited with $?"; }
  grep -qE '^3 tasks, 6 blocks, [0-9]+ us: ok$' <<<"$out" || { echo "$out"; fail "$2: no '... ok' line"; }
}

# The README's pkg-config command lines (those starting "cc app.c").
readme_cc=$(awk '/^## Using pto from your project/ {s = 1; next} s && /^## / {exit}
  s && /^```/ {b = !b; next} s && b && /^cc app\.c/' "$src/README.md")
[ "$(grep -c . <<<"$readme_cc")" -ge 2 ] ||
  { echo "FAILED: README.md's 'Using pto from your project' has no 'cc app.c' lines (shared and static)"; exit 1; }

# readme_lines PKG_CONFIG_PATH DIR: the README's pkg-config lines, as
# written, for app.c = the quickstart, built in DIR and run
readme_lines() {
  local i=0 line
  mkdir -p "$2"
  cp "$qs" "$2/app.c"
  while IFS= read -r line; do
    i=$((i + 1))
    (cd "$2" && PKG_CONFIG_PATH="$1" eval "$line -o app$i") >"$tmp/log" 2>&1 ||
      { cat "$tmp/log"; fail "README line '$line' does not build"; }
    run_quickstart "$2/app$i" "README line '$line'"
    if [[ "$line" == *--static* ]]; then
      ! needs_libpto "$2/app$i" || fail "README line '$line': the program needs libpto.so"
    else
      needs_libpto "$2/app$i" || fail "README line '$line': the program does not link libpto.so"
    fi
  done <<<"$readme_cc"
}

# check_prefix PREFIX LABEL MPI(0|1)
check_prefix() {
  local prefix=$1 mpi=$3 t f libdir pc got out
  label=$2
  for f in share/doc/pto/LICENSE share/doc/pto/README.md share/doc/pto/docs/architecture.md \
    share/man/man1/pto.1 include/pto/version.h; do
    [ -s "$prefix/$f" ] || fail "the install has no $f"
  done
  # the relative links of the installed README and docs resolve there
  # (docs/python.md, the benchmark plot, ...)
  for f in "$prefix"/share/doc/pto/README.md "$prefix"/share/doc/pto/docs/*.md; do
    while IFS= read -r t; do
      [ -e "$(dirname "$f")/$t" ] || fail "${f#"$prefix"/}: its link '$t' does not resolve in the install"
    done < <(grep -oE '\]\([^)#]+' "$f" | sed 's/^](//' | grep -vE '^[a-z]+:')
  done
  libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1)
  libdir=${libdir%/pkgconfig}
  if [ "$mpi" = 1 ]; then
    grep -q 'find_dependency(MPI' "$libdir/cmake/pto/ptoConfig.cmake" ||
      fail "ptoConfig.cmake does not find MPI, which libpto links"
  fi
  # CMake: every exported target
  cmake -S "$src/tests/install" -B "$tmp/consumer-$label" -DCMAKE_PREFIX_PATH="$prefix" \
    -DQUICKSTART_SOURCE="$qs" -DPTO_EXPECT_VERSION="$want" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "find_package(pto): the consumer does not configure"; }
  cmake --build "$tmp/consumer-$label" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "the consumer does not build"; }
  for t in pto pto_shared pto_static; do
    run_quickstart "$tmp/consumer-$label/quickstart_$t" "pto::$t"
    if [ $t = pto_static ]; then
      needs_libpto "$tmp/consumer-$label/quickstart_$t" && fail "pto::$t: the program needs libpto.so"
    else
      needs_libpto "$tmp/consumer-$label/quickstart_$t" || fail "pto::$t: the program does not link libpto.so"
    fi
  done
  # CMake, a C++-only project: pto::pto_shared and pto::pto_static with the
  # plain C API, and every public header that declares functions has them
  # in extern "C" (what a C++ program calling them needs)
  cmake -S "$src/tests/install/cxx" -B "$tmp/cxx-$label" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "find_package(pto) in a C++-only project: the consumer does not configure"; }
  cmake --build "$tmp/cxx-$label" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "the C++ consumer does not build"; }
  for t in pto_shared pto_static; do
    out=$(env -u LD_LIBRARY_PATH "$tmp/cxx-$label/app_$t" 2>&1) || { echo "$out"; fail "C++ pto::$t: exited with $?"; }
    grep -q 'from C++: ok$' <<<"$out" || { echo "$out"; fail "C++ pto::$t: no '... ok' line"; }
    [ $t = pto_shared ] || ! needs_libpto "$tmp/cxx-$label/app_$t" || fail "C++ pto::$t: the program needs libpto.so"
  done
  for f in "$prefix"/include/pto/*.h; do
    if grep -q '^PTO_API' "$f" && ! grep -q 'extern "C"' "$f"; then
      fail "include/pto/${f##*/} declares PTO_API functions outside extern \"C\""
    fi
  done
  pc="$tmp/pc-$label"
  readme_lines "$libdir/pkgconfig" "$pc"
  got=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --modversion pto)
  [ "$got" = "$want" ] || fail "pto.pc says version '$got', pto/version.h says '$want'"
  cat >"$pc/v.c" <<'C'
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
  cc -std=c11 "$pc/v.c" $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs pto) \
    -Wl,-rpath,"$libdir" -o "$pc/v"
  got=$("$pc/v") || fail "pto_version() is '$got', the header says otherwise"
  [ "$got" = "$want" ] || fail "pto_version() is '$got', pto/version.h says '$want'"
  echo "install ($label): version $want in the header, pto_version(), the CMake package and pto.pc"
  echo "install ($label): pto::pto, pto::pto_shared, pto::pto_static and the README's pkg-config lines build and run"
  echo "install ($label): a C++-only project finds pto and links pto::pto_shared and pto::pto_static"
}

# has_mpi LIBPTO_SO: whether that libpto links libmpi
has_mpi() { readelf -d "$1" | grep -q 'NEEDED.*\[libmpi'; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
so=$(ls "$tmp"/prefix/lib*/libpto.so | head -1)
mpi=0 other=ON
has_mpi "$so" && mpi=1 other=OFF
check_prefix "$tmp/prefix" "MPI $([ $mpi = 1 ] && echo on || echo off)" $mpi
# The same lines against the build tree, uninstalled: its pto.pc names
# build/src and include/ (README, "Using pto from your project").
label="build tree"
readme_lines "$build" "$tmp/pc-build"
echo "build tree: the README's pkg-config lines build and run with PKG_CONFIG_PATH=$build"

# The other MPI setting: a second build of the library and the CLI only
# (a Debug build, no tests: it is here to be installed, not measured).
ob="$build/install-check-mpi-${other,,}"
if ! cmake -S "$src" -B "$ob" -DCMAKE_BUILD_TYPE=Debug -DPTO_BUILD_TESTS=OFF -DPTO_MPI=$other >"$tmp/log" 2>&1; then
  if [ $other = ON ] && grep -q 'Could NOT find MPI' "$tmp/log"; then
    echo "install: MPI is not installed here, so only the build without MPI was checked"
    exit 0
  fi
  cat "$tmp/log"
  echo "FAILED: cannot configure the PTO_MPI=$other build in $ob"
  exit 1
fi
cmake --build "$ob" --target pto_shared pto_static pto_cli >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; echo "FAILED: cannot build the PTO_MPI=$other build in $ob"; exit 1; }
cmake --install "$ob" --prefix "$tmp/prefix-other" >/dev/null
so=$(ls "$tmp"/prefix-other/lib*/libpto.so | head -1)
if [ $other = ON ]; then has_mpi "$so" || { echo "FAILED: the PTO_MPI=ON build does not link libmpi"; exit 1; }; fi
if [ $other = OFF ]; then has_mpi "$so" && { echo "FAILED: the PTO_MPI=OFF build links libmpi"; exit 1; }; fi
check_prefix "$tmp/prefix-other" "MPI ${other,,}" $([ $other = ON ] && echo 1 || echo 0)
