#!/usr/bin/env python3
# Random checks that gradients of vector code agree with the same code written
# on lists (VECTORS.md): a random function of a packed vector (elementwise
# primitives, scans, matrices built from it (outer products, transposes,
# products, reshapes) applied to it, reductions, scalars of the vector broadcast
# back into it) and its translation to list code (map, map2, fold-left, list-ref,
# the helpers below), each differentiated by gradient-R, gradient-F, hvp,
# hvp-RR, a gradient of a gradient's sum, and by the transforms as the
# acceptance files write them (`*j`/`sensitize`, `j*`/`bundle`, and a gradient
# of such a gradient's dot product with a direction); each derivative of the vector
# code compared with the list code's to a relative 1e-7. A `vlad test` file:
# every expression must be #t (a mismatch prints both values).
# Usage: python3 gen_vec.py SEED > checks.vlad; vlad test checks.vlad
import random, sys
R = random.Random(int(sys.argv[1]))
N = R.choice([1, 2, 3, 4])
fresh = iter(range(10**6))

def num():
    return R.choice(["0.5", "1.5", "-0.75", "2.0", "0.25", "-1.25", "3"])

def const_list():
    return "(list " + " ".join(num() for _ in range(N)) + ")"

# One-operand forms: (vector code of p, list code of q), x a fresh name; by
# `vec`'s case number (6: one of ELEMENTWISE).
ELEMENTWISE = [("(vec-sin {p})", "(map sin {q})"), ("(vec-cos {p})", "(map cos {q})"),
               ("(vec-neg {p})", "(map (lambda (y) (- 0 y)) {q})")]
ONE = {
    7: ("(vec-exp (vec-scale 0.25 {p}))", "(map (lambda ({x}) (exp (* 0.25 {x}))) {q})"),
    8: ("(vec-sqrt (vec-shift 1.0 (vec* {p} {p})))", "(map (lambda ({x}) (sqrt (+ 1.0 (* {x} {x})))) {q})"),
    9: ("(vec-log (vec-shift 2.0 (vec* {p} {p})))", "(map (lambda ({x}) (log (+ 2.0 (* {x} {x})))) {q})"),
    10: ("(vec-tanh {p})", "(map ltanh {q})"),
    11: ("(vec-prefix-sum {p})", "(lprefix {q})"),
    12: ("(vec-suffix-sum {p})", "(lsuffix {q})"),
    15: ("(vec-max0 {p})", "(map (lambda ({x}) (if (> {x} 0) {x} 0)) {q})"),
}

def vec(d):
    """A vector expression of length N in `v`: (vector code, list code)."""
    if d <= 0 or R.random() < 0.2:
        if R.random() < 0.7:
            return "v", "l"
        c = const_list()
        return f"(vector-of {c})", c
    a = lambda: vec(d - 1)
    k = R.randrange(16)
    x = f"x{next(fresh)}"
    if k < 3:
        op = R.choice(["+", "-", "*"])
        (p, q), (r, s) = a(), a()
        return f"(vec{op} {p} {r})", f"(map2 {op} {q} {s})"
    if k == 3:
        (p, q), (r, s) = a(), a()
        return (f"(vec/ {p} (vec-shift 3.0 (vec* {r} {r})))",
                f"(map2 / {q} (map (lambda ({x}) (+ 3.0 (* {x} {x}))) {s}))")
    if k == 4:
        (p, q), (r, s) = a(), scalar(d - 1)
        return f"(vec-scale {r} {p})", f"(map (lambda ({x}) (* {s} {x})) {q})"
    if k == 5:
        (p, q), (r, s) = a(), scalar(d - 1)
        return f"(vec-shift {r} {p})", f"(map (lambda ({x}) (+ {s} {x})) {q})"
    if 6 <= k <= 12:
        p, q = a()
        vf, lf = R.choice(ELEMENTWISE) if k == 6 else ONE[k]
        return vf.format(p=p, x=x), lf.format(q=q, x=x)
    if k == 13:
        (p, q), (m, ml) = a(), mat(d - 1)
        return f"(mat-vec {m} {p})", f"(lmatvec {ml} {q})"
    if k == 14:
        # (a matrix's transpose applied from the left: x^T A)
        (p, q), (m, ml) = a(), mat(d - 1)
        return f"(vec-mat {p} {m})", f"(lmatvec (ltranspose {ml}) {q})"
    p, q = a()
    vf, lf = ONE[15]
    return vf.format(p=p, x=x), lf.format(q=q, x=x)

def const_matrix():
    return "(list " + " ".join(const_list() for _ in range(N)) + ")"

def mat(d):
    """An N x N matrix expression in `v`: (vector code, list code: a list of rows)."""
    k = R.randrange(7)
    if d <= 0 or k == 0:
        if R.random() < 0.5:
            (p, q), (r, s) = vec(max(d - 1, 0)), vec(max(d - 1, 0))
            return f"(vec-outer {p} {r})", f"(louter {q} {s})"
        m = const_matrix()
        return f"(vector-of {m})", m
    a = lambda: mat(d - 1)
    x, y = f"x{next(fresh)}", f"y{next(fresh)}"
    if k == 1:
        p, q = a()
        return f"(transpose {p})", f"(ltranspose {q})"
    if k == 2:
        (p, q), (r, s) = a(), a()
        return f"(mat-mat {p} {r})", f"(lmatmul {q} {s})"
    if k == 3:
        op = R.choice(["+", "-", "*"])
        (p, q), (r, s) = a(), a()
        return f"(vec{op} {p} {r})", f"(map2 (lambda ({x} {y}) (map2 {op} {x} {y})) {q} {s})"
    if k == 4:
        (p, q), (r, s) = a(), scalar(d - 1)
        return f"(vec-scale {r} {p})", f"(map (lambda ({x}) (map (lambda ({y}) (* {s} {y})) {x})) {q})"
    if k == 5:
        p, q = a()
        return f"(vec-sin {p})", f"(map (lambda ({x}) (map sin {x})) {q})"
    p, q = a()
    return f"(vec-reshape (vec-flatten {p}) {N} {N})", q

def scalar(d):
    """A real of `v`: (vector code, list code)."""
    k = R.randrange(6)
    if d <= 0 or k == 0:
        i = R.randrange(N)
        p, q = vec(max(d - 1, 0))
        return f"(vec-ref {p} {i})", f"(list-ref {q} {i})"
    if k == 1:
        (p, q), (r, s) = vec(d - 1), vec(d - 1)
        return f"(vec-dot {p} {r})", f"(ldot {q} {s})"
    if k == 2:
        p, q = vec(d - 1)
        return f"(vec-max {p})", f"(lmax {q})"
    if k == 3:
        (p, q), (r, s) = scalar(d - 1), scalar(d - 1)
        op = R.choice(["+", "*", "-"])
        return f"({op} {p} {r})", f"({op} {q} {s})"
    if k == 4:
        p, q = scalar(d - 1)
        return f"(sin {p})", f"(sin {q})"
    if R.random() < 0.3:
        p, q = mat(d - 1)
        return f"(vec-sum {p})", f"(lsum (map lsum {q}))"
    p, q = vec(d - 1)
    return f"(vec-sum {p})", f"(lsum {q})"

print(""";; generated by tools/fuzz/gen_vec.py
(define (lsum l) (fold-left + 0 l))
(define (lprefix l)
  (let loop ((l l) (s 0) (out '()))
    (if (null? l) (reverse out) (let ((s2 (+ s (car l)))) (loop (cdr l) s2 (cons s2 out))))))
(define (lsuffix l) (reverse (lprefix (reverse l))))
(define (lmax l) (fold-left (lambda (a x) (if (> x a) x a)) (car l) (cdr l)))
(define (ldot a b) (fold-left + 0 (map2 * a b)))
(define (lmatvec m l) (map (lambda (row) (ldot row l)) m))
(define (ltranspose m) (if (null? (car m)) '() (cons (map car m) (ltranspose (map cdr m)))))
(define (louter a b) (map (lambda (x) (map (lambda (y) (* x y)) b)) a))
(define (lmatmul a b) (map (lambda (row) (lmatvec (ltranspose b) row)) a))
(define (ltanh x) (let ((e (exp (* 2 x)))) (/ (- e 1) (+ e 1))))
(define ((rgrad f) x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1)))))
(define (rjvp f x dx) (unperturb (tangent ((j* f) (bundle x (perturb dx))))))
(define (close? a b)
  (or (if (pair? a)
          (and (pair? b) (close? (car a) (car b)) (close? (cdr a) (cdr b)))
          (if (null? a) (null? b)
              (and (real? b) (<= (abs (- a b)) (* 1e-7 (max 1.0 (max (abs a) (abs b))))))))
      (let ((w (write (list a b)))) #f)))""")
for k in range(4):
    sv, sl = scalar(R.randrange(1, 4))
    x = const_list()
    dx = const_list()
    print(f"(define (fv{k} v) {sv})")
    print(f"(define (fl{k} l) {sl})")
    print(f"(close? (fv{k} (vector-of {x})) (fl{k} {x}))")
    print(f"(close? (list-of ((gradient-R fv{k}) (vector-of {x}))) ((gradient-R fl{k}) {x}))")
    print(f"(close? (list-of ((gradient-F fv{k}) (vector-of {x}))) ((gradient-F fl{k}) {x}))")
    print(f"(close? (list-of (hvp fv{k} (vector-of {x}) (vector-of {dx}))) (hvp fl{k} {x} {dx}))")
    print(f"(close? (list-of (hvp-RR fv{k} (vector-of {x}) (vector-of {dx}))) (hvp-RR fl{k} {x} {dx}))")
    print(f"(close? (list-of ((gradient-R (lambda (v) (vec-sum ((gradient-F fv{k}) v)))) (vector-of {x}))) "
          f"((gradient-R (lambda (l) (lsum ((gradient-F fl{k}) l)))) {x}))")
    # (the transforms themselves, as the acceptance files write them)
    print(f"(close? (list-of ((rgrad fv{k}) (vector-of {x}))) ((rgrad fl{k}) {x}))")
    print(f"(close? (rjvp fv{k} (vector-of {x}) (vector-of {dx})) (rjvp fl{k} {x} {dx}))")
    print(f"(close? (list-of ((rgrad (lambda (v) (vec-dot ((rgrad fv{k}) v) (vector-of {dx})))) (vector-of {x}))) "
          f"((rgrad (lambda (l) (ldot ((rgrad fl{k}) l) {dx}))) {x}))")
