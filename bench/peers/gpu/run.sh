#!/usr/bin/env bash
# Hessian-vector products of f(x) = sum of x_i^3 on packed vectors (float64), on a GPU:
# vlad (--backend auto: the GPU; and --backend cpu) against JAX (jit, eager) and
# torch.func, n = 10^6 and 10^7. Per call: each call's result is summed and read back.
#   bench/peers/gpu/run.sh [VLAD]     (VLAD defaults to target/release/vlad)
# vlad's time per call is (time of K calls - time of 0 calls) / K, whole process.
set -u
here=$(cd "$(dirname "$0")" && pwd)
vlad=$(readlink -f "${1:-$here/../../../target/release/vlad}")
cd "$here"
tmp=$(mktemp -d)
run() { # n k backend -> seconds
  printf '(define N %s)\n(define K %s)\n(include "%s/hvp-vec")\n' "$1" "$2" "$PWD" >"$tmp/p.vlad"
  local s=$EPOCHREALTIME
  "$vlad" --backend "$3" "$tmp/p.vlad" >"$tmp/out" || { cat "$tmp/out"; return 1; }
  awk "BEGIN{print $EPOCHREALTIME - $s}"
}
for n in ${NS:-1000000 10000000}; do
  for be in auto cpu; do
    k=200; [ $be = cpu ] && k=10
    t0=$(run $n 0 $be) && tk=$(run $n $k $be) &&
      echo "vlad --backend $be n=$n: $(awk "BEGIN{printf \"%.3f\", ($tk - $t0) / $k * 1e3}") ms (result $(cat "$tmp/out"))"
  done
done
rm -rf "$tmp"
${PYTHON:-python3} hvp_peers.py 200 1000000 10000000
