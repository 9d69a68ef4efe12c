#!/usr/bin/env python3
# Derivatives against finite differences: random smooth scalar functions (arithmetic,
# sqrt/exp/log/sin/cos/atan, let, lambda, list access, map/fold over lists, and inner
# derivatives and gradients, in either mode, of functions that read the outer variable)
# differentiated by derivative-F, derivative-R, gradient-F/R, hvp and hvp-RR, twice in
# all four mode mixes and three times in random ones; each against a central difference
# of the function (or of a lower derivative), an oracle that shares no code with the AD.
#
#   python3 tools/fuzz/fd.py BIN FIRST-LAST [--raw] [FLAGS]   prints the checks that disagree
#
# --raw: derivative-F/R, gradient-F/R, hvp and hvp-RR defined in the program itself by
# bundle/tangent and *j (as ../shared/acceptance/ad.vlad defines them), so that the
# transforms run instead of the prelude's primitives (which use the tape when they can).
#
# Tolerance: |ad - fd| <= 1e-5 * (1 + |ad|) with h = 1e-5 (central differences err by
# about h^2 f''' and 1e-16 |f| / h); programs kept as $TMPDIR/vlad-fd-SEED.vlad.
import os, random, re, subprocess, sys

MODES = ["F", "R"]


class Gen:
    def __init__(self, seed):
        self.R = random.Random(seed)
        self.fresh = 0

    def name(self, base):
        self.fresh += 1
        return f"{base}{self.fresh}"

    def const(self):
        return self.R.choice(["1.5", "2.0", "-0.5", "3", "0.25", "2", "-1", "0.75", "1"])

    def expr(self, vs, d, leaf=0.15):
        R = self.R
        if d <= 0 or R.random() < leaf:
            return R.choice(vs + vs + [self.const()])
        a = lambda: self.expr(vs, d - 1)
        k = R.randrange(22)
        if k < 5:
            return f"({R.choice(['+', '-', '*', '*', '+'])} {a()} {a()})"
        if k == 5:
            return f"(/ {a()} (+ 2.0 (* {a()} {a()})))"
        if k == 6:
            return f"(sqrt (+ 1.0 (* {a()} {a()})))"
        if k == 7:
            return f"(exp (* 0.3 (sin {a()})))"
        if k == 8:
            return f"(log (+ 1.5 (cos {a()})))"
        if k == 9:
            return f"(sin {a()})"
        if k == 10:
            return f"(cos {a()})"
        if k == 11:
            return f"(atan {a()} (+ 2.0 (* {a()} {a()})))"
        if k == 12:
            t = self.name("t")
            return f"(let (({t} {a()})) {self.expr(vs + [t], d - 1)})"
        if k == 13:
            z = self.name("z")
            return f"((lambda ({z}) {self.expr(vs + [z], d - 1)}) {a()})"
        if k == 14:
            return f"(car (cdr (list {a()} {a()} {a()})))"
        if k == 15:
            e = self.name("e")
            return f"(fold-left + 0.0 (map (lambda ({e}) {self.expr(vs + [e], d - 1)}) (list {a()} {a()})))"
        if k == 16:
            p, q = self.name("p"), self.name("q")
            return (f"(let loop (({p} (list {a()} {a()} {a()})) ({q} 0.0)) "
                    f"(if (null? {p}) {q} (loop (cdr {p}) {self.expr(vs + [f'(car {p})', q], d - 1)})))")
        if k == 17 and d >= 2:
            # an inner derivative of a function reading the outer variables
            y = self.name("y")
            m = R.choice(MODES)
            body = self.expr(vs + [y, y], d - 1)
            return f"((derivative-{m} (lambda ({y}) (* (+ {y} {R.choice(vs)}) {body}))) {a()})"
        if k == 18 and d >= 2:
            w = self.name("w")
            m = R.choice(MODES)
            body = self.expr(vs + [f"(car {w})", f"(cadr {w})"], d - 1)
            body = f"(* (- (car {w}) (* {R.choice(vs)} (cadr {w}))) {body})"
            pick = R.choice(["car", "cadr"])
            return f"({pick} ((gradient-{m} (lambda ({w}) {body})) (list {a()} {a()})))"
        if k == 19:
            # a closure made here, applied later
            g, u = self.name("g"), self.name("u")
            return f"(let (({g} (lambda ({u}) {self.expr(vs + [u], d - 1)}))) (+ ({g} {a()}) ({g} {a()})))"
        if k == 20:
            return f"(* {a()} {a()})"
        return f"(- 0.5 {a()})"


RAW = """(define (j* x) (bundle x (perturb (zero x))))
(define (jvp f x dx) (unperturb (tangent ((j* f) (bundle x (perturb dx))))))
(define (vjp f x s) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize s)))))
(define ((derivative-F f) x) (jvp f x 1))
(define ((derivative-R f) x) (vjp f x 1))
(define ((gradient-R f) x) (vjp f x 1))
(define ((gradient-F f) x) (list (jvp f x (list 1 0)) (jvp f x (list 0 1))))
(define (hvp f x v) (jvp (gradient-R f) x v))
(define (hvp-RR f x v) (vjp (gradient-R f) x v))
"""


def program(seed, raw=False):
    g = Gen(seed)
    R = g.R
    lines = [RAW] if raw else []
    lines.append("(define (fd f x) (let ((h 1e-5)) (/ (- (f (+ x h)) (f (- x h))) (* 2.0 h))))")
    checks = []
    for i in range(6):
        x0 = round(R.uniform(-1.2, 1.2), 3)
        body = g.expr(["x", "x", "x"], R.choice([2, 3, 3, 4]), leaf=0)
        f = f"(lambda (x) {body})"
        kind = R.randrange(5)
        if kind == 0:
            # first derivative, both modes, against fd of f
            lines.append(f"(let ((f {f})) (list (fd f {x0}) ((derivative-F f) {x0}) ((derivative-R f) {x0})))")
            checks.append(f"d1 #{i}")
        elif kind == 1:
            # second derivative, all four mixes, against fd of f' by each mode
            lines.append(
                f"(let ((f {f})) (list (fd (derivative-F f) {x0}) (fd (derivative-R f) {x0}) "
                + " ".join(f"((derivative-{a} (derivative-{b} f)) {x0})" for a in MODES for b in MODES)
                + "))")
            checks.append(f"d2 #{i}")
        elif kind == 2:
            # a gradient of a two-variable function, both modes, against fd along each axis
            body2 = g.expr(["(car v)", "(cadr v)", "(car v)", "(cadr v)"], R.choice([2, 3]), leaf=0)
            y0 = round(R.uniform(-1.2, 1.2), 3)
            F = f"(lambda (v) {body2})"
            lines.append(
                f"(let ((F {F})) (let ((gF ((gradient-F F) (list {x0} {y0}))) (gR ((gradient-R F) (list {x0} {y0})))) "
                f"(list (fd (lambda (a) (F (list a {y0}))) {x0}) (car gF) (car gR) "
                f"(fd (lambda (b) (F (list {x0} b))) {y0}) (cadr gF) (cadr gR))))")
            checks.append(f"grad #{i}")
        elif kind == 4:
            # a third derivative in a random mode mix, against fd of the second by two others
            f = f"(lambda (x) {g.expr(['x', 'x', 'x'], R.choice([2, 3]), leaf=0)})"
            m = [R.choice(MODES) for _ in range(5)]
            lines.append(
                f"(let ((f {f})) (list (fd (derivative-{m[0]} (derivative-{m[1]} f)) {x0}) "
                f"((derivative-{m[2]} (derivative-{m[3]} (derivative-{m[4]} f))) {x0})))")
            checks.append(f"d3 #{i}")
        else:
            # an HVP along (1 0) both ways, against fd of the gradient's first component
            body2 = g.expr(["(car v)", "(cadr v)", "(car v)", "(cadr v)"], R.choice([2, 3]), leaf=0)
            y0 = round(R.uniform(-1.2, 1.2), 3)
            F = f"(lambda (v) {body2})"
            lines.append(
                f"(let ((F {F})) (let ((h1 (hvp F (list {x0} {y0}) (list 1 0))) (h2 (hvp-RR F (list {x0} {y0}) (list 1 0)))) "
                f"(list (fd (lambda (a) (car ((gradient-R F) (list a {y0})))) {x0}) (car h1) (car h2) "
                f"(fd (lambda (a) (cadr ((gradient-F F) (list a {y0})))) {x0}) (cadr h1) (cadr h2))))")
            checks.append(f"hvp #{i}")
    return "\n".join(lines) + "\n", checks


NUM = re.compile(r"[-+]?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+|inf\.0|nan\.0)")


def agree(ad, fd):
    return abs(ad - fd) <= 1e-5 * (1 + abs(ad))


def judge(kind, xs):
    """The pairs (ad, fd) a check's printed list must satisfy."""
    if kind == "d1":
        return [(xs[1], xs[0]), (xs[2], xs[0]), (xs[1], xs[2])]
    if kind == "d3":
        return [(xs[1], xs[0])]
    if kind == "d2":
        fdF, fdR, ad = xs[0], xs[1], xs[2:]
        return [(fdF, fdR)] + [(a, fdF) for a in ad] + [(a, ad[0]) for a in ad]
    return [(xs[1], xs[0]), (xs[2], xs[0]), (xs[4], xs[3]), (xs[5], xs[3])]


def main():
    bin_, span = sys.argv[1], sys.argv[2]
    flags = sys.argv[3:]
    raw = "--raw" in flags
    flags = [f for f in flags if f != "--raw"]
    first, last = (int(s) for s in span.split("-"))
    tmp = os.environ.get("TMPDIR", "/tmp")
    bad = 0
    for seed in range(first, last + 1):
        src, checks = program(seed, raw)
        path = os.path.join(tmp, f"vlad-fd-{seed}{''.join(flags)}{'-raw' if raw else ''}.vlad")
        with open(path, "w") as fh:
            fh.write(src)
        try:
            r = subprocess.run([bin_, *flags, path], capture_output=True, text=True, timeout=60)
            out, err = r.stdout.strip().splitlines(), r.stderr.strip()
        except subprocess.TimeoutExpired:
            out, err = [], "timeout"
        if err or len(out) != len(checks):
            print(f"seed {seed}: error: {err[:300]}")
            bad += 1
            continue
        problems = []
        for line, check in zip(out, checks):
            xs = [float(t.replace("+inf.0", "inf").replace("-inf.0", "-inf").replace("+nan.0", "nan"))
                  for t in NUM.findall(line)]
            if any(x != x for x in xs):
                continue  # NaN in the function itself (log/sqrt of a negative: none generated)
            for a, b in judge(check.split()[0], xs):
                if not agree(a, b):
                    problems.append(f"{check}: {a!r} vs {b!r} in {line}")
                    break
        if problems:
            bad += 1
            print(f"seed {seed}: " + "; ".join(problems))
        else:
            os.remove(path)
    print(f"{last - first + 1} seeds, {bad} with disagreements")


if __name__ == "__main__":
    main()
