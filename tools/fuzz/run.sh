#!/bin/bash
# Differential fuzzing of the AD paths: random VLAD programs (gen.py: list walks,
# shape tests, closures, nested gradient-R/F, derivative-F/R, hvp, hvp-RR, exact
# and large integer constants) run by two binaries, or by one binary with two
# sets of flags; prints the seeds whose outputs (stdout and stderr) differ.
#
#   tools/fuzz/run.sh A B N [FLAGS]         binaries A and B, seeds 1..N, both with FLAGS
#   tools/fuzz/run.sh A B FIRST-LAST ...    seeds FIRST..LAST instead
#   tools/fuzz/run.sh A A N "" --no-tape    one binary: the tape against the transforms
#   GEN=gen_sweeps.py tools/fuzz/run.sh ...   programs aimed at gradient-F's forward
#                                             sweeps (gen_sweeps.py) instead of gen.py's
#   GEN=gen_jac.py tools/fuzz/run.sh ...      programs aimed at jacobian-F and hessian
#                                             (gen_jac.py: their sweeps)
#   GEN=gen_loops.py tools/fuzz/run.sh ...    programs aimed at the slots of loops
#                                             (gen_loops.py)
#   GEN=gen_listref.py tools/fuzz/run.sh ...  gen.py's programs with list-ref for
#                                             car/cadr (its rules; with --no-tape)
#   GEN=gen_nested.py tools/fuzz/run.sh ...   derivatives nested 3-4 deep, F/R mixes
#   GEN=gen_hof.py tools/fuzz/run.sh ...      loops calling procedures their frames hold
#                                             (compare --jit-after 1 with --no-jit)
#   GEN=gen_hofad.py tools/fuzz/run.sh ...    the same under derivatives (the loops
#                                             computing with the levels' reals)
#
# Programs that differ are kept as $TMPDIR/vlad-fuzz-SEED.vlad. Before a change
# that must not change values, run the previous build against the new one (a few
# hundred seeds, also with --no-tape and --metered).
set -u
A=$1; B=$2; N=$3; FA=${4:-}; FB=${5:-${4:-}}
dir=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}
nd=0
case $N in
  *-*) first=${N%-*}; last=${N#*-} ;;
  *) first=1; last=$N ;;
esac
for s in $(seq "$first" "$last"); do
  f="$tmp/vlad-fuzz-$s.vlad"
  python3 "$dir/${GEN:-gen.py}" "$s" > "$f"
  # shellcheck disable=SC2086
  oa=$(timeout 20 "$A" $FA "$f" 2>&1 < /dev/null)
  # shellcheck disable=SC2086
  ob=$(timeout 20 "$B" $FB "$f" 2>&1 < /dev/null)
  if [ "$oa" != "$ob" ]; then echo "differ: seed $s ($f)"; nd=$((nd+1)); else rm -f "$f"; fi
done
echo "$((last - first + 1)) seeds, $nd differ"
