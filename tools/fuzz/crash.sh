#!/bin/bash
# Crash fuzzing: random, mostly ill-typed programs (gen_junk.py) run by one
# binary, by `vlad FILE` and by `vlad test FILE`; prints the seeds where vlad
# panicked ("internal error", exit 70), died of a signal, or ran past the
# timeout (a hang under --max-steps). A clear error (exit 1) or a limit (3) is
# the right answer to such a program.
#
#   tools/fuzz/crash.sh BIN FIRST-LAST [FLAGS]
#   GEN=gen_rev.py tools/fuzz/crash.sh ...   reversible procedures instead (gen_rev.py)
#
# Programs that crash are kept as $TMPDIR/vlad-crash-SEED.vlad.
set -u
BIN=$1; R=$2; shift 2
dir=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}
first=${R%-*}; last=${R#*-}
bad=0
for s in $(seq "$first" "$last"); do
  f=$tmp/vlad-crash-$s.vlad
  python3 "$dir/${GEN:-gen_junk.py}" "$s" > "$f"
  ok=1
  for mode in run test; do
    out=$(timeout 20 "$BIN" $mode --max-steps 2000000 "$@" "$f" 2>&1 </dev/null)
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 1 ] && [ $rc -ne 3 ] || grep -q "internal error\|panicked" <<<"$out"; then
      echo "seed $s ($mode): exit $rc: $(grep -m1 "internal error\|panicked" <<<"$out" | cut -c1-200)"
      ok=0
    fi
  done
  if [ $ok = 1 ]; then rm -f "$f"; else bad=$((bad + 1)); fi
done
echo "$bad of $((last - first + 1)) crashed"
