#!/bin/bash
# Instructions executed by vlad on bench/peers/vlad workloads (valgrind's
# callgrind; the whole program less an empty one, so start-up and the prelude
# are not counted): the reliable measure of a speed change on a noisy machine.
#
#   tools/icount.sh BIN [WORKLOAD...]   names as in bench/peers/vlad without .vlad,
#                                       plus fib20; default: the gradients, HVPs,
#                                       products, XOR and fib20
#
# Needs valgrind. Compare two builds by running it on each.
set -eu
BIN=$(realpath "$1"); shift
W=${*:-"saddle-grad-FF saddle-grad-FR saddle-grad-RF saddle-grad-RR particle-grad-FF particle-grad-FR particle-grad-RF particle-grad-RR hvp-sum-FR-1000 hvp-sum-RR-1000 product-F-1000 product-R-1000 xor-1000 fib20"}
cd "$(dirname "$0")/../bench/peers/vlad"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '0' > "$tmp/empty.vlad"
echo '(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2))))) (fib 20)' > "$tmp/fib20.vlad"
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" 2>&1 >/dev/null | grep -oP 'Collected : \K[0-9]+'; }
empty=$(count "$tmp/empty.vlad")
for w in $W; do
  f=$w.vlad; [ "$w" = fib20 ] && f=$tmp/fib20.vlad
  n=$(count "$f")
  awk -v w="$w" -v n="$n" -v e="$empty" 'BEGIN { printf "%-20s %8.2f M\n", w, (n - e) / 1e6 }'
done
