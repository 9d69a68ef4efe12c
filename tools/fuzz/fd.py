#!/usr/bin/env python3
# Derivatives against finite differences: random smooth scalar functions (arithmetic,
# sqrt/exp/log/sin/cos/atan, let, lambda, list access, map/fold over lists, packed
# vectors (elementwise, scans, reductions, matrix products), reversible procedures
# (call, uncall, rev-grad), closures as the argument (environment sensitivities),
# Jacobians of functions into lists, vjp of functions into nested pairs, and inner
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
# Tolerance: |ad - fd| <= 1e-5 * (1 + |ad|) (1% past |ad| = 1e4, near a pole); fd is
# the central difference at h = 1e-4 and h/2, Richardson-extrapolated (error about
# h^4 f^(5) and 1e-16 |f| / h); a disagreement stands only if the differences at a
# quarter and a 64th of the step disagree too (near a singularity the error exceeds
# that estimate). Programs that disagree are kept as $TMPDIR/vlad-fd-SEED.vlad.
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
            return R.choice([f"(car (cdr (list {a()} {a()} {a()})))",
                             f"(list-ref (list {a()} {a()} {a()}) {R.randrange(3)})",
                             f"(list-ref (append (list {a()}) (list {a()} {a()})) {R.randrange(3)})",
                             f"(* {a()} (length (list {a()} {a()})))"])
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

    def vexpr(self, vs, d):
        """A vector of 3 doubles whose elements depend smoothly on the scalars `vs`."""
        R = self.R
        if d <= 0 or R.random() < 0.15:
            if R.random() < 0.3:
                return "(vector-of (list 1.0 2.0 -0.5))"
            a, b = R.choice(vs), R.choice(vs)
            return f"(vector-of (list {a} (sin {b}) 0.3))"
        a = lambda: self.vexpr(vs, d - 1)
        s = lambda: self.expr(vs, min(d - 1, 1))
        k = R.randrange(16)
        if k < 3:
            return f"({R.choice(['vec+', 'vec-', 'vec*'])} {a()} {a()})"
        if k == 3:
            return f"(vec/ {a()} (vec-shift 2.0 (vec* {a()} {a()})))"
        if k == 4:
            return f"(vec-scale {s()} {a()})"
        if k == 5:
            return f"(vec-exp (vec-scale 0.3 (vec-sin {a()})))"
        if k == 6:
            return f"(vec-log (vec-shift 1.5 (vec-cos {a()})))"
        if k == 7:
            return f"(vec-sqrt (vec-shift 1.0 (vec* {a()} {a()})))"
        if k == 8:
            return f"(vec-tanh {a()})"
        if k == 9:
            return f"(vec-prefix-sum {a()})"
        if k == 10:
            return f"(vec-suffix-sum {a()})"
        if k == 11:
            return f"(mat-vec (vec-outer {a()} {a()}) {a()})"
        if k == 12:
            return f"(vec-mat {a()} (transpose (vec-reshape (vec-outer {a()} {a()}) 3 3)))"
        if k == 13:
            return f"(vec-neg {a()})"
        if k == 14:
            return f"(vec-fill {a()} {s()})"
        return f"(vector-of (map (lambda (e) (* e {R.choice(vs)})) (list-of {a()})))"

    def rev_stmt(self, d):
        """A statement of a reversible procedure over the doubles y a b."""
        R = self.R
        vars_ = ["y", "a", "b"]
        v = R.choice(vars_)
        others = [u for u in vars_ if u != v]
        e = lambda: self.expr(others + others, R.choice([1, 2]))
        k = R.randrange(7)
        if k < 3:
            return f"({R.choice(['+=', '-='])} {v} {e()})"
        if k == 3:
            return f"(*= {v} (+ 1.5 (* 0.5 (sin {e()}))))"
        if k == 4:
            u = R.choice(others)
            return f"(swap {v} {u})"
        if k == 5 and d > 0:
            n = self.name("n")
            body = " ".join(self.rev_stmt(d - 1) for _ in range(R.choice([1, 2])))
            return (f"(local ({n} 0) (from-loop (= {n} 0) (begin-rev {body} (+= {n} 1)) (skip) (= {n} 2)) "
                    f"(delocal {n} 2))")
        return f"(+= {v} (* 0.25 {e()}))"

    def vreduce(self, vs, d):
        R = self.R
        k = R.randrange(4)
        if k == 0:
            return f"(vec-sum {self.vexpr(vs, d)})"
        if k == 1:
            return f"(vec-dot {self.vexpr(vs, d)} {self.vexpr(vs, d)})"
        if k == 2:
            return f"(vec-ref {self.vexpr(vs, d)} {R.randrange(3)})"
        return f"(fold-left + 0.0 (list-of {self.vexpr(vs, d)}))"


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
    # (central differences at h and h/2, Richardson-extrapolated: error O(h^4))
    lines.append("(define (cd f x h) (/ (- (f (+ x h)) (f (- x h))) (* 2.0 h)))")
    lines.append(FD_LINE)
    checks = []
    for i in range(6):
        rev = ""
        x0 = round(R.uniform(-1.2, 1.2), 3)
        body = g.expr(["x", "x", "x"], R.choice([2, 3, 3, 4]), leaf=0)
        f = f"(lambda (x) {body})"
        kind = R.randrange(8 if raw else 10)
        if kind == 7 and raw:
            kind = 9
        if kind == 9:
            # vjp of a function into a nested pair, with a sensitivity of that shape,
            # against fd of the sensitivity-weighted sum along each input
            vs = ["(car v)", "(cadr v)", "(car v)", "(cadr v)"]
            e1, e2, e3 = (g.expr(vs, R.choice([1, 2]), leaf=0) for _ in range(3))
            y0 = round(R.uniform(-1.2, 1.2), 3)
            s1, s2, s3 = (R.choice(["1.0", "-0.5", "2", "0.25"]) for _ in range(3))
            dot = f"(let (((cons a (list b c)) (F w))) (+ (* {s1} a) (+ (* {s2} b) (* {s3} c))))"
            lines.append(
                f"(let* ((F (lambda (v) (cons {e1} (list {e2} {e3})))) "
                f"(g (vjp F (list {x0} {y0}) (cons {s1} (list {s2} {s3}))))) "
                f"(list (fd (lambda (x) (let ((w (list x {y0}))) {dot})) {x0}) (car g) "
                f"(fd (lambda (y) (let ((w (list {x0} y))) {dot})) {y0}) (cadr g)))")
            checks.append(f"vjp #{i}")
            continue
        if kind == 8:
            # a Jacobian of a function of a 2-list into a 2-list, both modes, against fd
            # of each output along each input (value-and-vjp's value checked too)
            vs = ["(car v)", "(cadr v)", "(car v)", "(cadr v)"]
            e1, e2 = (g.expr(vs, R.choice([1, 2]), leaf=0) for _ in range(2))
            y0 = round(R.uniform(-1.2, 1.2), 3)
            fd_ij = [f"(fd (lambda (a) ({o} (F (list a {y0})))) {x0})" if j == 0 else
                     f"(fd (lambda (b) ({o} (F (list {x0} b)))) {y0})"
                     for o in ("car", "cadr") for j in range(2)]
            lines.append(
                f"(let* ((F (lambda (v) (list {e1} {e2}))) (p (list {x0} {y0})) "
                f"(jf ((jacobian-F F) p)) (jr ((jacobian-R F) p))) "
                f"(list {' '.join(fd_ij)} (list-ref (car jf) 0) (list-ref (car jf) 1) "
                f"(list-ref (cadr jf) 0) (list-ref (cadr jf) 1) (list-ref (car jr) 0) (list-ref (car jr) 1) "
                f"(list-ref (cadr jr) 0) (list-ref (cadr jr) 1) "
                f"(car (car (value-and-vjp F p (list 1.0 0.0)))) (car (F p))))")
            checks.append(f"jac #{i}")
            continue
        if kind == 7:
            # a derivative with respect to a closure (its environment's sensitivity,
            # paper 003): F of a closure over k, by gradient-R and gradient-F (a
            # closure whose k is dF/dk, applied here at 0.3) and by jvp along a
            # closure whose k is 1, against fd of k -> F(closure over k)
            e = g.expr(["u", "u"], R.choice([1, 2]), leaf=0)
            pts = [f"(gf {c})" for c in ("0.7", "-0.4", "1.1")]
            body = g.expr(pts + pts, R.choice([1, 2]), leaf=0)
            lines.append(
                f"(let* ((mk (lambda (k) (lambda (u) (* k {e})))) (F (lambda (gf) {body})) "
                f"(e0 ((lambda (u) {e}) 0.3)) (d (fd (lambda (k) (F (mk k))) {x0}))) "
                f"(list (* e0 d) (((gradient-R F) (mk {x0})) 0.3) (((gradient-F F) (mk {x0})) 0.3) "
                f"(jvp F (mk {x0}) (mk 1.0)) d))")
            checks.append(f"clo #{i}")
            continue
        if kind == 6:
            # a reversible procedure: derivatives through call and uncall (by its
            # backward run) and its own rev-grad, against fd
            p = g.name("rp")
            stmts = "\n  ".join(g.rev_stmt(2) for _ in range(R.choice([2, 3, 4])))
            lines.append(f"(define-reversible ({p} y a b)\n  {stmts})")
            args = ["0.5", "0.75", "-0.25"]
            at = R.randrange(3)
            args[at] = "x"
            k = R.randrange(3)
            run = R.choice(["call", "call", "uncall"])
            pick = ["car", "cadr", "caddr"][k]
            f = f"(lambda (x) ({pick} ({run} {p} {' '.join(args)})))"
            if R.random() < 0.4:
                grad_args = " ".join(a if a != "x" else str(x0) for a in args)
                own = f" (list-ref (rev-grad {p} {k} {grad_args}) {at})" if run == "call" else ""
                lines.append(f"(let ((f {f})) (list (fd f {x0}) ((derivative-F f) {x0}) ((derivative-R f) {x0}){own}))")
                checks.append(f"rev #{i}")
                continue
            kind = R.choice([0, 1])
            # (doubles are only approximately reversible: the backward run that gives
            # derivative-R recomputes the values by the inverse updates, to about 1e-9
            # relative in these loops, which a difference of it magnifies by 1/h)
            rev = "r"
        if kind == 5:
            # packed vectors: a first and a second derivative of a reduction of vector code
            body = g.vreduce(["x", "x"], R.choice([1, 2, 3]))
            f = f"(lambda (x) {body})"
            if R.random() < 0.5:
                kind = 0
            else:
                kind = 1
        if kind == 0:
            # first derivative, both modes, against fd of f
            lines.append(f"(let ((f {f})) (list (fd f {x0}) ((derivative-F f) {x0}) ((derivative-R f) {x0})))")
            checks.append(f"d1{rev} #{i}")
        elif kind == 1:
            # second derivative, all four mixes, against fd of f' by each mode
            lines.append(
                f"(let ((f {f})) (list (fd (derivative-F f) {x0}) (fd (derivative-R f) {x0}) "
                + " ".join(f"((derivative-{a} (derivative-{b} f)) {x0})" for a in MODES for b in MODES)
                + "))")
            checks.append(f"d2{rev} #{i}")
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


def agree(ad, fd, loose=False):
    # (a derivative past 1e4 means a pole near by, where the finite difference's
    # error, h^4 f^(5), grows faster: there 1% is asked)
    tol = 1e-5 * (1 + abs(ad)) if abs(ad) < 1e4 else 1e-2 * abs(ad)
    if loose:
        tol = max(tol, 1e-3 * (1 + abs(ad)))
    return abs(ad - fd) <= tol


def judge(kind, xs):
    """The pairs (ad, fd) a check's printed list must satisfy."""
    if kind == "d1":
        return [(xs[1], xs[0]), (xs[2], xs[0]), (xs[1], xs[2])]
    if kind == "rev":
        # (derivative-F, derivative-R, and rev-grad where the function is call's)
        return [(x, xs[0]) for x in xs[1:]]
    if kind == "vjp":
        return [(xs[1], xs[0]), (xs[3], xs[2])]
    if kind == "jac":
        return [(xs[4 + k], xs[k]) for k in range(4)] + [(xs[8 + k], xs[k]) for k in range(4)] + [(xs[12], xs[13])]
    if kind == "clo":
        return [(xs[1], xs[0]), (xs[2], xs[0]), (xs[3], xs[4])]
    if kind == "d3":
        return [(xs[1], xs[0])]
    if kind == "d2":
        fdF, fdR, ad = xs[0], xs[1], xs[2:]
        return [(fdF, fdR)] + [(a, fdF) for a in ad] + [(a, ad[0]) for a in ad]
    return [(xs[1], xs[0]), (xs[2], xs[0]), (xs[4], xs[3]), (xs[5], xs[3])]


FD_LINE = "(define (fd f x) (/ (- (* 4.0 (cd f x 5e-5)) (cd f x 1e-4)) 3.0))"
# (the same at a quarter and at a 64th of the step: second opinions where the first
# disagrees, for a pole nearer than the step)
FD_LINES_FINE = [
    "(define (fd f x) (/ (- (* 4.0 (cd f x 1.25e-5)) (cd f x 2.5e-5)) 3.0))",
    "(define (fd f x) (/ (- (* 4.0 (cd f x 7.8125e-7)) (cd f x 1.5625e-6)) 3.0))",
]


def run_checks(bin_, flags, path, src, checks):
    """The disagreements of a program's checks (an error as one), or `[]`."""
    with open(path, "w") as fh:
        fh.write(src)
    try:
        r = subprocess.run([bin_, *flags, path], capture_output=True, text=True, timeout=60)
        out = r.stdout.strip().splitlines()
        # (--metered's counts are not errors)
        err = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("metered:")).strip()
    except subprocess.TimeoutExpired:
        out, err = [], "timeout"
    if err or len(out) != len(checks):
        return [f"error: {err[:300]}"]
    problems = []
    for line, check in zip(out, checks):
        xs = [float(t.replace("+inf.0", "inf").replace("-inf.0", "-inf").replace("+nan.0", "nan"))
              for t in NUM.findall(line)]
        if any(x != x for x in xs):
            continue  # NaN in the function itself (log/sqrt of a negative: none generated)
        kind = check.split()[0]
        loose = kind.endswith("r")
        for a, b in judge(kind.rstrip("r"), xs):
            if not agree(a, b, loose):
                problems.append(f"{check}: {a!r} vs {b!r} in {line}")
                break
    return problems


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
        problems = run_checks(bin_, flags, path, src, checks)
        for fine in FD_LINES_FINE:
            if not problems or problems[0].startswith("error"):
                break
            # (a finite difference near a singularity errs more than h^4 suggests:
            # a disagreement stands only if the finer differences disagree too)
            problems = run_checks(bin_, flags, path, src.replace(FD_LINE, fine), checks)
        if problems:
            bad += 1
            print(f"seed {seed}: " + "; ".join(problems))
        else:
            os.remove(path)
    print(f"{last - first + 1} seeds, {bad} with disagreements")


if __name__ == "__main__":
    main()
