//! The MPFR derivative oracle (cargo feature `mpfr`, which builds GMP and MPFR
//! through `rug`: `cargo test --release --features mpfr --test mpfr_oracle`).
//!
//! Random smooth functions of one and two reals (arithmetic, a safe division,
//! `sin`, `cos`, `exp`, `log`, `sqrt`, `let`, named-`let` loops, and derivatives
//! taken inside the function of closures over its variables) are written as
//! VLAD text and as a syntax tree that this file evaluates in MPFR at 1024 bits.
//! Central differences at that precision (steps 2^-60 to 2^-48 outside, 2^-200
//! for the inner derivatives) give the first, second and third derivatives, the
//! gradient and the Hessian-vector product to about 30 digits: an oracle
//! independent of vlad's AD, its arithmetic and its doubles, and far tighter
//! than finite differences in doubles (which agree to ~1e-6 at best). vlad's
//! derivatives in every nesting of the two modes, on the tape and by the
//! transforms, must match it to 1e-12 relative (absolute below 1): they match
//! it to about 1e-14, a few roundings of doubles. Random reversible procedures
//! are run in MPFR too (`call` and `uncall`), for the derivatives through them,
//! and random packed-vector code, for the vector primitives' derivative rules.
//!
//! Without the feature the test prints a visible skip.

#[cfg(not(feature = "mpfr"))]
#[test]
fn mpfr_oracle() {
    // (written to stderr itself, which the test harness does not capture, so
    // that the skip shows in `cargo test`'s output)
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "mpfr_oracle: skipped: built without the `mpfr` feature \
         (cargo test --release --features mpfr --test mpfr_oracle)"
    );
}

#[cfg(feature = "mpfr")]
#[allow(dead_code)] // (`pick` and `chance` serve tests/ad only)
#[path = "ad/rng.rs"]
mod rng;

#[cfg(feature = "mpfr")]
mod oracle {
    use crate::rng::Rng;
    use rug::Float;
    use vlad::toplevel::Session;
    use vlad::value::Value;

    /// MPFR precision of the oracle, in bits.
    const PREC: u32 = 1024;

    /// A smooth function's syntax tree; variables are `x` (0) and `y` (1), and
    /// `let`-bound ones after them.
    #[derive(Clone, Debug)]
    enum E {
        Var(usize),
        Const(f64),
        Add(Box<E>, Box<E>),
        Sub(Box<E>, Box<E>),
        Mul(Box<E>, Box<E>),
        /// a / (2 + b²)
        Div(Box<E>, Box<E>),
        Sin(Box<E>),
        Cos(Box<E>),
        /// exp(0.3 a)
        Exp(Box<E>),
        /// log(1.5 + a²)
        Log(Box<E>),
        /// sqrt(1 + a²)
        Sqrt(Box<E>),
        /// let v = a in b (v: the variable numbered by the depth of lets)
        Let(Box<E>, Box<E>),
        /// acc := a, then acc := b (acc bound in it) three times: a named-`let` loop
        Loop(Box<E>, Box<E>),
        /// The derivative of b (u bound in it) at u = a, by `derivative-F`, or
        /// `derivative-R` if `.2`: a closure over the enclosing variables
        /// differentiated inside the function, so under the outer derivatives
        Deriv(Box<E>, Box<E>, bool),
    }

    trait Real {
        /// A double in [lo, hi), rounded to a multiple of 1/64 (exact in VLAD text).
        fn real(&mut self, lo: f64, hi: f64) -> f64;
    }

    impl Real for Rng {
        fn real(&mut self, lo: f64, hi: f64) -> f64 {
            ((lo + self.unit() * (hi - lo)) * 64.0).round() / 64.0
        }
    }

    /// A random tree of `depth` levels at most over `nvars` variables; `inner`:
    /// it may hold a derivative (not one inside another, whose difference the
    /// oracle's precision would not resolve).
    fn gen(r: &mut Rng, nvars: usize, depth: u32, inner: bool) -> E {
        if depth == 0 || r.below(5) == 0 {
            return if r.below(4) == 0 { E::Const(r.real(-2.0, 2.0)) } else { E::Var(r.below(nvars)) };
        }
        let sub = |r: &mut Rng, n| Box::new(gen(r, n, depth - 1, inner));
        match r.below(14) {
            0 | 1 => E::Add(sub(r, nvars), sub(r, nvars)),
            2 => E::Sub(sub(r, nvars), sub(r, nvars)),
            3 | 4 => E::Mul(sub(r, nvars), sub(r, nvars)),
            5 => E::Div(sub(r, nvars), sub(r, nvars)),
            6 => E::Sin(sub(r, nvars)),
            7 => E::Cos(sub(r, nvars)),
            8 => E::Exp(sub(r, nvars)),
            9 => E::Log(sub(r, nvars)),
            10 => E::Sqrt(sub(r, nvars)),
            11 => {
                let a = sub(r, nvars);
                E::Let(a, sub(r, nvars + 1))
            }
            12 => {
                let a = sub(r, nvars);
                E::Loop(a, sub(r, nvars + 1))
            }
            _ if inner => {
                let a = sub(r, nvars);
                E::Deriv(a, Box::new(gen(r, nvars + 1, depth - 1, false)), r.below(2) == 1)
            }
            _ => E::Mul(sub(r, nvars), sub(r, nvars)),
        }
    }

    /// Writes `e` as VLAD text; `names` are the variables in scope.
    fn text(e: &E, names: &mut Vec<String>) -> String {
        let t = |e: &E| text(e, &mut names.clone());
        match e {
            E::Var(i) => names[*i].clone(),
            E::Const(c) => format!("{c:?}"),
            E::Add(a, b) => format!("(+ {} {})", t(a), t(b)),
            E::Sub(a, b) => format!("(- {} {})", t(a), t(b)),
            E::Mul(a, b) => format!("(* {} {})", t(a), t(b)),
            E::Div(a, b) => {
                let b = t(b);
                format!("(/ {} (+ 2.0 (* {b} {b})))", t(a))
            }
            E::Sin(a) => format!("(sin {})", t(a)),
            E::Cos(a) => format!("(cos {})", t(a)),
            E::Exp(a) => format!("(exp (* 0.3 {}))", t(a)),
            E::Log(a) => {
                let a = t(a);
                format!("(log (+ 1.5 (* {a} {a})))")
            }
            E::Sqrt(a) => {
                let a = t(a);
                format!("(sqrt (+ 1.0 (* {a} {a})))")
            }
            E::Let(a, b) => {
                let v = format!("t{}", names.len());
                let a = t(a);
                names.push(v.clone());
                format!("(let (({v} {a})) {})", text(b, names))
            }
            E::Loop(a, b) => {
                let n = names.len();
                let a = t(a);
                names.push(format!("acc{n}"));
                let b = text(b, names);
                format!(
                    "(let loop{n} ((i{n} 0) (acc{n} {a})) (if (= i{n} 3) acc{n} (loop{n} (+ i{n} 1) {b})))"
                )
            }
            E::Deriv(a, b, rev) => {
                let n = names.len();
                let a = t(a);
                names.push(format!("u{n}"));
                let mode = if *rev { "R" } else { "F" };
                format!("((derivative-{mode} (lambda (u{n}) {})) {a})", text(b, names))
            }
        }
    }

    /// `e` at `vars`, in MPFR.
    fn eval(e: &E, vars: &mut Vec<Float>) -> Float {
        let f = |x: f64| Float::with_val(PREC, x);
        match e {
            E::Var(i) => vars[*i].clone(),
            E::Const(c) => f(*c),
            E::Add(a, b) => eval(a, &mut vars.clone()) + eval(b, &mut vars.clone()),
            E::Sub(a, b) => eval(a, &mut vars.clone()) - eval(b, &mut vars.clone()),
            E::Mul(a, b) => eval(a, &mut vars.clone()) * eval(b, &mut vars.clone()),
            E::Div(a, b) => {
                let b = eval(b, &mut vars.clone());
                eval(a, &mut vars.clone()) / (f(2.0) + b.clone() * b)
            }
            E::Sin(a) => eval(a, vars).sin(),
            E::Cos(a) => eval(a, vars).cos(),
            E::Exp(a) => (f(0.3) * eval(a, vars)).exp(),
            E::Log(a) => {
                let a = eval(a, vars);
                (f(1.5) + a.clone() * a).ln()
            }
            E::Sqrt(a) => {
                let a = eval(a, vars);
                (f(1.0) + a.clone() * a).sqrt()
            }
            E::Let(a, b) => {
                let v = eval(a, &mut vars.clone());
                let mut inner = vars.clone();
                inner.push(v);
                eval(b, &mut inner)
            }
            E::Loop(a, b) => {
                let mut acc = eval(a, &mut vars.clone());
                for _ in 0..3 {
                    let mut inner = vars.clone();
                    inner.push(acc);
                    acc = eval(b, &mut inner);
                }
                acc
            }
            // (a central difference with a step far below the outer ones':
            // its error, ~2^-400, stays below what they resolve)
            E::Deriv(a, b, _) => {
                let u = eval(a, &mut vars.clone());
                let h = step(-200);
                let at = |k: i32| {
                    let mut inner = vars.clone();
                    inner.push(u.clone() + h.clone() * k);
                    eval(b, &mut inner)
                };
                (at(1) - at(-1)) / (h.clone() * 2)
            }
        }
    }

    fn at(e: &E, xs: &[Float]) -> Float {
        eval(e, &mut xs.to_vec())
    }

    fn pt(xs: &[f64]) -> Vec<Float> {
        xs.iter().map(|&x| Float::with_val(PREC, x)).collect()
    }

    /// `xs` moved by `k` steps of `h` along coordinate `i` (and `l` along `j`).
    fn moved(xs: &[f64], i: usize, k: i32, j: usize, l: i32, h: &Float) -> Vec<Float> {
        let mut p = pt(xs);
        p[i] += h.clone() * k;
        p[j] += h.clone() * l;
        p
    }

    fn step(log2: i32) -> Float {
        Float::with_val(PREC, 1) >> -log2
    }

    /// ∂f/∂x_i by a central difference.
    fn d1(e: &E, xs: &[f64], i: usize) -> f64 {
        fd1(&|p| at(e, p), xs, i)
    }

    /// ∂²f/∂x_i∂x_j by central differences.
    fn d2(e: &E, xs: &[f64], i: usize, j: usize) -> f64 {
        fd2(&|p| at(e, p), xs, i, j)
    }

    /// ∂f/∂x_i of any function of MPFR reals by a central difference.
    fn fd1(f: &dyn Fn(&[Float]) -> Float, xs: &[f64], i: usize) -> f64 {
        let h = step(-60);
        let v: Float = (f(&moved(xs, i, 1, i, 0, &h)) - f(&moved(xs, i, -1, i, 0, &h))) / (h * 2);
        v.to_f64()
    }

    /// ∂²f/∂x_i∂x_j of any function of MPFR reals by central differences.
    fn fd2(f: &dyn Fn(&[Float]) -> Float, xs: &[f64], i: usize, j: usize) -> f64 {
        let h = step(-56);
        let v: Float = if i == j {
            let m = f(&pt(xs)) * 2;
            (f(&moved(xs, i, 1, i, 0, &h)) - m + f(&moved(xs, i, -1, i, 0, &h))) / (h.clone() * &h)
        } else {
            (f(&moved(xs, i, 1, j, 1, &h)) - f(&moved(xs, i, 1, j, -1, &h)) - f(&moved(xs, i, -1, j, 1, &h))
                + f(&moved(xs, i, -1, j, -1, &h)))
                / (h.clone() * &h * 4)
        };
        v.to_f64()
    }

    /// d³f/dx³ (one variable) by a central difference.
    fn d3(e: &E, x: f64) -> f64 {
        let h = step(-48);
        let f = |k: i32| at(e, &moved(&[x], 0, k, 0, 0, &h));
        let v: Float = (f(2) - f(1) * 2 + f(-1) * 2 - f(-2)) / (h.clone() * &h * &h * 2);
        v.to_f64()
    }

    /// `src` run on the tape and by the transforms: ("tape" or "transform",
    /// the values of its expressions).
    fn runs(src: &str) -> [(&'static str, Vec<Value>); 2] {
        [true, false].map(|tape| {
            let mut s = Session::new();
            s.m.out = Box::new(std::io::sink());
            s.m.tape.enabled = tape;
            let vals = s.run_text("oracle", src).unwrap_or_else(|e| panic!("{src}: {}", e.message));
            (if tape { "tape" } else { "transform" }, vals)
        })
    }

    fn flat(v: &Value) -> Vec<f64> {
        match v {
            Value::Nil => vec![],
            Value::Pair(p) => {
                let mut a = flat(&p.car);
                a.extend(flat(&p.cdr));
                a
            }
            v => vec![v.as_f64().unwrap_or_else(|| panic!("not a number: {}", vlad::print::to_string(v)))],
        }
    }

    /// Checks `got` against the oracle's `want`: within `tol` relative to
    /// `want` (absolute below 1). `TOL` where doubles compute the derivative
    /// directly: vlad's errors measured here are at most about 1e-14, a few
    /// roundings of doubles.
    fn check(got: f64, want: f64, tol: f64, what: &str, program: &str, worst: &mut f64) {
        let err = (got - want).abs() / want.abs().max(1.0);
        *worst = worst.max(err);
        assert!(
            err <= tol,
            "{what}: vlad {got:e}, MPFR oracle {want:e} (relative error {err:.1e})\nprogram:\n{program}"
        );
    }

    const TOL: f64 = 1e-12;

    /// Checks the values of `gradient-R`, `gradient-F`, `hvp` and `hvp-RR`
    /// (`vals`, in that order, each a list) against the oracle's gradient and
    /// Hessian-vector product.
    fn check_gradients(vals: &[Value], grad: &[f64], hv: &[f64], mode: &str, src: &str, worst: &mut f64) {
        for (k, want) in [grad, grad, hv, hv].into_iter().enumerate() {
            let got = flat(&vals[k]);
            assert_eq!(got.len(), want.len(), "{src}");
            for i in 0..want.len() {
                let what = format!("{} [{i}] ({mode})", ["gradient-R", "gradient-F", "hvp", "hvp-RR"][k]);
                check(got[i], want[i], TOL, &what, src, worst);
            }
        }
    }

    /// Functions of one real: the first derivative both ways, the second in
    /// all four nestings, the third in all eight, on the tape and by the
    /// transforms, against the oracle's differences.
    #[test]
    fn derivatives_of_one_real_match_mpfr() {
        let mut worst = 0.0f64;
        for case in 0..200u64 {
            let mut r = Rng(case.wrapping_mul(7919) + 11);
            let e = gen(&mut r, 1, 2 + (case % 4) as u32, true);
            let x = r.real(-1.5, 1.5);
            let body = text(&e, &mut vec!["x".into()]);
            let f = format!("(lambda (x) {body})");
            let mut src = String::new();
            let mut want = vec![];
            for (ops, n) in [(1, 2), (2, 4), (3, 8)] {
                for k in 0..n {
                    // (`label`: the modes, outermost first, as in "FRR")
                    let (mut g, mut label) = (f.clone(), String::new());
                    for level in 0..ops {
                        let mode = if k >> level & 1 == 0 { "F" } else { "R" };
                        g = format!("(derivative-{mode} {g})");
                        label.insert_str(0, mode);
                    }
                    src.push_str(&format!("({g} {x:?})\n"));
                    want.push((ops, format!("derivative {label}")));
                }
            }
            let oracle = [0.0, d1(&e, &[x], 0), d2(&e, &[x], 0, 0), d3(&e, x)];
            for (mode, vals) in runs(&src) {
                for (v, (ops, what)) in vals.iter().zip(&want) {
                    check(flat(v)[0], oracle[*ops], TOL, &format!("{what} ({mode})"), &src, &mut worst);
                }
            }
        }
        eprintln!("derivatives_of_one_real_match_mpfr: worst relative error {worst:.1e}");
    }

    /// Functions of two reals: gradient-R, gradient-F, and the Hessian-vector
    /// products hvp (forward over reverse) and hvp-RR, on the tape and by the
    /// transforms, against the oracle's gradient and Hessian.
    #[test]
    fn gradients_and_hessians_of_two_reals_match_mpfr() {
        let mut worst = 0.0f64;
        for case in 0..200u64 {
            let mut r = Rng(case.wrapping_mul(104729) + 5);
            let e = gen(&mut r, 2, 2 + (case % 4) as u32, true);
            let xs = [r.real(-1.5, 1.5), r.real(-1.5, 1.5)];
            let dir = [r.real(-1.0, 1.0), r.real(-1.0, 1.0)];
            let body = text(&e, &mut vec!["x".into(), "y".into()]);
            let f = format!("(lambda (v) (let ((x (car v)) (y (cadr v))) {body}))");
            let (p, d) =
                (format!("(list {:?} {:?})", xs[0], xs[1]), format!("(list {:?} {:?})", dir[0], dir[1]));
            let src = format!(
                "((gradient-R {f}) {p})\n((gradient-F {f}) {p})\n(hvp {f} {p} {d})\n(hvp-RR {f} {p} {d})\n"
            );
            let grad = [d1(&e, &xs, 0), d1(&e, &xs, 1)];
            let h = [[d2(&e, &xs, 0, 0), d2(&e, &xs, 0, 1)], [d2(&e, &xs, 1, 0), d2(&e, &xs, 1, 1)]];
            let hv = [h[0][0] * dir[0] + h[0][1] * dir[1], h[1][0] * dir[0] + h[1][1] * dir[1]];
            for (mode, vals) in runs(&src) {
                check_gradients(&vals, &grad, &hv, mode, &src, &mut worst);
            }
        }
        eprintln!("gradients_and_hessians_of_two_reals_match_mpfr: worst relative error {worst:.1e}");
    }

    /// A statement of a reversible procedure over `y a b` (0, 1, 2); the
    /// right-hand sides are trees over the other two variables.
    #[derive(Debug)]
    enum S {
        /// v += e, or v -= e if `.2`
        Add(usize, E, bool),
        /// v *= 1.5 + 0.5 sin(e)
        Scale(usize, E),
        Swap(usize, usize),
        /// the statements twice, by a `from-loop` over a local counter
        Twice(Vec<S>),
    }

    /// The two variables other than `v`.
    fn others(v: usize) -> [usize; 2] {
        [(v + 1) % 3, (v + 2) % 3]
    }

    /// A right-hand side: arithmetic and functions only (no `let`, loop or
    /// inner derivative).
    fn rhs(r: &mut Rng) -> E {
        fn plain(e: &E) -> bool {
            match e {
                E::Var(_) | E::Const(_) => true,
                E::Add(a, b) | E::Sub(a, b) | E::Mul(a, b) | E::Div(a, b) => plain(a) && plain(b),
                E::Sin(a) | E::Cos(a) | E::Exp(a) | E::Log(a) | E::Sqrt(a) => plain(a),
                E::Let(..) | E::Loop(..) | E::Deriv(..) => false,
            }
        }
        loop {
            let e = gen(r, 2, 2, false);
            if plain(&e) {
                return e;
            }
        }
    }

    fn stmt(r: &mut Rng, depth: u32) -> S {
        let v = r.below(3);
        match r.below(7) {
            0..=2 => S::Add(v, rhs(r), r.below(2) == 1),
            3 => S::Scale(v, rhs(r)),
            4 => S::Swap(v, others(v)[r.below(2)]),
            5 if depth > 0 => S::Twice((0..1 + r.below(2)).map(|_| stmt(r, depth - 1)).collect()),
            _ => S::Add(v, E::Mul(Box::new(E::Const(0.25)), Box::new(rhs(r))), false),
        }
    }

    fn stmt_text(st: &S, counter: &mut usize) -> String {
        let names = ["y", "a", "b"];
        let e = |v: usize, e: &E| text(e, &mut others(v).iter().map(|&u| names[u].to_string()).collect());
        match st {
            S::Add(v, x, sub) => format!("({} {} {})", if *sub { "-=" } else { "+=" }, names[*v], e(*v, x)),
            S::Scale(v, x) => format!("(*= {} (+ 1.5 (* 0.5 (sin {}))))", names[*v], e(*v, x)),
            S::Swap(v, u) => format!("(swap {} {})", names[*v], names[*u]),
            S::Twice(body) => {
                let n = format!("n{counter}");
                *counter += 1;
                let body: Vec<String> = body.iter().map(|b| stmt_text(b, counter)).collect();
                format!(
                    "(local ({n} 0) (from-loop (= {n} 0) (begin-rev {} (+= {n} 1)) (skip) (= {n} 2)) (delocal {n} 2))",
                    body.join(" ")
                )
            }
        }
    }

    /// Runs the statements on `vals` forward, or (`backward`) their inverses
    /// in reverse order, as `uncall` does.
    fn exec(sts: &[S], vals: &mut [Float], backward: bool) {
        let rhs = |v: usize, e: &E, vals: &[Float]| at(e, &others(v).map(|u| vals[u].clone()));
        let run = |st: &S, vals: &mut [Float]| match st {
            S::Add(v, e, sub) => {
                let d = rhs(*v, e, vals);
                if *sub != backward {
                    vals[*v] -= d;
                } else {
                    vals[*v] += d;
                }
            }
            S::Scale(v, e) => {
                let k = Float::with_val(PREC, 1.5) + rhs(*v, e, vals).sin() / 2;
                if backward {
                    vals[*v] /= k;
                } else {
                    vals[*v] *= k;
                }
            }
            S::Swap(v, u) => vals.swap(*v, *u),
            S::Twice(body) => {
                exec(body, vals, backward);
                exec(body, vals, backward);
            }
        };
        if backward {
            sts.iter().rev().for_each(|st| run(st, vals));
        } else {
            sts.iter().for_each(|st| run(st, vals));
        }
    }

    /// Reversible procedures (`define-reversible` of straight-line updates,
    /// swaps and counted loops over three reals): the derivatives of an output
    /// of `call` or `uncall` with respect to one argument, first (both modes,
    /// and `rev-grad`'s) and second (all four nestings, which run the
    /// procedure's VLAD translation), on the tape and by the transforms,
    /// against the oracle's differences of the procedure run in MPFR. A first
    /// derivative by reverse mode recomputes the values by the inverse updates
    /// (doubles are only approximately reversible), so these are held to 1e-10.
    #[test]
    fn reversible_procedures_match_mpfr() {
        let mut worst = 0.0f64;
        for case in 0..100u64 {
            let mut r = Rng(case.wrapping_mul(15485863) + 3);
            let sts: Vec<S> = (0..2 + r.below(3)).map(|_| stmt(&mut r, 2)).collect();
            let mut counter = 0;
            let body: Vec<String> = sts.iter().map(|st| stmt_text(st, &mut counter)).collect();
            let args = [r.real(-1.0, 1.0), r.real(-1.0, 1.0), r.real(-1.0, 1.0)];
            let (wrt, out, backward) = (r.below(3), r.below(3), r.below(3) == 0);
            let run = if backward { "uncall" } else { "call" };
            let pick = ["car", "cadr", "caddr"][out];
            let call_args: Vec<String> =
                (0..3).map(|i| if i == wrt { "x".to_string() } else { format!("{:?}", args[i]) }).collect();
            let f = format!("(lambda (x) ({pick} ({run} p {})))", call_args.join(" "));
            let x0 = format!("{:?}", args[wrt]);
            let mut src = format!("(define-reversible (p y a b) {})\n", body.join(" "));
            src.push_str(&format!("((derivative-F {f}) {x0})\n((derivative-R {f}) {x0})\n"));
            for (o, i) in [("F", "F"), ("F", "R"), ("R", "F"), ("R", "R")] {
                src.push_str(&format!("((derivative-{o} (derivative-{i} {f})) {x0})\n"));
            }
            if !backward {
                let plain: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
                src.push_str(&format!("(list-ref (rev-grad p {out} {}) {wrt})\n", plain.join(" ")));
            }
            let g = |x: &[Float]| {
                let mut vals: Vec<Float> = args.iter().map(|&a| Float::with_val(PREC, a)).collect();
                vals[wrt] = x[0].clone();
                exec(&sts, &mut vals, backward);
                vals[out].clone()
            };
            let (first, second) = (fd1(&g, &[args[wrt]], 0), fd2(&g, &[args[wrt]], 0, 0));
            let mut want = vec![("derivative F", first), ("derivative R", first)];
            for label in ["FF", "FR", "RF", "RR"] {
                want.push((label, second));
            }
            if !backward {
                want.push(("rev-grad", first));
            }
            for (mode, vals) in runs(&src) {
                assert_eq!(vals.len(), want.len(), "{src}");
                for (v, (what, want)) in vals.iter().zip(&want) {
                    check(flat(v)[0], *want, 1e-10, &format!("{what} ({mode})"), &src, &mut worst);
                }
            }
        }
        eprintln!("reversible_procedures_match_mpfr: worst relative error {worst:.1e}");
    }

    /// A vector expression of packed-vector code over the argument `v` (length
    /// `n`), for [`vectors_match_mpfr`].
    enum V {
        Arg,
        Const(Vec<f64>),
        /// `vec+`, `vec-`, `vec*` (`.0`: 0, 1, 2)
        Elementwise(u8, Box<V>, Box<V>),
        /// `(vec-scale s a)`
        Scale(Box<Sc>, Box<V>),
        /// `vec-sin`, `vec-cos`, `(vec-exp (vec-scale 0.3 a))` (`.0`: 0, 1, 2)
        Unary(u8, Box<V>),
        PrefixSum(Box<V>),
        /// `(mat-vec M a)`, M an n×n constant
        MatVec(Vec<Vec<f64>>, Box<V>),
    }

    /// A real from vector code.
    enum Sc {
        Sum(V),
        Dot(V, V),
        Ref(V, usize),
        Mul(Box<Sc>, Box<Sc>),
        Sin(Box<Sc>),
    }

    fn gen_v(r: &mut Rng, n: usize, d: u32) -> V {
        if d == 0 || r.below(4) == 0 {
            return if r.below(3) == 0 {
                V::Const((0..n).map(|_| r.real(-1.5, 1.5)).collect())
            } else {
                V::Arg
            };
        }
        match r.below(7) {
            0..=1 => {
                V::Elementwise(r.below(3) as u8, Box::new(gen_v(r, n, d - 1)), Box::new(gen_v(r, n, d - 1)))
            }
            2 => V::Scale(Box::new(gen_s(r, n, d - 1)), Box::new(gen_v(r, n, d - 1))),
            3 | 4 => V::Unary(r.below(3) as u8, Box::new(gen_v(r, n, d - 1))),
            5 => V::PrefixSum(Box::new(gen_v(r, n, d - 1))),
            _ => V::MatVec(
                (0..n).map(|_| (0..n).map(|_| r.real(-1.0, 1.0)).collect()).collect(),
                Box::new(gen_v(r, n, d - 1)),
            ),
        }
    }

    fn gen_s(r: &mut Rng, n: usize, d: u32) -> Sc {
        let v = |r: &mut Rng| gen_v(r, n, d.saturating_sub(1));
        match if d == 0 { r.below(3) } else { r.below(5) } {
            0 => Sc::Sum(v(r)),
            1 => Sc::Dot(v(r), v(r)),
            2 => Sc::Ref(v(r), r.below(n)),
            3 => Sc::Mul(Box::new(gen_s(r, n, d - 1)), Box::new(gen_s(r, n, d - 1))),
            _ => Sc::Sin(Box::new(gen_s(r, n, d - 1))),
        }
    }

    fn list(xs: &[f64]) -> String {
        let xs: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
        format!("(list {})", xs.join(" "))
    }

    fn v_text(e: &V) -> String {
        match e {
            V::Arg => "v".into(),
            V::Const(c) => format!("(vector-of {})", list(c)),
            V::Elementwise(k, a, b) => {
                format!("({} {} {})", ["vec+", "vec-", "vec*"][*k as usize], v_text(a), v_text(b))
            }
            V::Scale(s, a) => format!("(vec-scale {} {})", s_text(s), v_text(a)),
            V::Unary(0, a) => format!("(vec-sin {})", v_text(a)),
            V::Unary(1, a) => format!("(vec-cos {})", v_text(a)),
            V::Unary(_, a) => format!("(vec-exp (vec-scale 0.3 {}))", v_text(a)),
            V::PrefixSum(a) => format!("(vec-prefix-sum {})", v_text(a)),
            V::MatVec(m, a) => {
                let rows: Vec<String> = m.iter().map(|row| list(row)).collect();
                format!("(mat-vec (vector-of (list {})) {})", rows.join(" "), v_text(a))
            }
        }
    }

    fn s_text(e: &Sc) -> String {
        match e {
            Sc::Sum(a) => format!("(vec-sum {})", v_text(a)),
            Sc::Dot(a, b) => format!("(vec-dot {} {})", v_text(a), v_text(b)),
            Sc::Ref(a, i) => format!("(vec-ref {} {i})", v_text(a)),
            Sc::Mul(a, b) => format!("(* {} {})", s_text(a), s_text(b)),
            Sc::Sin(a) => format!("(sin {})", s_text(a)),
        }
    }

    fn v_eval(e: &V, x: &[Float]) -> Vec<Float> {
        let f = |c: f64| Float::with_val(PREC, c);
        match e {
            V::Arg => x.to_vec(),
            V::Const(c) => c.iter().map(|&c| f(c)).collect(),
            V::Elementwise(k, a, b) => {
                let (a, b) = (v_eval(a, x), v_eval(b, x));
                a.into_iter()
                    .zip(b)
                    .map(|(a, b)| match k {
                        0 => a + b,
                        1 => a - b,
                        _ => a * b,
                    })
                    .collect()
            }
            V::Scale(s, a) => {
                let s = s_eval(s, x);
                v_eval(a, x).into_iter().map(|a| a * &s).collect()
            }
            V::Unary(k, a) => v_eval(a, x)
                .into_iter()
                .map(|a| match k {
                    0 => a.sin(),
                    1 => a.cos(),
                    _ => (a * f(0.3)).exp(),
                })
                .collect(),
            V::PrefixSum(a) => {
                let mut acc = f(0.0);
                v_eval(a, x)
                    .into_iter()
                    .map(|a| {
                        acc += a;
                        acc.clone()
                    })
                    .collect()
            }
            V::MatVec(m, a) => {
                let a = v_eval(a, x);
                m.iter().map(|row| row.iter().zip(&a).fold(f(0.0), |acc, (&m, a)| acc + f(m) * a)).collect()
            }
        }
    }

    fn s_eval(e: &Sc, x: &[Float]) -> Float {
        match e {
            Sc::Sum(a) => v_eval(a, x).into_iter().fold(Float::with_val(PREC, 0), |acc, a| acc + a),
            Sc::Dot(a, b) => v_eval(a, x)
                .into_iter()
                .zip(v_eval(b, x))
                .fold(Float::with_val(PREC, 0), |acc, (a, b)| acc + a * b),
            Sc::Ref(a, i) => v_eval(a, x).swap_remove(*i),
            Sc::Mul(a, b) => s_eval(a, x) * s_eval(b, x),
            Sc::Sin(a) => s_eval(a, x).sin(),
        }
    }

    /// Packed-vector code (elementwise primitives, scaling by a real of the
    /// vector, `vec-prefix-sum`, `mat-vec`, reductions): `gradient-R`,
    /// `gradient-F`, `hvp` and `hvp-RR` of a real of a vector of 1 to 4 reals,
    /// which the vector primitives' own derivative rules compute, against the
    /// oracle's differences of the same code run in MPFR, to 1e-12.
    #[test]
    fn vectors_match_mpfr() {
        let mut worst = 0.0f64;
        for case in 0..100u64 {
            let mut r = Rng(case.wrapping_mul(32452843) + 7);
            let n = 1 + r.below(4);
            let e = gen_s(&mut r, n, 2 + (case % 3) as u32);
            let xs: Vec<f64> = (0..n).map(|_| r.real(-1.0, 1.0)).collect();
            let dir: Vec<f64> = (0..n).map(|_| r.real(-1.0, 1.0)).collect();
            let f = format!("(lambda (v) {})", s_text(&e));
            let (x, dx) = (format!("(vector-of {})", list(&xs)), format!("(vector-of {})", list(&dir)));
            let src = format!(
                "(list-of ((gradient-R {f}) {x}))\n(list-of ((gradient-F {f}) {x}))\n\
                 (list-of (hvp {f} {x} {dx}))\n(list-of (hvp-RR {f} {x} {dx}))\n"
            );
            let g = |p: &[Float]| s_eval(&e, p);
            let grad: Vec<f64> = (0..n).map(|i| fd1(&g, &xs, i)).collect();
            let hv: Vec<f64> = (0..n).map(|i| (0..n).map(|j| fd2(&g, &xs, i, j) * dir[j]).sum()).collect();
            for (mode, vals) in runs(&src) {
                check_gradients(&vals, &grad, &hv, mode, &src, &mut worst);
            }
        }
        eprintln!("vectors_match_mpfr: worst relative error {worst:.1e}");
    }

    /// The oracle itself, on closed forms: d/dx sin(x)·exp(0.3x), the Hessian
    /// of 2x² + 3xy + 4y² (AD.md: times (7, 8) it is (52, 85)), and inner
    /// derivatives of closures over x.
    #[test]
    fn the_oracle_agrees_with_closed_forms() {
        let x = 0.7f64;
        let e = E::Mul(Box::new(E::Sin(Box::new(E::Var(0)))), Box::new(E::Exp(Box::new(E::Var(0)))));
        let exact = x.cos() * (0.3 * x).exp() + x.sin() * 0.3 * (0.3 * x).exp();
        assert!((d1(&e, &[x], 0) - exact).abs() < 1e-15, "{} {}", d1(&e, &[x], 0), exact);
        let exact2 = (0.09 - 1.0) * x.sin() * (0.3 * x).exp() + 0.6 * x.cos() * (0.3 * x).exp();
        assert!((d2(&e, &[x], 0, 0) - exact2).abs() < 1e-15);
        let exact3 = (0.027 - 0.9) * x.sin() * (0.3 * x).exp() + (0.27 - 1.0) * x.cos() * (0.3 * x).exp();
        assert!((d3(&e, x) - exact3).abs() < 1e-14, "{} {}", d3(&e, x), exact3);
        let c = |k: f64| Box::new(E::Const(k));
        let v = |i| Box::new(E::Var(i));
        let q = E::Add(
            Box::new(E::Add(
                Box::new(E::Mul(c(2.0), Box::new(E::Mul(v(0), v(0))))),
                Box::new(E::Mul(c(3.0), Box::new(E::Mul(v(0), v(1))))),
            )),
            Box::new(E::Mul(c(4.0), Box::new(E::Mul(v(1), v(1))))),
        );
        let h = |i, j| d2(&q, &[3.0, 4.0], i, j);
        assert_eq!([h(0, 0) * 7.0 + h(0, 1) * 8.0, h(1, 0) * 7.0 + h(1, 1) * 8.0], [52.0, 85.0]);
        // d/dx (x · d/dy (x + y)) = 1 (AD.md: not 2), and d/dx (x · d/dy (x y)) = 2x
        let pc = E::Mul(v(0), Box::new(E::Deriv(v(0), Box::new(E::Add(v(0), v(1))), false)));
        assert_eq!(d1(&pc, &[1.0], 0), 1.0);
        let pc2 = E::Mul(v(0), Box::new(E::Deriv(v(0), Box::new(E::Mul(v(0), v(1))), true)));
        assert_eq!(d1(&pc2, &[1.5], 0), 3.0);
    }
}
