#!/usr/bin/env bash
# Writes the small per-size/per-variant vlad programs of bench/peers/vlad from
# the workload files (saddle.vlad, particle.vlad, hvp-quad.vlad, hvp-sum.vlad,
# product.vlad, xor.vlad).  The generated files are committed; re-run this
# after changing the list below.
cd "$(dirname "$0")"
for v in FF FR RF RR; do o=${v:0:1}; i=${v:1:1}
  printf ';;; saddle, full solve: outer gradient-%s, inner gradient-%s\n(include "saddle")\n(saddle gradient-%s gradient-%s)\n' $o $i $o $i > saddle-$v.vlad
  printf ';;; saddle: one outer gradient (through one inner solve), outer gradient-%s, inner gradient-%s\n(include "saddle")\n(saddle-grad gradient-%s gradient-%s)\n' $o $i $o $i > saddle-grad-$v.vlad
  printf ';;; particle, full solve: outer gradient-%s, inner gradient-%s\n(include "particle")\n(particle gradient-%s gradient-%s)\n' $o $i $o $i > particle-$v.vlad
  printf ';;; particle: one outer gradient (through one simulation), outer gradient-%s, inner gradient-%s\n(include "particle")\n(particle-grad gradient-%s gradient-%s)\n' $o $i $o $i > particle-grad-$v.vlad
done
K=10000
printf ';;; %s calls of the forward-over-reverse Hessian-vector product (prelude hvp)\n(define K %s)\n(include "hvp-quad")\n(repeat-hvp hvp K)\n' $K $K > hvp-quad-FR-$K.vlad
printf ';;; %s calls of the reverse-over-reverse Hessian-vector product (prelude hvp-RR)\n(define K %s)\n(include "hvp-quad")\n(repeat-hvp hvp-RR K)\n' $K $K > hvp-quad-RR-$K.vlad
printf ';;; primal of hvp-quad: %s calls of f itself\n(define K %s)\n(include "hvp-quad")\n(repeat-hvp (lambda (f x v) (let ((y (f x))) (list y y))) K)\n' $K $K > hvp-quad-primal-$K.vlad
for N in 1000 10000 100000; do
  printf ';;; HVP of a sum of %s cubes, forward over reverse (prelude hvp)\n(define N %s)\n(include "hvp-sum")\n(summary (hvp f xs vs))\n' $N $N > hvp-sum-FR-$N.vlad
  printf ';;; HVP of a sum of %s cubes, reverse over reverse (prelude hvp-RR)\n(define N %s)\n(include "hvp-sum")\n(summary (hvp-RR f xs vs))\n' $N $N > hvp-sum-RR-$N.vlad
  printf ';;; primal of hvp-sum-*-%s: f alone\n(define N %s)\n(include "hvp-sum")\n(f xs)\n' $N $N > hvp-sum-primal-$N.vlad
  printf ';;; setup of hvp-sum-*-%s: the input lists alone (bench.py subtracts its time, as the peers time around their input)\n(define N %s)\n(include "hvp-sum")\n(length vs)\n' $N $N > hvp-sum-setup-$N.vlad
  printf ';;; d/dx prod_{i=1..%s} (1 + x/i) at 0.5, reverse mode\n(define N %s)\n(include "product")\n((derivative-R f) 0.5)\n' $N $N > product-R-$N.vlad
  printf ';;; d/dx prod_{i=1..%s} (1 + x/i) at 0.5, forward mode\n(define N %s)\n(include "product")\n((derivative-F f) 0.5)\n' $N $N > product-F-$N.vlad
  printf ';;; primal: prod_{i=1..%s} (1 + x/i) at 0.5\n(define N %s)\n(include "product")\n(f 0.5)\n' $N $N > product-primal-$N.vlad
done
for S in 100 1000 10000; do
  printf ';;; XOR backprop, %s steps\n(define STEPS %s)\n(include "xor")\n(let ((w (train w0 STEPS))) (cons (error w) w))\n' $S $S > xor-$S.vlad
  printf ';;; primal of xor-%s: the error evaluated %s times\n(define STEPS %s)\n(include "xor")\n(evaluate w0 STEPS 0)\n' $S $S $S > xor-primal-$S.vlad
done
