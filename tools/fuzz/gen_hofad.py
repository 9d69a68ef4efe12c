# Random programs of loops calling procedures their frames hold (as
# gen_hof.py's), run under derivatives: the functions and the values the
# loops carry are reals of running levels (tapes, dual numbers, nested), so
# that compiled loops have the evaluator compute with them (`jit::held_arith`)
# and, giving up, forget what they recorded (`Tapes::rewind`). Exact and
# inexact inputs, comparisons, sqrt of a level's real and `write` (where
# compiled code gives up), errors. Compare --jit-after 1 with --no-jit, also
# under --max-steps and --max-depth:
#   GEN=gen_hofad.py tools/fuzz/run.sh BIN BIN 1-400 "--jit-after 1" "--no-jit"
import random, sys
r = random.Random(int(sys.argv[1]))
def num():
    return r.choice(['1', '2', '0.5', '-1.5', '3', '1/3', '0', '2.0', '0.25'])
def body(vs, d=2):
    c = r.random()
    if d <= 0 or c < 0.3: return r.choice(vs + vs + [num()])
    if c < 0.65: return '(%s %s %s)' % (r.choice(['+', '-', '*', '*', '/']), body(vs, d-1), body(vs, d-1))
    if c < 0.78: return '(if (%s %s %s) %s %s)' % (r.choice(['<', '>', '=', '<=']), body(vs, d-1), body(vs, d-1), body(vs, d-1), body(vs, d-1))
    if c < 0.84: return '(sqr %s)' % body(vs, d-1)
    if c < 0.88: return '(sqrt (+ 1 (sqr %s)))' % body(vs, d-1)
    if c < 0.92: return '(h %s)' % body(vs, d-1)
    if c < 0.95: return '(car (list %s))' % body(vs, d-1)
    if c < 0.985: return '(begin (write 1) %s)' % body(vs, d-1)
    return '(car %s)' % body(vs, d-1)
def fn1(w):
    c = r.random()
    if c < 0.1: return r.choice(['h', 'sqr'])
    return '(lambda (a) %s)' % body(['a', w])
def fn2(w):
    return '(lambda (a b) %s)' % body(['a', 'b', w])
def vfn(w):
    # a function of a list of two, and its gradient by the other nesting
    e = body(['(car v)', '(cadr v)', w])
    f = '(lambda (v) %s)' % e
    g = r.choice(['(gradient-R %s)' % f, '(gradient-F %s)' % f,
                  '(lambda (v) (list (* 2 (car v)) %s))' % body(['(cadr v)', w], 1)])
    return f, g
print('(define (h x) (* x 2))')
print('(define (sqr x) (* x x))')
print('''(define (hl f g x n)
  (let loop ((i 0) (x x) (acc 0))
    (if (= i n) (list x acc)
        (let* ((y (f x)) (z (g y i)))
          (loop (+ i 1) %s %s)))))''' % (r.choice(['y', 'x', 'z']), r.choice(['(+ acc z)', 'acc', '(+ acc 1)', 'z', '(* acc y)'])))
print('(define (hl2 f x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (f (f x))))))')
print('''(define (desc f g x eta n)
  (let loop ((x x) (i 0) (best (f x)))
    (if (= i n) (list x best)
        (let* ((gx (g x)) (x1 (map2 - x (map (lambda (d) (* eta d)) gx))) (fx1 (f x1)))
          (if (%s fx1 best) (loop x1 (+ i 1) fx1) (loop x (+ i 1) best))))))''' % r.choice(['<', '<=', '>']))
def use(w):
    n = r.choice(['0', '1', '3', '10', '25'])
    c = r.random()
    if c < 0.35:
        return '(cadr (hl %s %s %s %s))' % (fn1(w), fn2(w), r.choice([w, num(), '(* %s %s)' % (w, num())]), n)
    if c < 0.55:
        return '(hl2 %s %s %s)' % (fn1(w), r.choice([w, num()]), n)
    f, g = vfn(w)
    x = r.choice(['(list %s %s)' % (w, num()), '(list 1.0 2.0)', '(list %s 1)' % num()])
    d = '(desc %s %s %s %s %s)' % (f, g, x, r.choice(['0.1', '1/8', '0.01']), n)
    return r.choice(['(cadr %s)' % d, '(car (car %s))' % d])
def top():
    c = r.random()
    w = 'w'
    inner = use(w)
    if c < 0.3:
        return '((derivative-R (lambda (w) %s)) %s)' % (inner, num())
    if c < 0.5:
        return '((derivative-F (lambda (w) %s)) %s)' % (inner, num())
    if c < 0.7:
        return '((gradient-R (lambda (l) (let ((w (car l))) %s))) (list %s))' % (inner, num())
    if c < 0.85:
        # nested: a derivative of a function taking a derivative
        d = r.choice(['derivative-R', 'derivative-F'])
        e = r.choice(['derivative-R', 'derivative-F'])
        return '((%s (lambda (u) ((%s (lambda (w) (* u %s))) u))) %s)' % (d, e, inner, num())
    return inner.replace('w', '1.5') if r.random() < 0.5 else '(let ((w 2)) %s)' % inner
for k in range(4):
    print(top())
