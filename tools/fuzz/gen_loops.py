#!/usr/bin/env python3
# Random programs for run.sh (GEN=gen_loops.py) aimed at the slots of loops
# (resolve::Again, Resolver::prefer, Resolver::branches): named lets in and out of tail
# position and procedures calling themselves through their globals, whose calls pass
# their variables on, swapped, twice, or new values computed in nested branches after
# the variables they replace are read last; pairs taken apart, closures capturing the
# variables built in the branches and collected, and derivatives through such loops.
#
#   python3 tools/fuzz/gen_loops.py SEED
import random, sys
seed = int(sys.argv[1]); R = random.Random(seed)
P = ['a', 'b', 'c', 'd'][:R.randint(1, 4)]
EXTRA = ''
NAME = 'loop'
def atom(vs):
    r = R.random()
    if r < 0.7 and vs: return R.choice(vs)
    return R.choice(['1', '2', '0.5', '-1', '3'])
def num(vs, d):
    r = R.random()
    if d <= 0 or r < 0.3: return atom(vs)
    if r < 0.75: return '(%s %s %s)' % (R.choice(['+', '-', '*']), num(vs, d-1), num(vs, d-1))
    if r < 0.85: return '(let ((t%d %s)) %s)' % (d, num(vs, d-1), num(vs + ['t%d' % d], d-1))
    if r < 0.92: return '((lambda (z) (+ z %s)) %s)' % (atom(vs), num(vs, d-1))
    return '(if (< %s %s) %s %s)' % (atom(vs), atom(vs), num(vs, d-1), num(vs, d-1))
def call(vs, d):
    args = []
    for p in P:
        r = R.random()
        if r < 0.3: args.append(R.choice(P))
        else: args.append(num(vs, d))
    extra = EXTRA % (atom(vs), atom(vs)) if EXTRA else ''
    return '(%s (- n 1) %s%s)' % (NAME, ' '.join(args), extra)
def body(vs, d):
    r = R.random()
    if d <= 0 or r < 0.3: return call(vs, 2)
    if r < 0.6: return '(if (< %s %s) %s %s)' % (atom(vs), atom(vs), body(vs, d-1), body(vs, d-1))
    if r < 0.8:
        t = 'u%d' % d
        return '(let ((%s %s)) %s)' % (t, num(vs, 2), body(vs + [t], d-1))
    if r < 0.9:
        return '(let ((l (list %s %s))) (let ((h (car l)) (r (cdr l))) %s))' % (atom(vs), atom(vs), body(vs + ['h'], d-1))
    return '(let ((f (lambda (q) (+ q %s)))) %s)' % (atom(vs), body(vs + ['(f 1)'], d-1))
n = R.randint(0, 6)
inits = ' '.join('(%s %s)' % (p, R.choice(['1', '2', '0.5', '3', '-2'])) for p in P)
res = '(list %s)' % ' '.join(P)
prog = '(define (run n0) (let loop ((n n0) %s) (if (<= n 0) %s %s)))\n' % (inits, res, body(P, 3))
prog += '(run %d)\n' % n
prog += '(define (run2 n0) (let ((r (let loop ((n n0) %s) (if (<= n 0) %s %s)))) (cons n0 r)))\n' % (inits, res, body(P, 3))
prog += '(run2 %d)\n' % n
NAME = 'self'
prog += '(define (self n %s) (if (<= n 0) %s %s))\n' % (' '.join(P), res, body(P, 3))
prog += '(self %d %s)\n' % (n, ' '.join(R.choice(['1', '2', '0.5']) for _ in P))
NAME = 'loop'; EXTRA = ' (cons (lambda (q) (+ q (* %s %s))) fs)'
prog += '(define (clo n0) (let loop ((n n0) %s (fs (list))) (if (<= n 0) (map (lambda (f) (f 1)) fs) %s)))\n' % (inits, body(P, 2))
prog += '(clo %d)\n' % n
EXTRA = ''
prog += '((derivative-R (lambda (x) (car (let loop ((n 3) (a x) (b 1.0)) (if (<= n 0) (list a b) (if (< a b) (loop (- n 1) (* a b) (+ a 1)) (loop (- n 1) b (* a x)))))))) 1.5)\n'
prog += '((gradient-R (lambda (v) (let loop ((n %d) %s) (if (<= n 0) (* (car v) %s) %s)))) (list 1.5 2.0))\n' % (n, inits, P[0], body(P + ['(car v)', '(cadr v)'], 2))
print(prog)
