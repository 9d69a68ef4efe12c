# Random programs of loops calling procedures their frames hold (a descent
# calling the function and gradient it was passed): closures of arithmetic,
# conditionals, lists, closures returned, errors, `write`, gradients, and
# values that are not procedures; for compiled code calling procedure values
# through the evaluator (`jit::call_value`). Compare --jit-after 1 with
# --no-jit, also under --max-steps and --max-depth:
#   GEN=gen_hof.py tools/fuzz/run.sh BIN BIN 1-400 "--jit-after 1 --max-steps 40" "--no-jit --max-steps 40"
import random, sys
r = random.Random(int(sys.argv[1]))
def num():
    return r.choice(['1', '2', '0.5', '-1.5', '3', '1/3', '4611686018427387903', '#t', "'()", '0', '2.0'])
def body(v, d=2):
    c = r.random()
    if d <= 0 or c < 0.25: return r.choice([v, num()])
    ops = ['+', '-', '*', '/']
    if c < 0.6: return '(%s %s %s)' % (r.choice(ops), body(v, d-1), body(v, d-1))
    if c < 0.7: return '(if (< %s %s) %s %s)' % (body(v, d-1), num(), body(v, d-1), body(v, d-1))
    if c < 0.75: return '(car %s)' % v
    if c < 0.8: return '(list %s %s)' % (body(v, d-1), body(v, d-1))
    if c < 0.85: return '(sqrt %s)' % body(v, d-1)
    if c < 0.9: return '(h %s)' % body(v, d-1)
    if c < 0.95: return '(lambda (q) (+ q %s))' % body(v, d-1)
    return '(write %s)' % body(v, d-1)
def fn(nargs):
    vs = ['a', 'b'][:nargs]
    c = r.random()
    if c < 0.1: return r.choice(['car', 'sqrt', '5', 'h', 'cadr'])
    if c < 0.15: return '(gradient-R (lambda (l) (* (car l) (car l))))' if nargs == 1 else '+'
    return '(lambda (%s) %s)' % (' '.join(vs), body(vs[r.randrange(nargs)]))
print('(define (h x) (* x 2))')
print('''(define (hl f g x n)
  (let loop ((i 0) (x x) (acc 0))
    (if (= i n) (list x acc)
        (let* ((y (f x)) (z (g y i)))
          (loop (+ i 1) %s %s)))))''' % (r.choice(['y', 'x', 'z']), r.choice(['(+ acc z)', 'acc', '(+ acc 1)', 'z'])))
print('(define (hl2 f x n) (let loop ((i 0) (x x)) (if (= i n) x (loop (+ i 1) (f (f x))))))')
for k in range(4):
    x = r.choice([num(), '(list 1.0 2.0)', '(list 3 4)', num()])
    n = r.choice(['0', '1', '3', '10', '40'])
    if r.random() < 0.7:
        print('(hl %s %s %s %s)' % (fn(1), fn(2), x, n))
    else:
        print('(hl2 %s %s %s)' % (fn(1), x, n))
