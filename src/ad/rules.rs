//! The forward and reverse versions of primitives, compiled (once per primitive
//! and kind) from the primitive table's tangent and cotangent rules into VLAD
//! closures, so they can themselves be transformed again when AD is nested.

use crate::anf::{Atom, GlobalScope, Group, Kind, Normalizer, Origin};
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::prims::{self, PrimId, Rule};
use crate::value::{InstRc, Value};

/// A scope that sees only primitives (rule code cannot be shadowed by user code).
pub struct PrimScope;

impl GlobalScope for PrimScope {
    fn lookup(&self, name: &str) -> Option<Atom> {
        prims::lookup(name).map(|p| Atom::Const(Value::Prim(p)))
    }
    fn each_name(&self, f: &mut dyn FnMut(&str)) {
        prims::prims().iter().for_each(|p| f(p.name));
    }
}

/// The VLAD source of a primitive's forward or reverse version.
pub fn rule_source(p: PrimId, k: Kind) -> String {
    let def = prims::prim(p);
    let name = def.name;
    match (def.rule, k) {
        (Rule::Rules { jvp, .. }, Kind::F) => format!(
            "(lambda (v) (let* ((x (primal v)) (y ({name} x))) (bundle y (perturb ({jvp} x y (unperturb (tangent v)))))))"
        ),
        (Rule::Joint { jvp, .. }, Kind::F) => format!(
            "(lambda (v) (let (((cons y dy) ({jvp} (primal v) (unperturb (tangent v))))) (bundle y (perturb dy))))"
        ),
        // (a vector primitive's backpropagator checks that the sensitivity is shaped like
        // the result: a transpose or a product would silently take a wrong-shaped one)
        (Rule::Rules { vjp, .. }, _) if prims::is_vector_prim(p) => format!(
            "(lambda (v) (let* ((x (*j-inverse v)) (y ({name} x))) \
               (cons (*j y) (lambda (s) (sensitize (cons '() ({vjp} x y (%check-sensitivity y (unsensitize s) {p}))))))))"
        ),
        (Rule::Element { .. }, Kind::F) => format!("(lambda ((cons l i)) ({name} l (primal i)))"),
        (Rule::Rules { vjp, .. } | Rule::Joint { vjp, .. } | Rule::Element { vjp }, _) => format!(
            "(lambda (v) (let* ((x (*j-inverse v)) (y ({name} x))) \
               (cons (*j y) (lambda (s) (sensitize (cons '() ({vjp} x y (unsensitize s))))))))"
        ),
        // (a shape predicate whose test is `(p v)`, with the same templates)
        (Rule::Predicate, Kind::F) => format!("(lambda (v) (let ((y ({name} v))) (bundle y (perturb (zero y)))))"),
        (Rule::Predicate, _) => format!(
            "(lambda (v) (let ((y ({name} v))) (cons (*j y) (lambda (s) (sensitize (cons '() (zero (*j-inverse v))))))))"
        ),
        (Rule::Shape { test }, Kind::F) => format!(
            "(lambda (v) (let ((y {})) (bundle y (perturb (zero y)))))",
            test.replace("STRIP", "primal")
        ),
        (Rule::Shape { test }, _) => format!(
            "(lambda (v) (let ((y {})) (cons (*j y) (lambda (s) (sensitize (cons '() (zero (*j-inverse v))))))))",
            test.replace("STRIP", "*j-inverse")
        ),
        (Rule::Via { f }, Kind::F) => format!("(lambda (v) (let ((f {f})) ((bundle f (perturb (zero f))) v)))"),
        (Rule::Via { f }, _) => format!(
            "(lambda (v) (let* ((f {f}) ((cons y bp) ((*j f) v))) \
               (cons y (lambda (s) (let (((cons fb xb) (unsensitize (bp s)))) (sensitize (cons '() xb)))))))"
        ),
        (Rule::Select, Kind::F) => "(lambda (v) (if-procedure v))".to_string(),
        (Rule::Select, _) => "(lambda ((cons c (cons t e))) \
            (if-procedure c \
              (cons t (lambda (s) (sensitize (cons '() (cons (zero (*j-inverse c)) (cons (unsensitize s) (zero (*j-inverse e)))))))) \
              (cons e (lambda (s) (sensitize (cons '() (cons (zero (*j-inverse c)) (cons (zero (*j-inverse t)) (unsensitize s)))))))))"
            .to_string(),
    }
}

/// The second-order rule of a scalar primitive: the reverse of its tangent
/// rule. `(lambda (x y d dy yb db) (cons xb db'))` gives, for the argument `x`,
/// result `y = (p x)`, tangent `d` and result tangent `dy = (jvp x y d)`, and
/// the sensitivities `yb` of `y` and `db` of `dy`, the sensitivities of `x` and
/// of `d` (the tangent rule is linear in `d`: `db'` is the cotangent rule
/// applied to `db`). Derived by hand from the tangent rules above; checked
/// against the reverse transform of the forward version (`tests/ad`).
fn rf_rule(name: &str) -> Option<&'static str> {
    Some(match name {
        "+" => "(lambda (x y d dy yb db) (cons (cons yb yb) (cons db db)))",
        "-" => "(lambda (x y d dy yb db) (cons (cons yb (- 0 yb)) (cons db (- 0 db))))",
        // jvp: (+ (* d1 x2) (* x1 d2))
        "*" => {
            "(lambda ((cons x1 x2) y (cons d1 d2) dy yb db) \
               (cons (cons (+ (* yb x2) (* db d2)) (+ (* yb x1) (* db d1))) (cons (* db x2) (* db x1))))"
        }
        // jvp: (/ (- d1 (* y d2)) x2), through y too
        "/" => {
            "(lambda ((cons x1 x2) y (cons d1 d2) dy yb db) \
               (let ((yt (- yb (/ (* db d2) x2)))) \
                 (cons (cons (/ yt x2) (- 0 (/ (+ (* yt y) (* db dy)) x2))) \
                       (cons (/ db x2) (- 0 (/ (* db y) x2))))))"
        }
        // jvp: (/ dx (* 2 y)), through y
        "sqrt" => "(lambda (x y d dy yb db) (let ((y2 (* 2 y))) (cons (/ (- yb (/ (* db dy) y)) y2) (/ db y2))))",
        // jvp: (* dx y), through y
        "exp" => "(lambda (x y d dy yb db) (cons (* (+ yb (* db d)) y) (* db y)))",
        // jvp: (/ dx x)
        "log" => "(lambda (x y d dy yb db) (cons (/ (- yb (* db dy)) x) (/ db x)))",
        // jvp: (* dx (cos x)); (sin x) is y
        "sin" => "(lambda (x y d dy yb db) (let ((c (cos x))) (cons (- (* yb c) (* (* db d) y)) (* db c))))",
        // jvp: (- 0 (* dx (sin x))); (cos x) is y
        "cos" => {
            "(lambda (x y d dy yb db) (let ((s (sin x))) (cons (- 0 (+ (* yb s) (* (* db d) y))) (- 0 (* db s)))))"
        }
        // jvp: (/ (- (* x2 d1) (* x1 d2)) r), r = (+ (* x1 x1) (* x2 x2))
        "atan" => {
            "(lambda ((cons x1 x2) y (cons d1 d2) dy yb db) \
               (let ((r (+ (* x1 x1) (* x2 x2)))) \
                 (cons (cons (/ (- (* yb x2) (* db (+ d2 (* 2 (* x1 dy))))) r) \
                             (/ (- (* db (- d1 (* 2 (* x2 dy)))) (* yb x1)) r)) \
                       (cons (/ (* db x2) r) (- 0 (/ (* db x1) r))))))"
        }
        _ => return None,
    })
}

/// The VLAD source of the reverse transform of primitive `p`'s forward
/// version, when `p` has a second-order rule (`rf_rule`): the forward version's
/// steps on `(*j-inverse v)`, and a backpropagator that applies the
/// second-order rule to the sensitivity of the result bundle. (The reverse
/// transform of the forward version's code computes the same, through a dozen
/// reverse versions of `primal`, `tangent`, `bundle`... and their
/// backpropagators.)
pub fn rf_source(p: PrimId) -> Option<String> {
    let def = prims::prim(p);
    let (Rule::Rules { jvp, .. }, Some(rf)) = (def.rule, rf_rule(def.name)) else { return None };
    Some(format!(
        "(lambda (v) (let* ((b (*j-inverse v)) (x (primal b)) (d (unperturb (tangent b))) \
           (y ({name} x)) (dy ({jvp} x y d))) \
           (cons (*j (bundle y (perturb dy))) \
             (lambda (s) (let* ((sb (unsensitize s)) ((cons xb db) ({rf} x y d dy (primal sb) (unperturb (tangent sb))))) \
               (sensitize (cons '() (bundle xb (perturb db)))))))))",
        name = def.name
    ))
}

/// Compiles the source of a rule of primitive `p` (a lambda seeing only primitives).
pub fn compile_rule(p: PrimId, src: &str) -> Result<(crate::anf::Lambda, crate::source::Span)> {
    let internal = |msg: String| {
        Error::runtime(None, format!("internal error in the rule of {}: {}", prims::prim(p).name, msg))
    };
    let data = crate::reader::read_all(src, u32::MAX).map_err(|e| internal(e.message.clone()))?;
    let core = crate::expand::expand(&data[0]).map_err(|e| internal(e.message.clone()))?;
    let lam = match &core {
        crate::expand::Core::Lambda(l) => l.clone(),
        _ => return Err(internal("not a lambda".into())),
    };
    let mut n = Normalizer::new(&PrimScope);
    let code = n.lambda_code(&lam).map_err(|e| internal(e.message.clone()))?;
    Ok((code, lam.span))
}

/// The VLAD function a `Rule::Via` primitive `p` is defined as, as a closure
/// (what it runs when its own implementation gives way: `ad::tape`).
pub fn via_closure(p: PrimId) -> Result<Value> {
    let Rule::Via { f } = prims::prim(p).rule else {
        return Err(Error::runtime(
            None,
            format!("internal error: {} has no definition", prims::prim(p).name),
        ));
    };
    let (code, span) = compile_rule(p, f)?;
    let g =
        Group::new(vec![], vec![code], vec![Some(prims::prim(p).name.into())], vec![span], Origin::Source);
    Ok(Value::Closure(InstRc::empty(g), 0))
}

/// The forward (`k = F`) or reverse (`k = R`) version of primitive `p`, as a closure.
pub fn prim_rule(m: &mut Machine, p: PrimId, k: Kind) -> Result<Value> {
    if let Some(v) = m.prim_rules.get(&(p, k as u8)) {
        return Ok(v.clone());
    }
    let (code, span) = compile_rule(p, &rule_source(p, k))?;
    let g = Group::new(
        vec![],
        vec![code],
        vec![Some(prims::prim(p).name.into())],
        vec![span],
        Origin::PrimRule(k, p),
    );
    if let Some(ms) = g.members.get() {
        super::native::attach(&g, p, k, &ms[0]);
    }
    let v = Value::Closure(InstRc::empty(g), 0);
    m.prim_rules.insert((p, k as u8), v.clone());
    Ok(v)
}
