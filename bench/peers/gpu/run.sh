#!/usr/bin/env bash
# Hessian-vector products of f(x) = sum of x_i^3 on packed vectors (float64), on a GPU:
# vlad (--backend auto: the GPU; and --backend cpu) against JAX (jit, eager) and
# torch.func, n = 10^6 and 10^7. Per call: each call's result is summed and read back.
#   bench/peers/gpu/run.sh [VLAD]     (VLAD defaults to target/release/vlad)
# vlad's time per call is (time of K calls - time of 0 calls) / K, whole process, each the
# least of 3 runs (alternating): starting the GPU varies by tens of milliseconds from one
# process to the next, so K is large enough (KS_AUTO, KS_CPU: one K per n) that this is
# well under a tenth of the K calls' time; a K of 200 gave an impossible 0.003 ms at 10^6.
set -u
here=$(cd "$(dirname "$0")" && pwd)
vlad=$(readlink -f "${1:-$here/../../../target/release/vlad}")
cd "$here"
tmp=$(mktemp -d)
run() { # n k backend -> seconds (the result, checked, in $tmp/out)
  printf '(define N %s)\n(define K %s)\n(include "%s/hvp-vec")\n' "$1" "$2" "$PWD" >"$tmp/p.vlad"
  local s=$EPOCHREALTIME
  "$vlad" --backend "$3" "$tmp/p.vlad" >"$tmp/out" || { cat "$tmp/out" >&2; return 1; }
  local e=$EPOCHREALTIME
  # each call's sum is 3 (n - 1): the result must be K times that
  awk -v r="$(cat "$tmp/out")" -v n="$1" -v k="$2" 'BEGIN { x = 3 * (n - 1) * k; d = r - x; if (d < 0) d = -d; exit !(d <= 1e-9 * (x + 1)) }' ||
    { echo "vlad --backend $3 n=$1 K=$2: wrong result $(cat "$tmp/out")" >&2; return 1; }
  awk "BEGIN{print $e - $s}"
}
least() { awk 'BEGIN { m = -1 } { if (m < 0 || $1 < m) m = $1 } END { print m }'; }
ns=(${NS:-1000000 10000000})
ka=(${KS_AUTO:-2000 400})
kc=(${KS_CPU:-20 5})
for i in "${!ns[@]}"; do
  n=${ns[$i]}
  for be in auto cpu; do
    k=${ka[$i]}; [ $be = cpu ] && k=${kc[$i]}
    t0s= tks=
    for r in 1 2 3; do
      t0=$(run $n 0 $be) && tk=$(run $n $k $be) || continue 3
      t0s+="$t0"$'\n' tks+="$tk"$'\n'
    done
    t0=$(printf %s "$t0s" | least) tk=$(printf %s "$tks" | least)
    echo "vlad --backend $be n=$n: $(awk "BEGIN{printf \"%.3f\", ($tk - $t0) / $k * 1e3}") ms per call (K=$k; least of 3: $t0 s for 0 calls, $tk s for K)"
  done
done
rm -rf "$tmp"
${PYTHON:-python3} hvp_peers.py 200 1000000 10000000
