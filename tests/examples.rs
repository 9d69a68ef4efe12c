//! The examples in `examples/`: every `===>` annotation holds (as `vlad test`
//! checks them), and every optimum or derivative they compute is verified
//! independently here: against closed forms, or by recomputing the problem in
//! Rust (the particle's trajectory, the network's outputs) and by finite
//! differences. All four forward/reverse combinations must agree to 1e-8.

use std::path::{Path, PathBuf};
use vlad::check::{check_file, Report};
use vlad::toplevel::{Session, Step};
use vlad::value::Value;

/// A session whose evaluations stop after ten minutes: a wrong derivative
/// can keep an example's descent from converging, and the test then fails
/// (with "time limit exceeded") rather than hanging.
fn session() -> Session {
    let mut s = Session::new();
    s.m.deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(600));
    s
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

#[test]
fn every_example_passes_vlad_test() {
    let files = vlad::check::expand_paths(&[examples_dir()]);
    let names: Vec<String> =
        files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for expected in
        ["saddle.vlad", "hessian.vlad", "particle.vlad", "backprop.vlad", "newton.vlad", "probabilistic.vlad"]
    {
        assert!(names.iter().any(|n| n == expected), "examples/{} is missing", expected);
    }
    let mut report = Report::default();
    for f in &files {
        let before = report.passed;
        check_file(&session, f, &mut report);
        assert!(report.passed > before, "{} checked nothing", f.display());
    }
    assert!(report.failed == 0, "failures:\n{}", report.failures.join("\n"));
}

/// Runs an example file (definitions and expressions) and returns the session,
/// in which its definitions can then be used.
fn run_example(name: &str) -> Session {
    let path = examples_dir().join(name);
    let mut s = session();
    let items = s.read_file(&path).unwrap_or_else(|e| panic!("{}: {}", name, e.render(&s.sources)));
    let unit = s.compile(items).unwrap_or_else(|e| panic!("{}: {}", name, e.render(&s.sources)));
    for step in unit.steps {
        let r = match step {
            Step::Define(g, _) => s.run_define(g).map(|_| ()),
            Step::Expr { thunk, .. } => s.run_thunk(&thunk).map(|_| ()),
            Step::Failed { error, .. } => Err(error),
        };
        if let Err(e) = r {
            panic!("{}: {}", name, e.render(&s.sources));
        }
    }
    s
}

/// The value of an expression in the session.
fn eval(s: &mut Session, expr: &str) -> Value {
    match s.run_text("<test>", expr) {
        Ok(mut vs) => vs.pop().expect("one value"),
        Err(e) => panic!("{}: {}", expr, e.render(&s.sources)),
    }
}

/// The numbers in a value (a number or a tree of pairs), in order.
fn numbers(v: &Value) -> Vec<f64> {
    fn go(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Pair(p) => {
                go(&p.car, out);
                go(&p.cdr, out);
            }
            Value::Nil => {}
            _ => {
                out.push(v.as_f64().unwrap_or_else(|| panic!("not a number: {}", vlad::print::to_string(v))))
            }
        }
    }
    let mut out = Vec::new();
    go(v, &mut out);
    out
}

fn num(s: &mut Session, expr: &str) -> f64 {
    let v = numbers(&eval(s, expr));
    assert_eq!(v.len(), 1, "{} is not one number", expr);
    v[0]
}

fn nums(s: &mut Session, expr: &str) -> Vec<f64> {
    numbers(&eval(s, expr))
}

fn assert_close(actual: &[f64], expected: &[f64], tol: f64, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{}: {:?} vs {:?}", what, actual, expected);
    for (a, e) in actual.iter().zip(expected) {
        assert!(
            (a - e).abs() <= tol * e.abs().max(1.0),
            "{}: got {:?}, expected {:?} (tolerance {})",
            what,
            actual,
            expected,
            tol
        );
    }
}

const MODES: [&str; 4] = ["FF", "FR", "RF", "RR"];

fn mode_fn(c: char) -> &'static str {
    if c == 'F' {
        "gradient-F"
    } else {
        "gradient-R"
    }
}

#[test]
fn saddle_point_is_the_origin_in_all_modes() {
    let mut s = run_example("saddle.vlad");
    let results: Vec<Vec<f64>> = MODES.iter().map(|m| nums(&mut s, &format!("saddle-{}", m))).collect();
    for (m, r) in MODES.iter().zip(&results) {
        assert_close(r, &[0.0; 4], 1e-8, &format!("saddle {}", m));
        assert_close(r, &results[0], 1e-8, &format!("saddle {} vs FF", m));
    }
    // max over y of payoff(x, y) is |x|^2 in closed form; its gradient by central
    // differences of the (AD-free) objective, against the AD value (2s 2t).
    let obj = |s: &mut Session, a: f64, b: f64| {
        num(s, &format!("((outer-objective gradient-R) (list {:?} {:?}))", a, b))
    };
    assert_close(&[obj(&mut s, 1.0, 2.0)], &[5.0], 1e-12, "max value");
    let h = 1e-4;
    let fd = [
        (obj(&mut s, 1.0 + h, 2.0) - obj(&mut s, 1.0 - h, 2.0)) / (2.0 * h),
        (obj(&mut s, 1.0, 2.0 + h) - obj(&mut s, 1.0, 2.0 - h)) / (2.0 * h),
    ];
    assert_close(&fd, &[2.0, 4.0], 1e-6, "finite differences of max value");
    for m in MODES {
        let mut c = m.chars();
        let (o, i) = (mode_fn(c.next().unwrap()), mode_fn(c.next().unwrap()));
        let g = nums(&mut s, &format!("(({} (outer-objective {})) (list 1.0 2.0))", o, i));
        assert_close(&g, &fd, 1e-6, &format!("outer gradient {}", m));
    }
}

/// The particle example's dynamics, recomputed in Rust with the gradient of the
/// potential written out by hand: the landing x for control w.
fn particle_landing_x(w: f64, dt: f64) -> f64 {
    let charges = [(10.0, 10.0 - w), (10.0, 0.0)];
    let (mut x, mut y, mut vx, mut vy) = (0.0f64, 8.0f64, 0.75f64, 0.0f64);
    for _ in 0..100_000 {
        // grad of 1/|r - c| is -(r - c)/|r - c|^3
        let (mut ax, mut ay) = (0.0, 0.0);
        for (cx, cy) in charges {
            let (dx, dy) = (x - cx, y - cy);
            let d3 = (dx * dx + dy * dy).powf(1.5);
            ax -= dx / d3;
            ay -= dy / d3;
        }
        let (xn, yn) = (x + dt * vx, y + dt * vy);
        if yn > 0.0 {
            (x, y, vx, vy) = (xn, yn, vx - dt * ax, vy - dt * ay);
        } else {
            return x + (-y / vy) * vx;
        }
    }
    panic!("the particle never landed");
}

#[test]
fn particle_lands_at_zero_in_all_modes() {
    let mut s = run_example("particle.vlad");
    let dt = num(&mut s, "dt");
    let ws: Vec<f64> = MODES.iter().map(|m| num(&mut s, &format!("w-{}", m))).collect();
    for (m, w) in MODES.iter().zip(&ws) {
        assert!((w - ws[0]).abs() <= 1e-8, "w {} = {} vs FF {}", m, w, ws[0]);
        let x = particle_landing_x(*w, dt);
        assert!(x.abs() <= 1e-9, "with w {} = {} the particle lands at x = {}", m, w, x);
    }
    // the landing point is a smooth, strictly monotone function of w near w*, so a
    // root there is the minimum of E = x^2; check the slope is far from zero
    let w = ws[3];
    let slope = (particle_landing_x(w + 1e-6, dt) - particle_landing_x(w - 1e-6, dt)) / 2e-6;
    assert!(slope.abs() > 1.0, "slope {}", slope);
    // the simulation agrees with VLAD's, and dE/dw at 0 with finite differences
    assert_close(
        &[particle_landing_x(0.0, dt)],
        &[num(&mut s, "((landing-x gradient-R) 0.0)")],
        1e-12,
        "x(0)",
    );
    let e = |w: f64| particle_landing_x(w, dt).powi(2);
    let h = 1e-6;
    let fd = (e(h) - e(-h)) / (2.0 * h);
    for m in MODES {
        let mut c = m.chars();
        let (o, i) = (mode_fn(c.next().unwrap()), mode_fn(c.next().unwrap()));
        let g = num(&mut s, &format!("(car (({} (objective {})) (list 0.0)))", o, i));
        assert_close(&[g], &[fd], 1e-6, &format!("dE/dw at 0, {}", m));
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn xor_net(w: &[f64], x1: f64, x2: f64) -> f64 {
    let h1 = sigmoid(w[0] * x1 + w[1] * x2 + w[2]);
    let h2 = sigmoid(w[3] * x1 + w[4] * x2 + w[5]);
    sigmoid(w[6] * h1 + w[7] * h2 + w[8])
}

const XOR: [(f64, f64, f64); 4] = [(0.0, 0.0, 0.0), (0.0, 1.0, 1.0), (1.0, 0.0, 1.0), (1.0, 1.0, 0.0)];

fn xor_error(w: &[f64]) -> f64 {
    XOR.iter().map(|&(a, b, t)| (xor_net(w, a, b) - t).powi(2)).sum()
}

#[test]
fn backprop_learns_xor() {
    let mut s = run_example("backprop.vlad");
    let w = nums(&mut s, "w1000");
    assert_eq!(w.len(), 9);
    for (a, b, t) in XOR {
        let y = xor_net(&w, a, b);
        assert!((y - t).abs() < 0.05, "net({}, {}) = {}, target {}", a, b, y, t);
    }
    let errors: Vec<f64> = ["w0", "w1", "w10", "w100", "w1000"]
        .iter()
        .map(|n| {
            let wv = nums(&mut s, n);
            let e = xor_error(&wv);
            assert_close(&[num(&mut s, &format!("(error {})", n))], &[e], 1e-12, n);
            e
        })
        .collect();
    assert!(errors.windows(2).all(|p| p[1] < p[0]), "errors do not decrease: {:?}", errors);
    assert!(errors[4] < 0.01, "error after 1000 steps {}", errors[4]);
    // one step of descent by hand: w1 = w0 - 2.5 * (finite-difference gradient)
    let w0 = nums(&mut s, "w0");
    let w1 = nums(&mut s, "w1");
    let h = 1e-6;
    for i in 0..9 {
        let (mut p, mut m) = (w0.clone(), w0.clone());
        p[i] += h;
        m[i] -= h;
        let g = (xor_error(&p) - xor_error(&m)) / (2.0 * h);
        assert!((w1[i] - (w0[i] - 2.5 * g)).abs() < 1e-8, "weight {}", i);
    }
}

#[test]
fn newton_derivatives_match_closed_forms() {
    let mut s = run_example("newton.vlad");
    for a in [0.5f64, 2.0, 10.0] {
        for m in MODES {
            let d = |c| if c == 'F' { "derivative-F" } else { "derivative-R" };
            let mut c = m.chars();
            let (o, i) = (d(c.next().unwrap()), d(c.next().unwrap()));
            let r = num(&mut s, &format!("(({} (newton-sqrt {})) {:?})", o, i, a));
            assert_close(&[r], &[1.0 / (2.0 * a.sqrt())], 1e-12, &format!("d sqrt {} at {}", m, a));
            let r2 = num(&mut s, &format!("(({} ({} (newton-sqrt {}))) {:?})", o, o, i, a));
            assert_close(&[r2], &[-0.25 / a.powf(1.5)], 1e-10, &format!("d2 sqrt {} at {}", m, a));
        }
    }
    // Kepler: solve E - e sin E = M in Rust; dE/de, dE/dM by the implicit function theorem
    for (e, m) in [(0.5f64, 1.0f64), (0.1, 2.5), (0.9, 0.3)] {
        let mut big_e = m;
        for _ in 0..100 {
            big_e -= (big_e - e * big_e.sin() - m) / (1.0 - e * big_e.cos());
        }
        let den = 1.0 - e * big_e.cos();
        let expected = [big_e.sin() / den, 1.0 / den];
        for outer in ["gradient-F", "gradient-R"] {
            for inner in ["derivative-F", "derivative-R"] {
                let g = nums(
                    &mut s,
                    &format!(
                        "(({} (lambda ((list e M)) ((kepler {}) e M))) (list {:?} {:?}))",
                        outer, inner, e, m
                    ),
                );
                assert_close(&g, &expected, 1e-10, &format!("Kepler {} {} at e={} M={}", outer, inner, e, m));
            }
        }
    }
}

#[test]
fn hessians_match_closed_forms() {
    let mut s = run_example("hessian.vlad");
    let (x, y, z) = (0.3f64, 0.7f64, 1.9f64);
    let exy = (x * y).exp();
    let g_h = [
        y * y * exy - z * x.sin(),
        (1.0 + x * y) * exy,
        x.cos(),
        (1.0 + x * y) * exy,
        x * x * exy,
        0.0,
        x.cos(),
        0.0,
        -1.0 / (z * z),
    ];
    let (a, b) = (0.8f64, -0.4f64);
    let rosen_h = [2.0 - 400.0 * (b - a * a) + 800.0 * a * a, -400.0 * a, -400.0 * a, 200.0];
    let mut all = Vec::new();
    for m in MODES {
        let h = nums(&mut s, &format!("((hessian-{} g) (list {:?} {:?} {:?}))", m, x, y, z));
        assert_close(&h, &g_h, 1e-12, &format!("Hessian of g, {}", m));
        let r = nums(&mut s, &format!("((hessian-{} rosenbrock) (list {:?} {:?}))", m, a, b));
        assert_close(&r, &rosen_h, 1e-12, &format!("Hessian of Rosenbrock, {}", m));
        all.push(h);
    }
    for h in &all {
        assert_close(h, &all[0], 1e-8, "modes agree");
    }
    assert_close(&nums(&mut s, "(hvp-RR f (list 3 4) (list 7 8))"), &[52.0, 85.0], 0.0, "hvp-RR");
    assert_close(&nums(&mut s, "(hvp f (list 3 4) (list 7 8))"), &[52.0, 85.0], 0.0, "hvp");
}

#[test]
fn probabilistic_fit_is_the_maximum_likelihood_estimate() {
    let mut s = run_example("probabilistic.vlad");
    let counts = [2.0, 3.0, 4.0, 7.0];
    let n: f64 = counts.iter().sum();
    let p_hat = (counts[1] + counts[3]) / n;
    let q_hat = (counts[2] + counts[3]) / n;
    let pq = nums(&mut s, "(map sigmoid theta*)");
    assert_close(&pq, &[p_hat, q_hat], 1e-10, "fitted (p q)");
    // The interpreter's likelihood against the closed form, and its AD gradient
    // against finite differences of the closed form.
    let ll = |t: [f64; 2]| {
        let (p, q) = (sigmoid(t[0]), sigmoid(t[1]));
        let probs = [(1.0 - p) * (1.0 - q), p * (1.0 - q), (1.0 - p) * q, p * q];
        counts.iter().zip(probs).map(|(c, pr)| c * pr.ln()).sum::<f64>()
    };
    let t = [0.3, -0.2];
    let vl = num(&mut s, &format!("(log-likelihood (list {:?} {:?}))", t[0], t[1]));
    assert_close(&[vl], &[ll(t)], 1e-12, "log-likelihood");
    let h = 1e-6;
    let fd = [
        (ll([t[0] + h, t[1]]) - ll([t[0] - h, t[1]])) / (2.0 * h),
        (ll([t[0], t[1] + h]) - ll([t[0], t[1] - h])) / (2.0 * h),
    ];
    for g in ["gradient-R", "gradient-F"] {
        let ad = nums(&mut s, &format!("(({} log-likelihood) (list {:?} {:?}))", g, t[0], t[1]));
        assert_close(&ad, &fd, 1e-7, g);
    }
}

#[test]
fn optimize_library_documents_every_definition() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("prelude/optimize.vlad")).unwrap();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("(define") {
            assert!(line.contains(';'), "prelude/optimize.vlad:{}: definition without a comment", i + 1);
        }
    }
    // and it is found by `include` from anywhere (it is embedded in the binary)
    let mut s = session();
    let v = s.run_text("<test>", "(include \"optimize\") (dot (list 1 2) (list 3 4))").unwrap();
    assert_eq!(numbers(&v[0]), vec![11.0]);
}
