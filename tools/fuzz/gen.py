#!/usr/bin/env python3
# Random VLAD programs over lists, shape tests, lambdas, map/map2/fold-left/reduce,
# small top-level procedures (which the resolver runs in place: resolve::Inline), top-level
# procedures calling themselves in tail position (odd seeds: run as their own loops),
# small procedures whose body is a named `let` (seeds 3 mod 4: run in place with it),
# `let`-bound lambdas called from closures (seeds 2 mod 4: run in place behind a guard) and
# nested AD (gradient-R/F, derivative-F/R, hvp, hvp-RR): for differential runs (run.sh).
# Usage: python3 gen.py SEED > program.vlad (the same seed, the same program).
import random, sys
seed = int(sys.argv[1]); R = random.Random(seed)
def num():
    return R.choice(["1.5", "2.0", "-0.5", "3", "0.25", "2", "-1", "0.0", "1", "100000000", "-7"])
def scalar(vars, d):
    if d <= 0 or R.random() < 0.25:
        return R.choice(vars + [num()])
    k = R.randrange(16)
    a = lambda: scalar(vars, d - 1)
    if k == 15: return f"(noisy {a()} {a()})"
    if k == 12: return f"(sq {a()})"
    if k == 13: return f"(add3 {a()} {a()} {a()})"
    if k == 14: return f"(absdiff {a()} {a()})"
    if k < 4: return f"({R.choice(['+','-','*'])} {a()} {a()})"
    if k == 4: return f"(sqrt (+ 1.0 (* {a()} {a()})))"
    if k == 5: return f"(sin {a()})"
    if k == 6: return f"(if (< {a()} {a()}) {a()} {a()})"
    if k == 7: return f"(exp (* 0.1 {a()}))"
    if k == 8: return f"(let ((t {a()})) (* t {a()}))"
    if k == 9: return f"(/ {R.choice([a(), '1'])} (+ {R.choice(['2.0', '2'])} (* {a()} {a()})))"
    if k == 10: return f"(car (list {a()} {a()}))"
    return f"(cadr (list {a()} {a()}))"
def listfn(v, d):
    # a scalar function of a list v
    k = R.randrange(9)
    s = lambda vs: scalar(vs, d)
    if k == 8: return f"(sumsq (scale {s(['(car v)'])} {v}))"
    if k == 0: return f"(fold-left (lambda (acc e) (+ acc {s(['e','acc'])})) 0.0 {v})"
    if k == 1: return f"(reduce + 0.0 (map (lambda (e) {s(['e'])}) {v}))"
    if k == 2 and seed % 2:
        # (odd seeds: as a procedure defined at the top level calling itself
        # in tail position, which the resolver runs as its own loop)
        name = f"walk{len(defs)}"
        defs.append(f"(define ({name} l acc) (if (null? l) acc ({name} (cdr l) (+ acc {s(['(car l)','acc'])}))))")
        return f"({name} {v} 0.0)"
    if k == 2: return f"(let loop ((l {v}) (acc 0.0)) (if (null? l) acc (loop (cdr l) (+ acc {s(['(car l)','acc'])}))))"
    if k == 3 and seed % 4 == 3:
        # (seeds 3 mod 4: as a small procedure whose body is the named `let`,
        # which the resolver runs in place with its loop; its value used)
        name = f"prod{len(defs)}"
        defs.append(f"(define ({name} l) (let loop ((l l) (acc 1.0)) (if (pair? l) (loop (cdr l) (* acc {scalar(['(car l)'], d)})) acc)))")
        return f"(+ 0.5 ({name} {v}))"
    if k == 3: return f"(let loop ((l {v}) (acc 1.0)) (if (pair? l) (loop (cdr l) (* acc {s(['(car l)'])})) acc))"
    if k == 4: return f"(fold-left + 0.0 (map2 (lambda (a b) {s(['a','b'])}) {v} (map (lambda (e) (* 2.0 e)) {v})))"
    if k == 5 and seed % 4 == 2:
        # (seeds 2 mod 4: the `let`-bound lambda also called from closures
        # built in its scope, in and out of tail position: run in place
        # behind a guard, resolve::Guard)
        return (f"(let ((f (lambda (a b) {s(['a','b'])}))) (reduce + (f (car {v}) (cadr {v})) "
                f"(map (lambda (e) (* 0.5 (f e (car {v})))) (map (lambda (e) (f (car {v}) e)) {v}))))")
    if k == 5: return f"(let ((f (lambda (a b) {s(['a','b'])}))) (f (car {v}) (cadr {v})))"
    if k == 6: return f"(reduce * 1.0 {v})"
    return f"(dot {v} (map (lambda (e) {s(['e'])}) {v}))"
def expr(d):
    k = R.randrange(11)
    x = "(list " + " ".join(num() for _ in range(R.randrange(2, 4))) + ")"
    body = listfn("v", d)
    if k == 0: return f"((gradient-R (lambda (v) {body})) {x})"
    if k == 1: return f"((gradient-F (lambda (v) {body})) {x})"
    if k == 2: return f"(hvp (lambda (v) {body}) {x} {x})"
    if k == 3: return f"(hvp-RR (lambda (v) {body}) {x} {x})"
    if k == 4: return f"((derivative-F (lambda (w) ((gradient-R (lambda (v) {listfn('(map (lambda (e) (* w e)) v)', d)})) {x}))) 0.5)"
    if k == 5: return f"((derivative-R (lambda (w) (car ((gradient-F (lambda (v) {listfn('(map (lambda (e) (* w e)) v)', d)})) {x})))) 0.5)"
    if k == 6: return f"((gradient-R (lambda (u) (car ((gradient-R (lambda (v) {listfn('(map2 * u v)', d)})) {x})))) {x})"
    if k == 7: return f"(let ((v {x})) {body})"
    if k == 9: return f"((derivative-F (lambda (w) (car ((gradient-F (lambda (v) {listfn('(map (lambda (e) (* w e)) v)', d)})) {x})))) 0.5)"
    if k == 10: return f"((derivative-F (lambda (w) ((derivative-F (lambda (a) {scalar(['a', 'w', '(* a w)'], d)})) 1.5))) 0.5)"
    return f"(map (lambda (e) (if (null? e) 0 (if (pair? e) 1 2))) (list '() 1.0 {x} #t (lambda (q) q)))"
print('(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))')
print('(define (sq x) (* x x))')
print('(define (add3 a b c) (+ a (+ b (sq c))))')
print('(define (absdiff a b) (if (< a b) (- b a) (- a b)))')
print('(define (noisy a b) (let ((w (* a 2))) (if (< a b) (let ((u (* b 2))) (- b a)) (+ w b))))')
print('(define (scale k v) (map (lambda (e) (* k e)) v))')
print('(define (sumsq v) (sqrt (+ 1.0 (dot v v))))')
defs = []
exprs = [expr(R.randrange(1, 4)) for _ in range(6)]
for d in defs:
    print(d)
for e in exprs:
    print(e)
