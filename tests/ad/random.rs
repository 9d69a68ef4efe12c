//! Item 2: random small VLAD programs f(x) built from arithmetic, safe unary
//! functions, `let`, closures over x and intermediates (applied later, curried,
//! passed to higher-order procedures, stored in pairs, chosen by conditionals,
//! composed in a loop), pairs and lists, conditionals on comparisons (kept away
//! from their switching points), bounded recursion (tail loops, non-tail
//! recursion, map/reduce) and, in the second test, derivatives taken inside the
//! program of closures over x.
//!
//! Each program is also evaluated by a small Rust interpreter of the
//! generator's syntax tree over truncated Taylor numbers (hyper-dual numbers
//! with four nilpotent infinitesimals), which gives the primal value, exact
//! first and second derivatives, the inner derivatives, and finite differences,
//! all independently of VLAD. For each program: VLAD's primal equals the Rust
//! value; the derivative by `*j` (derivative-R) equals forward mode
//! (derivative-F), the Taylor derivative and central finite differences; and
//! (for every other program) the four second-derivative nestings agree with
//! each other, the Taylor value and finite differences.
//!
//! Deterministic: seeded by case number. A failure prints the program.

use crate::common::*;
use crate::rng::Rng;

/// Number of infinitesimals: two for the outer first/second derivative, two
/// for derivatives taken inside the program.
const K: usize = 4;
const N: usize = 1 << K;

/// A truncated Taylor number: the coefficient of each product of distinct
/// infinitesimals ε_i (ε_i² = 0), indexed by bitmask.
#[derive(Clone, Copy, Debug)]
struct H([f64; N]);

impl H {
    fn c(v: f64) -> H {
        let mut a = [0.0; N];
        a[0] = v;
        H(a)
    }
    fn p(&self) -> f64 {
        self.0[0]
    }
    fn add(self, o: H) -> H {
        H(std::array::from_fn(|i| self.0[i] + o.0[i]))
    }
    fn sub(self, o: H) -> H {
        H(std::array::from_fn(|i| self.0[i] - o.0[i]))
    }
    fn scale(self, k: f64) -> H {
        H(self.0.map(|v| v * k))
    }
    fn mul(self, o: H) -> H {
        let mut r = [0.0; N];
        for i in 0..N {
            if self.0[i] == 0.0 {
                continue;
            }
            for j in 0..N {
                if i & j == 0 {
                    r[i | j] += self.0[i] * o.0[j];
                }
            }
        }
        H(r)
    }
    /// f(a + δ) = Σ f⁽ⁿ⁾(a) δⁿ / n! given f⁽ⁿ⁾(a), n = 0..=K.
    fn apply(self, ders: [f64; K + 1]) -> H {
        let mut delta = self;
        delta.0[0] = 0.0;
        let mut pow = H::c(1.0);
        let mut r = H::c(0.0);
        let mut fact = 1.0;
        for (n, d) in ders.iter().enumerate() {
            if n > 0 {
                pow = pow.mul(delta);
                fact *= n as f64;
            }
            r = r.add(pow.scale(d / fact));
        }
        r
    }
    fn sin(self) -> H {
        let (s, c) = self.p().sin_cos();
        self.apply([s, c, -s, -c, s])
    }
    fn cos(self) -> H {
        let (s, c) = self.p().sin_cos();
        self.apply([c, -s, -c, s, c])
    }
    fn exp(self) -> H {
        let e = self.p().exp();
        self.apply([e; K + 1])
    }
    fn recip(self) -> H {
        let a = self.p();
        self.apply([1.0 / a, -1.0 / (a * a), 2.0 / a.powi(3), -6.0 / a.powi(4), 24.0 / a.powi(5)])
    }
    /// The coefficient of ε_k, a Taylor number in the other infinitesimals.
    fn d(self, k: usize) -> H {
        let bit = 1 << k;
        H(std::array::from_fn(|m| if m & bit == 0 { self.0[m | bit] } else { 0.0 }))
    }
    fn eps(k: usize) -> H {
        let mut a = [0.0; N];
        a[1 << k] = 1.0;
        H(a)
    }
}

#[derive(Clone, Debug)]
enum E {
    Var(String),
    /// A constant and its source text (exact integers stay exact in VLAD).
    Const(f64, String),
    Bin(char, Box<E>, Box<E>),
    /// `(/ a (+ 2.0 (* b b)))`
    SafeDiv(Box<E>, Box<E>),
    Un(&'static str, Box<E>),
    Let(String, Box<E>, Box<E>),
    /// `(let ((g (lambda (params) fbody))) (op (g args) body))`
    LetFun {
        g: String,
        params: Vec<String>,
        fbody: Box<E>,
        args: Vec<E>,
        op: char,
        body: Box<E>,
    },
    Call(String, Vec<E>),
    /// `(((lambda (a) (lambda (b) fbody)) arg1) arg2)`
    Curry {
        a: String,
        b: String,
        fbody: Box<E>,
        arg1: Box<E>,
        arg2: Box<E>,
    },
    /// `((lambda (g) (g (g arg))) (lambda (y) fbody))`
    Twice {
        y: String,
        fbody: Box<E>,
        arg: Box<E>,
    },
    /// `(car (cons a b))` (`first`) or `(cdr (cons a b))`
    Proj {
        first: bool,
        a: Box<E>,
        b: Box<E>,
    },
    /// Binds u and w to two values through a pair, in one of five ways.
    Pair {
        how: usize,
        p: String,
        u: String,
        w: String,
        a: Box<E>,
        b: Box<E>,
        body: Box<E>,
    },
    /// `(if (cmp lhs c) then else)`, cmp one of `<`, `>`, or `(positive? (- lhs c))`.
    If {
        cmp: usize,
        lhs: Box<E>,
        c: f64,
        then: Box<E>,
        els: Box<E>,
    },
    /// `(let loop ((i 0) (acc init)) (if (= i k) acc (loop (+ i 1) step)))`
    Loop {
        i: String,
        acc: String,
        k: usize,
        init: Box<E>,
        step: Box<E>,
    },
    /// `(let rec ((n k)) (if (= n 0) base (let ((r (rec (- n 1)))) step)))`
    Rec {
        f: String,
        n: String,
        r: String,
        k: usize,
        base: Box<E>,
        step: Box<E>,
    },
    /// `(reduce + 0 (map (lambda (y) fbody) (list items...)))`
    MapSum {
        y: String,
        fbody: Box<E>,
        items: Vec<E>,
    },
    /// `(let ((q (cons (lambda (y) fbody) c))) (+ ((car q) arg) (cdr q)))`
    ClosurePair {
        q: String,
        y: String,
        fbody: Box<E>,
        c: Box<E>,
        arg: Box<E>,
    },
    /// `((if (< lhs c) (lambda (y) b1) (lambda (y) b2)) arg)`
    IfClosure {
        lhs: Box<E>,
        c: f64,
        y: String,
        b1: Box<E>,
        b2: Box<E>,
        arg: Box<E>,
    },
    /// Closures composed in a loop: `(let loop ((i 0) (h (lambda (y) y))) (if (= i k) (h arg)
    /// (loop (+ i 1) (lambda (y) (let ((hy (h y))) step)))))`
    Compose {
        i: String,
        h: String,
        y: String,
        hy: String,
        k: usize,
        step: Box<E>,
        arg: Box<E>,
    },
    /// `((derivative-F (lambda (y) fbody)) arg)` (or `-R`) inside the program.
    InnerD {
        rev: bool,
        y: String,
        fbody: Box<E>,
        arg: Box<E>,
    },
}

#[derive(Clone, Default)]
struct Scope {
    reals: Vec<String>,
    funs: Vec<(String, usize)>,
}

impl Scope {
    fn with(&self, names: &[&String]) -> Scope {
        let mut s = self.clone();
        s.reals.extend(names.iter().map(|n| (*n).clone()));
        s
    }
}

struct Gen {
    rng: Rng,
    id: usize,
    /// How many more inner derivatives may be generated (at most 2: the Taylor
    /// numbers have two spare infinitesimals).
    inner_left: usize,
}

const CONSTS: &[(f64, &str)] = &[
    (0.5, "0.5"),
    (1.5, "1.5"),
    (2.0, "2"),
    (-0.75, "-0.75"),
    (3.0, "3"),
    (0.25, "0.25"),
    (1.0, "1"),
    (-2.0, "-2.0"),
];

/// Relative weights of the forms (index = the match arm in `Gen::expr`).
const WEIGHTS: &[usize] = &[9, 2, 4, 2, 2, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 2];

impl Gen {
    fn name(&mut self, base: &str) -> String {
        self.id += 1;
        format!("{}{}", base, self.id)
    }

    fn leaf(&mut self, sc: &Scope) -> E {
        if !sc.reals.is_empty() && self.rng.chance(0.8) {
            // prefer the most recently bound variables (parameters, accumulators)
            let n = sc.reals.len();
            let i = if self.rng.chance(0.5) { n - 1 - self.rng.below(n.min(3)) } else { self.rng.below(n) };
            E::Var(sc.reals[i].clone())
        } else {
            let (v, t) = *self.rng.pick(CONSTS);
            E::Const(v, t.to_string())
        }
    }

    fn form(&mut self) -> usize {
        let total: usize = WEIGHTS.iter().sum();
        let mut r = self.rng.below(total);
        for (i, w) in WEIGHTS.iter().enumerate() {
            if r < *w {
                return i;
            }
            r -= w;
        }
        unreachable!()
    }

    /// An expression of size about `size` whose value is a real.
    fn expr(&mut self, sc: &Scope, size: usize) -> E {
        if size <= 1 {
            return self.leaf(sc);
        }
        let s = size - 1;
        let half = |g: &mut Gen| 1 + g.rng.below(s.max(1));
        let b = Box::new;
        loop {
            let e = match self.form() {
                0 => {
                    let k = half(self);
                    let op = *self.rng.pick(&['+', '-', '*', '*']);
                    E::Bin(op, b(self.expr(sc, k)), b(self.expr(sc, s.saturating_sub(k).max(1))))
                }
                1 => {
                    let k = half(self);
                    E::SafeDiv(b(self.expr(sc, k)), b(self.expr(sc, s.saturating_sub(k).max(1))))
                }
                2 => {
                    let f = *self.rng.pick(&["sin", "cos", "exp"]);
                    E::Un(f, b(self.expr(sc, s)))
                }
                3 => {
                    let v = self.name("v");
                    let k = half(self);
                    let bound = self.expr(sc, k);
                    let body = self.expr(&sc.with(&[&v]), s.saturating_sub(k).max(1));
                    E::Let(v, b(bound), b(body))
                }
                4 => {
                    let g = self.name("g");
                    let np = 1 + self.rng.below(2);
                    let params: Vec<String> = (0..np).map(|_| self.name("p")).collect();
                    let fsc = sc.with(&params.iter().collect::<Vec<_>>());
                    let fbody = self.expr(&fsc, s / 2 + 1);
                    let args = (0..np).map(|_| self.expr(sc, 1 + s / 4)).collect();
                    let mut bsc = sc.clone();
                    bsc.funs.push((g.clone(), np));
                    let body = self.expr(&bsc, s / 2 + 1);
                    let op = *self.rng.pick(&['+', '*', '-']);
                    E::LetFun { g, params, fbody: b(fbody), args, op, body: b(body) }
                }
                5 => {
                    if sc.funs.is_empty() {
                        continue;
                    }
                    let (g, np) = self.rng.pick(&sc.funs).clone();
                    E::Call(g, (0..np).map(|_| self.expr(sc, 1 + s / np)).collect())
                }
                6 => {
                    let (a, bb) = (self.name("a"), self.name("b"));
                    let fbody = self.expr(&sc.with(&[&a, &bb]), s / 2 + 1);
                    E::Curry {
                        a,
                        b: bb,
                        fbody: b(fbody),
                        arg1: b(self.expr(sc, 1 + s / 4)),
                        arg2: b(self.expr(sc, 1 + s / 4)),
                    }
                }
                7 => {
                    let y = self.name("y");
                    let fbody = self.expr(&sc.with(&[&y]), s / 2 + 1);
                    E::Twice { y, fbody: b(fbody), arg: b(self.expr(sc, 1 + s / 2)) }
                }
                8 => {
                    let k = half(self);
                    E::Proj {
                        first: self.rng.chance(0.5),
                        a: b(self.expr(sc, k)),
                        b: b(self.expr(sc, s.saturating_sub(k).max(1))),
                    }
                }
                9 => {
                    let (p, u, w) = (self.name("q"), self.name("u"), self.name("w"));
                    let x1 = self.expr(sc, 1 + s / 4);
                    let x2 = self.expr(sc, 1 + s / 4);
                    let body = self.expr(&sc.with(&[&u, &w]), s / 2 + 1);
                    E::Pair { how: self.rng.below(5), p, u, w, a: b(x1), b: b(x2), body: b(body) }
                }
                10 => E::If {
                    cmp: self.rng.below(3),
                    lhs: b(self.expr(sc, 1 + s / 3)),
                    c: self.threshold(),
                    then: b(self.expr(sc, 1 + s / 3)),
                    els: b(self.expr(sc, 1 + s / 3)),
                },
                11 => {
                    let (i, acc) = (self.name("i"), self.name("acc"));
                    let init = self.expr(sc, 1 + s / 3);
                    let step = self.expr(&sc.with(&[&i, &acc]), 1 + s / 2);
                    E::Loop { i, acc, k: 1 + self.rng.below(4), init: b(init), step: b(step) }
                }
                12 => {
                    let (f, n, r) = (self.name("rec"), self.name("n"), self.name("r"));
                    let base = self.expr(sc, 1 + s / 3);
                    let step = self.expr(&sc.with(&[&n, &r]), 1 + s / 2);
                    E::Rec { f, n, r, k: 1 + self.rng.below(4), base: b(base), step: b(step) }
                }
                13 => {
                    let y = self.name("y");
                    let fbody = self.expr(&sc.with(&[&y]), 1 + s / 2);
                    let ni = 1 + self.rng.below(3);
                    let items = (0..ni).map(|_| self.expr(sc, 1 + s / (2 * ni))).collect();
                    E::MapSum { y, fbody: b(fbody), items }
                }
                14 => {
                    let (q, y) = (self.name("q"), self.name("y"));
                    let fbody = self.expr(&sc.with(&[&y]), 1 + s / 2);
                    E::ClosurePair {
                        q,
                        y,
                        fbody: b(fbody),
                        c: b(self.expr(sc, 1 + s / 4)),
                        arg: b(self.expr(sc, 1 + s / 4)),
                    }
                }
                15 => {
                    let y = self.name("y");
                    let ysc = sc.with(&[&y]);
                    E::IfClosure {
                        lhs: b(self.expr(sc, 1 + s / 4)),
                        c: self.threshold(),
                        b1: b(self.expr(&ysc, 1 + s / 3)),
                        b2: b(self.expr(&ysc, 1 + s / 3)),
                        y,
                        arg: b(self.expr(sc, 1 + s / 4)),
                    }
                }
                16 => {
                    let (i, h, y, hy) = (self.name("i"), self.name("h"), self.name("y"), self.name("hy"));
                    let step = self.expr(&sc.with(&[&i, &y, &hy]), 1 + s / 2);
                    E::Compose {
                        i,
                        h,
                        y,
                        hy,
                        k: self.rng.below(4),
                        step: b(step),
                        arg: b(self.expr(sc, 1 + s / 3)),
                    }
                }
                17 | 18 => {
                    if self.inner_left == 0 {
                        continue;
                    }
                    self.inner_left -= 1;
                    let y = self.name("y");
                    let fbody = self.expr(&sc.with(&[&y]), 1 + s / 2);
                    E::InnerD {
                        rev: self.rng.chance(0.5),
                        y,
                        fbody: b(fbody),
                        arg: b(self.expr(sc, 1 + s / 3)),
                    }
                }
                _ => unreachable!(),
            };
            return e;
        }
    }

    fn threshold(&mut self) -> f64 {
        (self.rng.unit() * 32.0).round() / 8.0 - 2.0
    }
}

fn src(e: &E) -> String {
    let list = |es: &[E]| es.iter().map(src).collect::<Vec<_>>().join(" ");
    match e {
        E::Var(v) => v.clone(),
        E::Const(_, t) => t.clone(),
        E::Bin(op, a, b) => format!("({} {} {})", op, src(a), src(b)),
        E::SafeDiv(a, b) => format!("(/ {} (+ 2.0 (* {} {})))", src(a), src(b), src(b)),
        E::Un(f, a) => format!("({} {})", f, src(a)),
        E::Let(v, a, b) => format!("(let (({} {})) {})", v, src(a), src(b)),
        E::LetFun { g, params, fbody, args, op, body } => format!(
            "(let (({} (lambda ({}) {}))) ({} ({} {}) {}))",
            g,
            params.join(" "),
            src(fbody),
            op,
            g,
            list(args),
            src(body)
        ),
        E::Call(g, args) => format!("({} {})", g, list(args)),
        E::Curry { a, b, fbody, arg1, arg2 } => {
            format!("(((lambda ({}) (lambda ({}) {})) {}) {})", a, b, src(fbody), src(arg1), src(arg2))
        }
        E::Twice { y, fbody, arg } => {
            format!("((lambda (g) (g (g {}))) (lambda ({}) {}))", src(arg), y, src(fbody))
        }
        E::Proj { first, a, b } => {
            format!("({} (cons {} {}))", if *first { "car" } else { "cdr" }, src(a), src(b))
        }
        E::Pair { how, p, u, w, a, b, body } => {
            let (a, b, body) = (src(a), src(b), src(body));
            match how {
                0 => format!("(let* (({p} (cons {a} {b})) ({u} (car {p})) ({w} (cdr {p}))) {body})"),
                1 => format!("(let (((cons {u} {w}) (cons {a} {b}))) {body})"),
                2 => format!("((lambda ({u} {w}) {body}) {a} {b})"),
                3 => format!(
                    "(let* (({p} (list {a} 7.0 {b})) ({u} (list-ref {p} 0)) ({w} (caddr {p}))) {body})"
                ),
                _ => format!("(let (((list {u} {w}) (reverse (list {b} {a})))) {body})"),
            }
        }
        E::If { cmp, lhs, c, then, els } => {
            let c = lit(*c);
            let test = match cmp {
                0 => format!("(< {} {})", src(lhs), c),
                1 => format!("(> {} {})", src(lhs), c),
                _ => format!("(positive? (- {} {}))", src(lhs), c),
            };
            format!("(if {} {} {})", test, src(then), src(els))
        }
        E::Loop { i, acc, k, init, step } => format!(
            "(let loop (({i} 0) ({acc} {})) (if (= {i} {k}) {acc} (loop (+ {i} 1) {})))",
            src(init),
            src(step)
        ),
        E::Rec { f, n, r, k, base, step } => format!(
            "(let {f} (({n} {k})) (if (= {n} 0) {} (let (({r} ({f} (- {n} 1)))) {})))",
            src(base),
            src(step)
        ),
        E::MapSum { y, fbody, items } => {
            format!("(reduce + 0 (map (lambda ({}) {}) (list {})))", y, src(fbody), list(items))
        }
        E::ClosurePair { q, y, fbody, c, arg } => format!(
            "(let (({q} (cons (lambda ({y}) {}) {}))) (+ ((car {q}) {}) (cdr {q})))",
            src(fbody),
            src(c),
            src(arg)
        ),
        E::IfClosure { lhs, c, y, b1, b2, arg } => format!(
            "((if (< {} {}) (lambda ({y}) {}) (lambda ({y}) {})) {})",
            src(lhs),
            lit(*c),
            src(b1),
            src(b2),
            src(arg)
        ),
        E::Compose { i, h, y, hy, k, step, arg } => format!(
            "(let loop (({i} 0) ({h} (lambda ({y}) {y}))) (if (= {i} {k}) ({h} {}) \
             (loop (+ {i} 1) (lambda ({y}) (let (({hy} ({h} {y}))) {})))))",
            src(arg),
            src(step)
        ),
        E::InnerD { rev, y, fbody, arg } => format!(
            "((derivative-{} (lambda ({}) {})) {})",
            if *rev { "R" } else { "F" },
            y,
            src(fbody),
            src(arg)
        ),
    }
}

/// The Rust interpreter of the generated syntax tree. Names are unique, so the
/// environment at a call site extends the one where the procedure was created.
struct Eval<'a> {
    env: Vec<(&'a str, H)>,
    funs: Vec<(&'a str, &'a [String], &'a E)>,
    /// Branch decisions taken, in order, and the smallest distance of a test to its threshold.
    decisions: Vec<bool>,
    margin: f64,
    max_abs: f64,
    /// Inner derivatives in progress (each uses infinitesimal 2 + its depth).
    active: usize,
}

impl<'a> Eval<'a> {
    fn get(&self, v: &str) -> H {
        self.env.iter().rev().find(|(n, _)| *n == v).unwrap_or_else(|| panic!("unbound {}", v)).1
    }

    fn bind<R>(&mut self, names: &[(&'a str, H)], f: impl FnOnce(&mut Self) -> R) -> R {
        let n = self.env.len();
        self.env.extend_from_slice(names);
        let r = f(self);
        self.env.truncate(n);
        r
    }

    fn decide(&mut self, l: H, c: f64, less: bool) -> bool {
        self.margin = self.margin.min((l.p() - c).abs());
        let t = if less { l.p() < c } else { l.p() > c };
        self.decisions.push(t);
        t
    }

    fn ev(&mut self, e: &'a E) -> H {
        let v = match e {
            E::Var(v) => self.get(v),
            E::Const(c, _) => H::c(*c),
            E::Bin(op, a, b) => {
                let (a, b) = (self.ev(a), self.ev(b));
                match op {
                    '+' => a.add(b),
                    '-' => a.sub(b),
                    _ => a.mul(b),
                }
            }
            E::SafeDiv(a, b) => {
                let a = self.ev(a);
                let b = self.ev(b);
                a.mul(H::c(2.0).add(b.mul(b)).recip())
            }
            E::Un(f, a) => {
                let a = self.ev(a);
                match *f {
                    "sin" => a.sin(),
                    "cos" => a.cos(),
                    _ => a.exp(),
                }
            }
            E::Let(v, a, b) => {
                let a = self.ev(a);
                self.bind(&[(v, a)], |s| s.ev(b))
            }
            E::LetFun { g, params, fbody, args, op, body } => {
                self.funs.push((g, params, fbody));
                let call = self.call(g, args);
                let rest = self.ev(body);
                self.funs.pop();
                match op {
                    '+' => call.add(rest),
                    '-' => call.sub(rest),
                    _ => call.mul(rest),
                }
            }
            E::Call(g, args) => self.call(g, args),
            E::Curry { a, b, fbody, arg1, arg2 } => {
                let x1 = self.ev(arg1);
                let x2 = self.ev(arg2);
                self.bind(&[(a, x1), (b, x2)], |s| s.ev(fbody))
            }
            E::Twice { y, fbody, arg } => {
                let x = self.ev(arg);
                let once = self.bind(&[(y, x)], |s| s.ev(fbody));
                self.bind(&[(y, once)], |s| s.ev(fbody))
            }
            E::Proj { first, a, b } => {
                let (a, b) = (self.ev(a), self.ev(b));
                if *first {
                    a
                } else {
                    b
                }
            }
            E::Pair { u, w, a, b, body, .. } => {
                let (a, b) = (self.ev(a), self.ev(b));
                self.bind(&[(u, a), (w, b)], |s| s.ev(body))
            }
            E::If { lhs, c, then, els, cmp } => {
                let l = self.ev(lhs);
                if self.decide(l, *c, *cmp == 0) {
                    self.ev(then)
                } else {
                    self.ev(els)
                }
            }
            E::Loop { i, acc, k, init, step } => {
                let mut a = self.ev(init);
                for j in 0..*k {
                    a = self.bind(&[(i, H::c(j as f64)), (acc, a)], |s| s.ev(step));
                }
                a
            }
            E::Rec { n, r, k, base, step, .. } => self.rec(n, r, *k, base, step),
            E::MapSum { y, fbody, items } => {
                let vals: Vec<H> = items.iter().map(|it| self.ev(it)).collect();
                // reduce is a right fold starting from 0
                vals.iter().rev().fold(H::c(0.0), |acc, v| self.bind(&[(y, *v)], |s| s.ev(fbody)).add(acc))
            }
            E::ClosurePair { y, fbody, c, arg, .. } => {
                let c = self.ev(c);
                let a = self.ev(arg);
                self.bind(&[(y, a)], |s| s.ev(fbody)).add(c)
            }
            E::IfClosure { lhs, c, y, b1, b2, arg } => {
                let l = self.ev(lhs);
                let body = if self.decide(l, *c, true) { b1 } else { b2 };
                let a = self.ev(arg);
                self.bind(&[(y, a)], |s| s.ev(body))
            }
            E::Compose { i, y, hy, k, step, arg, .. } => {
                let a = self.ev(arg);
                self.compose(i, y, hy, *k, step, a)
            }
            E::InnerD { y, fbody, arg, .. } => {
                let a = self.ev(arg);
                let k = 2 + self.active;
                assert!(k < K, "too many nested inner derivatives");
                self.active += 1;
                let r = self.bind(&[(y, a.add(H::eps(k)))], |s| s.ev(fbody));
                self.active -= 1;
                r.d(k)
            }
        };
        self.max_abs = self.max_abs.max(v.p().abs());
        if !v.p().is_finite() {
            self.max_abs = f64::INFINITY;
        }
        v
    }

    fn rec(&mut self, n: &'a str, r: &'a str, k: usize, base: &'a E, step: &'a E) -> H {
        if k == 0 {
            return self.ev(base);
        }
        let below = self.rec(n, r, k - 1, base, step);
        self.bind(&[(n, H::c(k as f64)), (r, below)], |s| s.ev(step))
    }

    /// h_k(y) where h_0 = identity and h_{j+1}(y) = step[i := j, hy := h_j(y)].
    fn compose(&mut self, i: &'a str, y: &'a str, hy: &'a str, k: usize, step: &'a E, yv: H) -> H {
        if k == 0 {
            return yv;
        }
        let inner = self.compose(i, y, hy, k - 1, step, yv);
        self.bind(&[(i, H::c((k - 1) as f64)), (y, yv), (hy, inner)], |s| s.ev(step))
    }

    fn call(&mut self, g: &str, args: &'a [E]) -> H {
        let vals: Vec<H> = args.iter().map(|a| self.ev(a)).collect();
        let &(_, params, body) =
            self.funs.iter().rev().find(|(n, _, _)| *n == g).expect("procedure in scope");
        let binds: Vec<(&'a str, H)> = params.iter().map(|p| p.as_str()).zip(vals).collect();
        self.bind(&binds, |s| s.ev(body))
    }
}

struct Run {
    value: H,
    decisions: Vec<bool>,
    margin: f64,
    max_abs: f64,
}

fn eval_h(body: &E, x: H) -> Run {
    let mut ev = Eval {
        env: vec![("x", x)],
        funs: vec![],
        decisions: vec![],
        margin: f64::INFINITY,
        max_abs: 0.0,
        active: 0,
    };
    let value = ev.ev(body);
    Run { value, decisions: ev.decisions, margin: ev.margin, max_abs: ev.max_abs }
}

/// f(x) as a plain number.
fn value_at(body: &E, x: f64) -> f64 {
    eval_h(body, H::c(x)).value.p()
}

/// (f, f', f'') at x from Taylor numbers: x + ε0 + ε1.
fn taylor(body: &E, x: f64) -> (f64, f64, f64) {
    let v = eval_h(body, H::c(x).add(H::eps(0)).add(H::eps(1))).value;
    (v.0[0], v.0[1], v.0[3])
}

/// A program and its test point, if usable: values moderate, every conditional
/// deciding the same way with room to spare over the finite-difference
/// stencils, and the finite differences themselves trustworthy (two step sizes agree).
fn generate(case: u64, inner: bool) -> (E, f64) {
    let seed = 0x5eed_0000 + case * 7919 + if inner { 1 << 40 } else { 0 };
    let mut g = Gen { rng: Rng(seed), id: 0, inner_left: 0 };
    let root = Scope { reals: vec!["x".into()], funs: vec![] };
    loop {
        g.inner_left = if inner { 2 } else { 0 };
        let size = 6 + g.rng.below(16);
        let body = g.expr(&root, size);
        if inner && g.inner_left == 2 {
            continue;
        }
        let x0 = 0.3 + 1.2 * g.rng.unit();
        let x0 = (x0 * 1024.0).round() / 1024.0;
        let centre = eval_h(&body, H::c(x0));
        if centre.max_abs >= 1e3 || centre.margin < 0.05 {
            continue;
        }
        let same = [-0.05, -0.02, -0.01, 0.01, 0.02, 0.05].iter().all(|d| {
            let r = eval_h(&body, H::c(x0 + d));
            r.decisions == centre.decisions && r.max_abs < 1e4
        });
        if !same {
            continue;
        }
        let f = |x: f64| value_at(&body, x);
        let (a, b) = (fd1(&f, x0, 1e-3), fd1(&f, x0, 5e-4));
        let (c, d) = (fd2(&f, x0, 1e-2), fd2(&f, x0, 5e-3));
        if close(a, b, 1e-8) && close(c, d, 1e-7) {
            return (body, x0);
        }
    }
}

/// Runs a generated program in a fresh session (on dual numbers and tapes, or
/// by the transform only): the session and the values, or the rendered error.
fn run_program(prog: &str, tape: bool) -> (vlad::toplevel::Session, Result<Vec<vlad::value::Value>, String>) {
    let mut s = session();
    s.m.set_max_steps(50_000_000);
    s.m.tape.enabled = tape;
    let r = s.run_text("random", prog).map_err(|e| e.render(&s.sources));
    (s, r)
}

fn check_case(case: u64, inner: bool, second: bool, tape: bool) -> Result<(), String> {
    let (body, x0) = generate(case, inner);
    let text = src(&body);
    let xs = lit(x0);
    let mut prog = format!(
        "(define (f x) {})\n(f {})\n((derivative-R f) {})\n((derivative-F f) {})\n",
        text, xs, xs, xs
    );
    if second {
        for (_, op) in nestings(2, "f") {
            prog.push_str(&format!("({} {})\n", op, xs));
        }
    }
    let fail = |msg: String| Err(format!("case {}: {}\nprogram:\n{}", case, msg, prog));
    let (s, vals) = run_program(&prog, tape);
    let vals = match vals {
        Ok(v) => v,
        Err(e) => return fail(format!("error: {}", e)),
    };
    // On dual numbers and tapes, every derivative of these programs runs there
    // (nothing in them makes a run give way to the transform), but where an
    // exact cotangent might be the transform's inexact one (as when a
    // polynomial's second derivative is a constant; an enclosing run then gives
    // way too, as the transform it ran meets its reals).
    if tape && ((s.m.tape.declined_runs != 0 && s.m.tape.exactness_declined == 0) || s.m.tape.runs == 0) {
        return fail(format!(
            "{} runs on dual numbers or tapes, {} gave way to the transform (first: {:?})",
            s.m.tape.runs, s.m.tape.declined_runs, s.m.tape.first_decline
        ));
    }
    // The same values as by the transform (within rounding: sensitivities
    // summed in another order). Exactness is not compared: where a pair's
    // sensitivity gives a real argument inside the pair a zero the tape does
    // not see, the transform's cotangent can be inexact where the tape's is
    // exact (e.g. `(let (((cons u w) (cons x 2))) (- x w))` at 0.75: 1.0 by
    // the transform, 1 on the tape); a known difference.
    if tape {
        let by_transform = match run_program(&prog, false).1 {
            Ok(v) => v,
            Err(e) => return fail(format!("error by the transform: {}", e)),
        };
        for (a, b) in vals.iter().zip(&by_transform) {
            let (x, y) = (a.as_f64(), b.as_f64());
            if x.is_none() || !close(x.unwrap(), y.unwrap_or(f64::NAN), 1e-12) {
                return fail(format!(
                    "on the tape {} but by the transform {}",
                    vlad::print::to_string(a),
                    vlad::print::to_string(b)
                ));
            }
        }
    }
    let got: Vec<f64> =
        match vals.iter().map(|v| v.as_f64().ok_or_else(|| vlad::print::to_string(v))).collect() {
            Ok(g) => g,
            Err(v) => return fail(format!("not a number: {}", v)),
        };
    let f = |x: f64| value_at(&body, x);
    let (primal, d1, d2) = taylor(&body, x0);
    if !close(got[0], primal, 1e-12) {
        return fail(format!("primal: VLAD {} vs Rust {}", got[0], primal));
    }
    let (dr, df) = (got[1], got[2]);
    let fd = fd1(&f, x0, 1e-3);
    if !close(dr, df, 1e-10) {
        return fail(format!("derivative-R {} vs derivative-F {} (Taylor {}, FD {})", dr, df, d1, fd));
    }
    if !close(dr, d1, 1e-10) || !close(dr, fd, 1e-5) {
        return fail(format!(
            "derivative-R {} and -F {} vs Taylor {} and finite differences {}",
            dr, df, d1, fd
        ));
    }
    if second {
        let fd_2 = fd2(&f, x0, 1e-2);
        for (k, (l, _)) in nestings(2, "f").iter().enumerate() {
            let v = got[3 + k];
            if !close(v, got[3], 1e-9) || !close(v, d2, 1e-9) || !close(v, fd_2, 1e-5) {
                return fail(format!(
                    "second derivative {} = {} vs FF = {}, Taylor {}, finite differences {}",
                    l, v, got[3], d2, fd_2
                ));
            }
        }
    }
    Ok(())
}

fn run_cases(cases: u64, inner: bool, tape: bool) {
    let mut failures = Vec::new();
    for case in 0..cases {
        if let Err(m) = check_case(case, inner, case % 2 == 0, tape) {
            failures.push(m);
        }
    }
    if !failures.is_empty() {
        let n = failures.len();
        failures.truncate(5);
        panic!("{} of {} random programs failed; first ones:\n\n{}", n, cases, failures.join("\n\n"));
    }
}

const CASES: u64 = 160;
const INNER_CASES: u64 = 64;

#[test]
fn random_programs() {
    run_cases(CASES, false, true);
}

/// The same, with `jvp`/`vjp` by the closure transforms only (`--no-tape`).
#[test]
fn random_programs_by_the_transform() {
    run_cases(CASES, false, false);
}

/// The same with one or two derivatives (either mode) of closures over x taken
/// inside the program, so every check is also a nesting / perturbation
/// confusion check.
#[test]
fn random_programs_with_inner_derivatives() {
    run_cases(INNER_CASES, true, true);
}

#[test]
fn random_programs_with_inner_derivatives_by_the_transform() {
    run_cases(INNER_CASES, true, false);
}

/// The Taylor-number oracle itself, on functions with known derivatives.
#[test]
fn taylor_oracle_sanity() {
    let x = H::c(0.7).add(H::eps(0)).add(H::eps(1));
    let y = x.mul(x).sin().mul(x.recip()).add(x.cos().exp());
    let f = |x: f64| (x * x).sin() / x + x.cos().exp();
    assert_close(y.0[1], fd1(&f, 0.7, 1e-3), 1e-9, "first");
    assert_close(y.0[3], fd2(&f, 0.7, 1e-2), 1e-7, "second");
    assert_close(y.0[1], y.0[2], 0.0, "symmetric");
    // d/dx [x · d/dy (x y²) at y = x] = d/dx 2x² = 4x, by an inner infinitesimal
    let inner = |xv: H| {
        let yv = xv.add(H::eps(2));
        xv.mul(yv).mul(yv).d(2)
    };
    assert_close(inner(x).0[1], 4.0 * 0.7, 1e-15, "nested");
}

/// The generator produces what it claims: every form appears in the cases.
#[test]
fn generator_covers_all_forms() {
    let mut seen = std::collections::BTreeSet::new();
    fn walk(e: &E, seen: &mut std::collections::BTreeSet<&'static str>) {
        let (name, kids): (&'static str, Vec<&E>) = match e {
            E::Var(_) => ("var", vec![]),
            E::Const(..) => ("const", vec![]),
            E::Bin(_, a, b) => ("bin", vec![a, b]),
            E::SafeDiv(a, b) => ("div", vec![a, b]),
            E::Un(_, a) => ("unary", vec![a]),
            E::Let(_, a, b) => ("let", vec![a, b]),
            E::LetFun { fbody, args, body, .. } => {
                let mut k: Vec<&E> = vec![fbody, body];
                k.extend(args.iter());
                ("closure", k)
            }
            E::Call(_, args) => ("call", args.iter().collect()),
            E::Curry { fbody, arg1, arg2, .. } => ("curry", vec![fbody, arg1, arg2]),
            E::Twice { fbody, arg, .. } => ("twice", vec![fbody, arg]),
            E::Proj { a, b, .. } => ("proj", vec![a, b]),
            E::Pair { a, b, body, .. } => ("pair", vec![a, b, body]),
            E::If { lhs, then, els, .. } => ("if", vec![lhs, then, els]),
            E::Loop { init, step, .. } => ("loop", vec![init, step]),
            E::Rec { base, step, .. } => ("rec", vec![base, step]),
            E::MapSum { fbody, items, .. } => {
                let mut k: Vec<&E> = vec![fbody];
                k.extend(items.iter());
                ("mapsum", k)
            }
            E::ClosurePair { fbody, c, arg, .. } => ("closure-pair", vec![fbody, c, arg]),
            E::IfClosure { lhs, b1, b2, arg, .. } => ("if-closure", vec![lhs, b1, b2, arg]),
            E::Compose { step, arg, .. } => ("compose", vec![step, arg]),
            E::InnerD { fbody, arg, .. } => ("inner-derivative", vec![fbody, arg]),
        };
        seen.insert(name);
        for k in kids {
            walk(k, seen);
        }
    }
    for case in 0..CASES {
        walk(&generate(case, false).0, &mut seen);
    }
    assert_eq!(seen.len(), 19, "forms generated: {:?}", seen);
    for case in 0..INNER_CASES {
        walk(&generate(case, true).0, &mut seen);
    }
    assert_eq!(seen.len(), 20, "forms generated: {:?}", seen);
}

/// Prints a few generated programs (`cargo test --test ad show_random -- --ignored --nocapture`).
#[test]
#[ignore]
fn show_random_programs() {
    for case in 0..8 {
        let (e, x) = generate(case, case % 2 == 1);
        eprintln!("{} at {}\n", src(&e), x);
    }
}
