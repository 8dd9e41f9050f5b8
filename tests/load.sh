#!/bin/sh
# tests/load.sh: keeps every CPU busy with a burner, to run the suite on a loaded machine (the suite
# must pass there: no test may time the machine or sleep in place of waiting for a state; see
# docs/testing.md, "Under load").
#
#   tests/load.sh run CMD [ARG...]   starts the burners, runs CMD, stops them; exits with CMD's code
#   tests/load.sh start [N]          starts N burners (default: one per CPU, nproc) in the background
#   tests/load.sh stop               stops the burners `start` started
#   tests/load.sh status             says how many of them run
#
# e.g. `tests/load.sh run make check`, or, for a few tests,
# `tests/load.sh run sh -c 'cd build && ctest -R it_test_run --repeat until-fail:3'`.
# A burner is `sh -c 'while :; do :; done'` at the caller's priority: a neighbour's build, not a
# nice'd background job. Their pids are kept in $GS_LOAD_PIDS (default
# ${TMPDIR:-/tmp}/gpuscope-load-UID.pids); stop kills only those pids, and only while each is
# still a burner (its command line is checked), never by name.
set -eu
PIDS=${GS_LOAD_PIDS:-${TMPDIR:-/tmp}/gpuscope-load-$(id -u).pids}
BURN='while :; do :; done'

is_burner() { # pid: whether it is still one of ours (not a reused pid)
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF "$BURN"
}

start() {
  n=${1:-$(nproc 2>/dev/null || echo 2)}
  case $n in '' | *[!0-9]*) echo "load.sh: start takes a number of burners, not '$n'" >&2; exit 2 ;; esac
  if [ -s "$PIDS" ]; then
    echo "load.sh: burners already started ($PIDS); 'tests/load.sh stop' first" >&2
    exit 1
  fi
  : >"$PIDS"
  i=0
  while [ "$i" -lt "$n" ]; do
    sh -c "$BURN" </dev/null >/dev/null 2>&1 &
    echo $! >>"$PIDS"
    i=$((i + 1))
  done
  echo "load.sh: $n burners running (pids in $PIDS)"
}

stop() {
  [ -f "$PIDS" ] || { echo "load.sh: no burners started ($PIDS absent)"; return 0; }
  n=0
  while read -r pid; do
    if is_burner "$pid"; then
      kill "$pid" 2>/dev/null && n=$((n + 1))
    fi
  done <"$PIDS"
  rm -f "$PIDS"
  echo "load.sh: stopped $n burners"
}

case ${1:-} in
  start) shift; start "$@" ;;
  stop) stop ;;
  status)
    n=0
    if [ -f "$PIDS" ]; then
      while read -r pid; do is_burner "$pid" && n=$((n + 1)); done <"$PIDS"
    fi
    echo "load.sh: $n burners running"
    ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "load.sh: run needs a command" >&2; exit 2; }
    start
    trap stop EXIT
    trap 'exit 130' INT TERM
    set +e
    "$@"
    rc=$?
    set -e
    exit "$rc"
    ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
