#!/bin/bash
# Instructions one derivative call costs beyond the function it runs: a loop of
# 2000 calls of ((INNER f) (list w w)), f = car, inside an OUTER gradient over
# w, less the same loop calling nothing, per iteration (valgrind's callgrind).
# Session 26's per-call figures (bench/peers/README.md) are these less the
# `(list w w)` row of the same OUTER (the loop's own cost).
#
#   tools/gradcall.sh BIN                 all four nestings and the empty loop
#   tools/gradcall.sh BIN OUTER INNER     one (gradient-F / gradient-R each)
set -eu
BIN=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() {
    local o=$1 body=$2
    for n in 2000 0; do
        cat > "$tmp/p$n.vlad" <<P
(define (f x) (car x))
(define (run w) (let loop ((i 0) (acc 0.0)) (if (= i $n) acc (loop (+ i 1) (+ acc (car $body))))))
(($o (lambda (w) (run (* 1.0 (car w))))) (list 1.0))
P
    done
    count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" 2>&1 >/dev/null | grep -oP 'Collected : \K[0-9]+'; }
    local a b
    a=$(count "$tmp/p2000.vlad"); b=$(count "$tmp/p0.vlad")
    printf '%-12s %-40s %8.0f\n' "$o" "$body" "$(echo "($a - $b) / 2000" | bc -l)"
}
if [ $# -ge 3 ]; then
    one "$2" "(($3 f) (list w w))"
else
    for o in gradient-F gradient-R; do
        for i in gradient-F gradient-R; do one $o "(($i f) (list w w))"; done
        one $o "(list w w)"
    done
fi
