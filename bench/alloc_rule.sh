# bench/alloc_rule.sh — sourced (bash) by bench/run.sh and
# bench/commute/run.sh: the allocator rule every benchmark program runs
# under. Set ALLOC (thp or default) and call alloc_rule; then start each
# program with bench_cmd.
# Every system runs under one allocator rule, set on each program's command
# line (bench_cmd below, the only way the suite starts a program). A first
# touch of a 4 KiB page costs 11-14 us on some VMs (about 50x the usual):
# a system that allocates per task inside its timed window pays that where
# one that allocates once, up front, does not, and the figure is then the
# machine's, not the systems'.
#   thp      glibc malloc on transparent huge pages
#            (GLIBC_TUNABLES=glibc.malloc.hugetlb=1: glibc 2.35 or later,
#            THP "always" or "madvise"); oneTBB's own allocator, which its
#            tasks use when libtbbmalloc is installed, is asked for huge
#            pages too (TBB_MALLOC_USE_HUGE_PAGES=1);
#   default  each allocator's defaults (both variables removed).
# When thp is asked for and this machine cannot give it, the suite runs the
# default rule and says so: on the terminal, in machine.txt, at the top of
# summary.md, and as "default-fallback" in the alloc column of the CSVs.
ALLOC_ENV=()
ALLOC_LINE=""
alloc_rule() {
  local why="" thp glibc
  thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true)
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
  if [ "$ALLOC" = thp ]; then
    if [ -z "$glibc" ]; then
      why="the C library is not glibc"
    elif [ "$(printf '%s\n2.35\n' "$glibc" | sort -V | head -1)" != 2.35 ]; then
      why="glibc $glibc has no glibc.malloc.hugetlb (2.35 or later has)"
    elif [ -z "$thp" ]; then
      why="this kernel has no transparent huge pages"
    elif [ "$thp" = never ]; then
      why="transparent huge pages are off (never)"
    fi
    [ -z "$why" ] || ALLOC=default-fallback
  fi
  if [ "$ALLOC" = thp ]; then
    ALLOC_ENV=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1 TBB_MALLOC_USE_HUGE_PAGES=1)
    ALLOC_LINE="thp: glibc malloc on transparent huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1; glibc $glibc, THP $thp); oneTBB's allocator asked for huge pages too (TBB_MALLOC_USE_HUGE_PAGES=1)"
  else
    ALLOC_ENV=(-u GLIBC_TUNABLES -u TBB_MALLOC_USE_HUGE_PAGES)
    ALLOC_LINE="default: each allocator's defaults (4 KiB pages${thp:+ unless THP is always; THP $thp})"
    [ -z "$why" ] || ALLOC_LINE="FALLBACK, thp was asked for but $why; $ALLOC_LINE"
  fi
}
# A benchmark program's command line, under the allocator rule (and a
# 10-minute limit).
bench_cmd() { timeout 600 env "${ALLOC_ENV[@]}" "$@"; }
