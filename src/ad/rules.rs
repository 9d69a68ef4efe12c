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
}

/// The VLAD source of a primitive's forward or reverse version.
pub fn rule_source(p: PrimId, k: Kind) -> String {
    let def = prims::prim(p);
    let name = def.name;
    match (def.rule, k) {
        (Rule::Rules { jvp, .. }, Kind::F) => format!(
            "(lambda (v) (let* ((x (primal v)) (y ({name} x))) (bundle y (perturb ({jvp} x y (unperturb (tangent v)))))))"
        ),
        (Rule::Rules { vjp, .. }, _) => format!(
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
        (Rule::Select, Kind::F) => "(lambda (v) (if-procedure v))".to_string(),
        (Rule::Select, _) => "(lambda ((cons c (cons t e))) \
            (if-procedure c \
              (cons t (lambda (s) (sensitize (cons '() (cons (zero (*j-inverse c)) (cons (unsensitize s) (zero (*j-inverse e)))))))) \
              (cons e (lambda (s) (sensitize (cons '() (cons (zero (*j-inverse c)) (cons (zero (*j-inverse t)) (unsensitize s)))))))))"
            .to_string(),
    }
}

/// The forward (`k = F`) or reverse (`k = R`) version of primitive `p`, as a closure.
pub fn prim_rule(m: &mut Machine, p: PrimId, k: Kind) -> Result<Value> {
    if let Some(v) = m.prim_rules.get(&(p, k as u8)) {
        return Ok(v.clone());
    }
    let src = rule_source(p, k);
    let internal = |msg: String| {
        Error::runtime(None, format!("internal error in the rule of {}: {}", prims::prim(p).name, msg))
    };
    let data = crate::reader::read_all(&src, u32::MAX).map_err(|e| internal(e.message.clone()))?;
    let core = crate::expand::expand(&data[0]).map_err(|e| internal(e.message.clone()))?;
    let lam = match &core {
        crate::expand::Core::Lambda(l) => l.clone(),
        _ => return Err(internal("not a lambda".into())),
    };
    let mut n = Normalizer::new(&PrimScope);
    let code = n.lambda_code(&lam).map_err(|e| internal(e.message.clone()))?;
    let g = Group::new(
        vec![],
        vec![code],
        vec![Some(prims::prim(p).name.into())],
        vec![lam.span],
        Origin::PrimRule(k, p),
    );
    if let Some(ms) = g.members.get() {
        super::native::attach(&g, p, k, &ms[0]);
    }
    let v = Value::Closure(InstRc::empty(g), 0);
    m.prim_rules.insert((p, k as u8), v.clone());
    Ok(v)
}
