//! The primitive table: one entry per primitive with its name, how its argument
//! is destructured, its implementation, and its derivative rules (AD.md). The
//! evaluator, `bundle` and `*j` all read this table.

use crate::ad::native::Formula;
use crate::ad::ops;
use crate::ad::tape::{self, Want};
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::num;
use crate::resolve::Op2;
use crate::value::{ListBuilder, Tag, Value};
use std::cmp::Ordering;
use std::rc::Rc;
use std::sync::OnceLock;

pub type PrimId = u16;

/// The implementation: receives the destructured arguments.
pub type PrimFn = fn(&mut Machine, &[Value]) -> Result<Value>;

/// What a primitive's derivative rules are.
#[derive(Clone, Copy)]
pub enum Rule {
    /// A tangent rule `(lambda (x y dx) dy)` and a cotangent rule
    /// `(lambda (x y y-bar) x-bar)`, VLAD source over primitives, where `x` is the
    /// (untransformed) argument and `y` the result.
    Rules { jvp: &'static str, vjp: &'static str },
    /// As `Rules`, but the tangent rule `(lambda (x dx) (cons y dy))` computes the
    /// result with its tangent, so the forward version does not call the primitive
    /// first: for primitives whose tangent run recomputes the result anyway (a
    /// reversible procedure's run, which would otherwise run twice, and print
    /// its `write`s twice).
    Joint { jvp: &'static str, vjp: &'static str },
    /// `if-procedure`: selects without computing; sensitivity flows to the branch taken.
    Select,
    /// A type predicate: zero derivative, and a result that depends only on the outer
    /// shape of the argument. `test` is a VLAD expression computing it from the
    /// transformed argument `v`, where `STRIP` stands for `primal` or `*j-inverse`;
    /// it only strips leaves, so the transformed predicate takes constant time even on a
    /// long list (the generic rule would strip the whole list on every call).
    Shape { test: &'static str },
    /// A primitive with zero derivative that accepts transformed arguments as they
    /// are (e.g. `vec-length`): its forward and reverse versions apply it directly.
    Predicate,
    /// A primitive that selects an element of a list (its first argument) at an
    /// index (its second), as `list-ref`: its forward version selects it from the
    /// forward-transformed list at the index's primal (the tangent is the
    /// tangent's element: the same element), taking apart the list the caller
    /// holds, whose parts (lazy) are kept for its next call, not a new view of
    /// its primal and of its tangent each call; its reverse version is
    /// `Rules`' with the cotangent rule `vjp`.
    Element { vjp: &'static str },
    /// A primitive equal to the VLAD function `f` (source over primitives), whose
    /// forward and reverse versions are those of `f`: for primitives whose own
    /// implementation cannot be differentiated (the derivative runs of reversible
    /// procedures), so nesting goes through `f`.
    Via { f: &'static str },
}

/// Counted by `--metered`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Arith,
    Compare,
    Other,
}

pub struct PrimDef {
    pub name: &'static str,
    /// Accepts lazy zeros as they are (others get them built first).
    pub lazy: bool,
    /// Looks only at the outer layer of its arguments (the type and tag
    /// predicates): a lazy argument gets its head normal form, not the whole
    /// value built (which a walk over a lazy list testing each suffix would
    /// repeat at every step).
    pub shallow: bool,
    /// Runs on a reverse-mode tape's reals ([`crate::ad::tape`]): the scalar
    /// arithmetic, comparisons and type predicates. Any other primitive called
    /// while a tape runs makes it give way to the transform.
    pub tape_ok: bool,
    /// Number of arguments; the one argument is a tuple `(cons* a1 ... an)` when n >= 2,
    /// and `'()` when n = 0.
    pub arity: u8,
    pub imp: PrimFn,
    pub rule: Rule,
    pub class: Class,
}

/// `(real-vjp f x)` by the transform: the gradient of `f` (returning a real) at `x`.
pub const REAL_VJP_VIA: &str = "(lambda ((cons f x)) (let* (((cons y bp) ((*j f) (*j x))) \
     ((cons fb xb) (unsensitize (bp (sensitize (%real-result-seed y)))))) xb))";
/// `(vjp f x ybar)` by the transform.
pub const VJP_VIA: &str = "(lambda ((cons f (cons x ybar))) (let* (((cons y bp) ((*j f) (*j x))) \
     ((cons fb xb) (unsensitize (bp (sensitize (%check-sensitivity y ybar -1)))))) xb))";
/// `(value-and-vjp f x ybar)` by the transform.
pub const VALUE_AND_VJP_VIA: &str = "(lambda ((cons f (cons x ybar))) (let* (((cons y bp) ((*j f) (*j x))) \
     ((cons fb xb) (unsensitize (bp (sensitize (%check-sensitivity y ybar -1)))))) (cons (*j-inverse y) xb)))";

/// `(jvp f x dx)` by the transform: the tangent of `(f x)` for tangent `dx` of `x`.
pub const JVP_VIA: &str = "(lambda ((cons f (cons x dx))) \
     (unperturb (tangent ((bundle f (perturb (zero f))) (bundle x (perturb (%check-tangent x dx)))))))";

// The list walks' definitions end where the list does not: a tail that is
// neither a pair nor `()` (or a second list shorter than the first) calls
// `%list-error` on it, which says so in the primitive's name (the pattern
// would fail with "pattern mismatch"); its first argument says which primitive
// (`LIST_WALKS`), plus 5 where what is not a list is the whole argument
// (tested before the loop: the primitive's own message then, "expected a
// list, got #t"). (Given the tail, not the whole list, which the loop would
// then capture: its sensitivity is a step's work more on every element.)

/// `(append a b)`: the elements of `a` followed by `b`.
pub const APPEND_VIA: &str = "(lambda ((cons a b)) \
  (if (pair? a) \
    (let loop ((l a)) (if (pair? l) (let (((cons x d) l)) (cons x (loop d))) \
      (if (null? l) b (%list-error 0 l)))) \
    (if (null? a) b (%list-error 5 a))))";

/// `(map f l)`: f on every element, in order.
pub const MAP_VIA: &str = "(lambda ((cons f l0)) \
  (if (pair? l0) \
    (let loop ((l l0)) (if (pair? l) (let (((cons a d) l)) (cons (f a) (loop d))) \
      (if (null? l) '() (%list-error 1 l)))) \
    (if (null? l0) '() (%list-error 6 l0))))";

/// `(map2 f l1 l2)`: f on corresponding elements, as many as `l1` has.
pub const MAP2_VIA: &str = "(lambda ((cons f (cons l1 l2))) \
  (if (pair? l1) \
    (if (pair? l2) \
      (let loop ((m1 l1) (m2 l2)) \
        (if (pair? m1) \
          (if (pair? m2) (let (((cons a d1) m1) ((cons b d2) m2)) (cons (f a b) (loop d1 d2))) \
            (%list-error 2 (cons m1 m2))) \
          (if (null? m1) '() (%list-error 2 (cons m1 m2))))) \
      (%list-error 7 (cons l1 l2))) \
    (if (null? l1) '() (%list-error 7 (cons l1 l2)))))";

/// `(fold-left f acc l)`: `(f (f acc x1) x2)`... from the left.
pub const FOLD_LEFT_VIA: &str = "(lambda ((cons f (cons acc0 l0))) \
  (if (pair? l0) \
    (let loop ((acc acc0) (l l0)) (if (pair? l) (let (((cons a d) l)) (loop (f acc a) d)) \
      (if (null? l) acc (%list-error 3 l)))) \
    (if (null? l0) acc0 (%list-error 8 l0))))";

/// `(reduce f i l)`: `(f x1 (f x2 ... (f xn i)))`, the last application first.
pub const REDUCE_VIA: &str = "(lambda ((cons f (cons i l0))) \
  (if (pair? l0) \
    (let loop ((l l0)) (if (pair? l) (let (((cons a d) l)) (f a (loop d))) \
      (if (null? l) i (%list-error 4 l)))) \
    (if (null? l0) i (%list-error 9 l0))))";

/// The list walks defined above, by `%list-error`'s first argument.
const LIST_WALKS: [&str; 5] = ["append", "map", "map2", "fold-left", "reduce"];

/// `((gradient-F f) x)` by the transform: the prelude's walk, one `jvp` per real of
/// `x` (in order), each along a one-hot tangent shaped like `x`.
pub const GRADIENT_F_VIA: &str = "(lambda ((cons f x)) \
  (let ((jvp (lambda (dx) (unperturb (tangent ((bundle f (perturb (zero f))) (bundle x (perturb dx)))))))) \
    (letrec ((walk (lambda (y embed) \
               (if (real? y) (%real-derivative (jvp (embed 1))) \
                 (if (pair? y) \
                     (let (((cons a b) y)) \
                       (cons (walk a (lambda (da) (embed (cons da (zero b))))) \
                             (walk b (lambda (db) (embed (cons (zero a) db)))))) \
                     (if (vector? y) \
                         (vec-shape-like (vector-of (column y embed 0 (vec-length y))) y) \
                         (if (procedure? y) \
                             (let ((e (%env y))) \
                               (if (null? e) (zero y) \
                                   (%with-env y (walk e (lambda (de) (embed (%with-env y de))))))) \
                             (zero y))))))) \
             (column (lambda (y embed i n) \
               (if (= i n) '() \
                   (let ((d (%real-derivative (jvp (embed (vec-one-hot y i 1)))))) \
                     (cons d (column y embed (+ i 1) n))))))) \
      (walk x (lambda (dy) dy)))))";

/// `(%jvp-units f x)` by its definition: `(jvp f x u)` for each unit vector `u` of
/// the list `x` (`%unit`: exact 1 at its index, exact 0 elsewhere), in order, each
/// `jvp` the primitive (on levels where it can run there).
pub const JVP_UNITS_VIA: &str = "(lambda ((cons f x)) \
  (let* ((n (length x)) \
         (unit (lambda (i) \
                 (let loop ((k (- n 1)) (acc '())) \
                   (if (< k 0) acc (loop (- k 1) (cons (if (= k i) 1 0) acc))))))) \
    (map (lambda (i) (%jvp f x (unit i))) \
         (let loop ((k (- n 1)) (acc '())) (if (< k 0) acc (loop (- k 1) (cons k acc)))))))";

/// Zero derivative in both modes.
pub const ZERO_RULES: Rule =
    Rule::Rules { jvp: "(lambda (x y dx) (zero y))", vjp: "(lambda (x y yb) (zero x))" };

/// A type predicate's rule. `()`, pairs and procedures keep their kind under every AD
/// transform, so `null?`, `pair?` and `procedure?` test the transformed value as is;
/// booleans and reals become tagged leaves, stripped after ruling out aggregates.
const fn shape(test: &'static str) -> Rule {
    Rule::Shape { test }
}

macro_rules! rules {
    ($jvp:expr, $vjp:expr) => {
        Rule::Rules { jvp: $jvp, vjp: $vjp }
    };
}

impl PrimDef {
    /// A table entry. The AD primitives that take lazy values apart one level at
    /// a time (and the predicates that only look at the outer shape) receive lazy
    /// arguments as they are; every other primitive gets them built first.
    pub fn new(name: &'static str, arity: u8, imp: PrimFn, rule: Rule, class: Class) -> PrimDef {
        let lazy = matches!(
            name,
            "zero"
                | "plus"
                | "primal"
                | "tangent"
                | "bundle"
                | "perturb"
                | "unperturb"
                | "sensitize"
                | "unsensitize"
                | "*j"
                | "*j-inverse"
                | "pair?"
                | "null?"
                | "procedure?"
                | "%check-sensitivity"
                | "%check-tangent"
                // (they take a lazy list apart pair by pair)
                | "length"
                | "list-ref"
                | "%one-hot"
        );
        let shallow = matches!(
            name,
            "real?" | "boolean?" | "vector?" | "perturbation?" | "forward?" | "sensitivity?" | "reverse?"
        );
        let tape_ok = matches!(
            name,
            "+" | "-"
                | "*"
                | "/"
                | "sqrt"
                | "exp"
                | "log"
                | "sin"
                | "cos"
                | "atan"
                | "="
                | "<"
                | ">"
                | "<="
                | ">="
                | "zero?"
                | "positive?"
                | "negative?"
                | "null?"
                | "boolean?"
                | "real?"
                | "pair?"
                | "procedure?"
                | "vector?"
                | "if-procedure"
                | "real"
                | "%real-vjp"
                | "%vjp"
                | "%value-and-vjp"
                | "%jvp"
                | "%gradient-F"
                | "%jvp-units"
                | "length"
                | "list-ref"
                | "append"
                | "map"
                | "map2"
                | "fold-left"
                | "reduce"
                | "zero"
                | "%real-derivative"
                // (reversible procedures under nested derivatives: see
                // `rev::run_on_levels`; their translation's helpers, which give
                // way themselves where a level does not model what they meet)
                | "call"
                | "uncall"
                | "%rev-call"
                | "%rev-uncall"
                | "%rev-fun"
                | "%rev-ref"
                | "%rev-set"
                | "%rev-unpack"
                | "%rev-repack"
                | "%rev-zero-of"
                | "%rev-wrap32"
                | "%rev-qdiv"
                | "%rev-div"
                | "%rev-mod"
                | "%rev-fracmul"
                | "%rev-and"
                | "%rev-or"
                | "%rev-xor"
                | "%rev-xor-update"
        );
        PrimDef { name, lazy, shallow, tape_ok, arity, imp, rule, class }
    }
}

fn table() -> Vec<PrimDef> {
    use Class::*;
    let p = PrimDef::new;
    let mut t = vec![
        p("+", 2, |m, a| arith(m, '+', a), rules!("(lambda (x y (cons d1 d2)) (+ d1 d2))", "(lambda (x y yb) (cons yb yb))"), Arith),
        p("-", 2, |m, a| arith(m, '-', a), rules!("(lambda (x y (cons d1 d2)) (- d1 d2))", "(lambda (x y yb) (cons yb (- 0 yb)))"), Arith),
        p(
            "*",
            2,
            |m, a| arith(m, '*', a),
            rules!(
                "(lambda ((cons x1 x2) y (cons d1 d2)) (+ (* d1 x2) (* x1 d2)))",
                "(lambda ((cons x1 x2) y yb) (cons (* yb x2) (* yb x1)))"
            ),
            Arith,
        ),
        p(
            "/",
            2,
            |m, a| arith(m, '/', a),
            rules!(
                "(lambda ((cons x1 x2) y (cons d1 d2)) (/ (- d1 (* y d2)) x2))",
                "(lambda ((cons x1 x2) y yb) (cons (/ yb x2) (- 0 (/ (* yb y) x2))))"
            ),
            Arith,
        ),
        p(
            "sqrt",
            1,
            |m, a| unary(m, "sqrt", Formula::Sqrt, &a[0], num::sqrt),
            rules!("(lambda (x y dx) (/ dx (* 2 y)))", "(lambda (x y yb) (/ yb (* 2 y)))"),
            Arith,
        ),
        p(
            "exp",
            1,
            |m, a| unary(m, "exp", Formula::Exp, &a[0], |v| num::real_fn(f64::exp, v)),
            rules!("(lambda (x y dx) (* dx y))", "(lambda (x y yb) (* yb y))"),
            Arith,
        ),
        p(
            "log",
            1,
            |m, a| unary(m, "log", Formula::Log, &a[0], num::log),
            rules!("(lambda (x y dx) (/ dx x))", "(lambda (x y yb) (/ yb x))"),
            Arith,
        ),
        p(
            "sin",
            1,
            |m, a| unary(m, "sin", Formula::Sin, &a[0], |v| num::real_fn(f64::sin, v)),
            rules!("(lambda (x y dx) (* dx (cos x)))", "(lambda (x y yb) (* yb (cos x)))"),
            Arith,
        ),
        p(
            "cos",
            1,
            |m, a| unary(m, "cos", Formula::Cos, &a[0], |v| num::real_fn(f64::cos, v)),
            rules!("(lambda (x y dx) (- 0 (* dx (sin x))))", "(lambda (x y yb) (- 0 (* yb (sin x))))"),
            Arith,
        ),
        p(
            "atan",
            2,
            atan,
            rules!(
                "(lambda ((cons x1 x2) y (cons d1 d2)) (/ (- (* x2 d1) (* x1 d2)) (+ (* x1 x1) (* x2 x2))))",
                "(lambda ((cons x1 x2) y yb) (let ((r (+ (* x1 x1) (* x2 x2)))) (cons (/ (* yb x2) r) (- 0 (/ (* yb x1) r)))))"
            ),
            Arith,
        ),
        p("=", 2, |_, a| cmp("=", a, |o| o == Ordering::Equal), ZERO_RULES, Compare),
        p("<", 2, |_, a| cmp("<", a, |o| o == Ordering::Less), ZERO_RULES, Compare),
        p(">", 2, |_, a| cmp(">", a, |o| o == Ordering::Greater), ZERO_RULES, Compare),
        p("<=", 2, |_, a| cmp("<=", a, |o| o != Ordering::Greater), ZERO_RULES, Compare),
        p(">=", 2, |_, a| cmp(">=", a, |o| o != Ordering::Less), ZERO_RULES, Compare),
        p("zero?", 1, |_, a| sign("zero?", &a[0], |o| o == Ordering::Equal), ZERO_RULES, Compare),
        p("positive?", 1, |_, a| sign("positive?", &a[0], |o| o == Ordering::Greater), ZERO_RULES, Compare),
        p("negative?", 1, |_, a| sign("negative?", &a[0], |o| o == Ordering::Less), ZERO_RULES, Compare),
        p("null?", 1, |_, a| Ok(Value::Bool(matches!(a[0], Value::Nil))), shape("(null? v)"), Other),
        p(
            "boolean?",
            1,
            |_, a| Ok(Value::Bool(matches!(a[0], Value::Bool(_)))),
            shape("(if (pair? v) #f (if (procedure? v) #f (boolean? (STRIP v))))"),
            Other,
        ),
        p(
            "real?",
            1,
            |_, a| Ok(Value::Bool(a[0].is_number() || a[0].is_active())),
            shape("(if (pair? v) #f (if (procedure? v) #f (real? (STRIP v))))"),
            Other,
        ),
        p("pair?", 1, |_, a| Ok(Value::Bool(a[0].is_pair())), shape("(pair? v)"), Other),
        p("procedure?", 1, |_, a| Ok(Value::Bool(a[0].is_procedure())), shape("(procedure? v)"), Other),
        // The prelude's reverse-mode derivative and gradient seed the result's
        // sensitivity with 1, which only a real result (under its `*j` tag) can take.
        p(
            "%real-result-seed",
            1,
            |m, a| {
                // (a value predicate: the same answer for a value and its transformed versions)
                if ops::strip(&a[0]).is_number() {
                    return Ok(Value::Int(1));
                }
                let y = primal_view(m, &a[0], &mut 64);
                Err(err(format!(
                    "derivative-R/gradient-R: the function must return a real, got {} ({}); \
                     for other results use vjp with a sensitivity shaped like the result, or jacobian-R",
                    crate::print::brief(&y, 60),
                    y.kind_name()
                )))
            },
            Rule::Predicate,
            Other,
        ),
        // The prelude's reverse-mode entry points (`real-vjp`, `vjp`, `value-and-vjp`):
        // on a tape when called directly (`ad::tape`), defined (and differentiated
        // when nested) by the transform, as `Rule::Via` says.
        p("%real-vjp", 2, |m, a| tape::run(m, Want::RealVjp, a), Rule::Via { f: REAL_VJP_VIA }, Other),
        p("%vjp", 3, |m, a| tape::run(m, Want::Vjp, a), Rule::Via { f: VJP_VIA }, Other),
        p("%value-and-vjp", 3, |m, a| tape::run(m, Want::ValueAndVjp, a), Rule::Via { f: VALUE_AND_VJP_VIA }, Other),
        p("%jvp", 3, |m, a| tape::run(m, Want::Jvp, a), Rule::Via { f: JVP_VIA }, Other),
        p("%gradient-F", 2, tape::gradient_forward, Rule::Via { f: GRADIENT_F_VIA }, Other),
        // The columns of a Jacobian by forward mode (`jacobian-F`, `hessian`): one
        // recorded run swept forward once per real where it can (`ad::tape`).
        p("%jvp-units", 2, tape::jvp_units, Rule::Via { f: JVP_UNITS_VIA }, Other),
        // A closure's environment as a list, and a closure of the same code over another
        // environment: gradient-F's walk of a closure in its argument (its derivatives
        // are those of its environment's reals, as gradient-R's sensitivities are).
        p(
            "%env",
            1,
            env_list,
            rules!(
                "(lambda (x y dx) (%env dx))",
                "(lambda (x y yb) (if (null? yb) (zero x) (%with-env x yb)))"
            ),
            Other,
        ),
        p(
            "%with-env",
            2,
            with_env,
            rules!(
                "(lambda ((cons c l) y (cons dc dl)) (%with-env c dl))",
                "(lambda ((cons c l) y yb) (cons (zero c) (if (null? yb) (zero l) (%env yb))))"
            ),
            Other,
        ),
        // The list walks `map`, `map2`, `fold-left` and `reduce`: a loop here when
        // called directly (no interpreted call per element, no recursion for a
        // long list); by their definitions (`Rule::Via`, written over primitives
        // as the prelude defined them) when a transform differentiates them.
        // `length`'s derivative is zero: its versions count the transformed list.
        p("length", 1, length_native, Rule::Predicate, Other),
        // `list-ref` selects: its tangent is the same element of the tangent,
        // its cotangent the zero of the list with the sensitivity at that
        // element (`%one-hot`, whose own rules are `list-ref`'s transposed). (Its
        // definition by a loop cost the transform a step per element passed.)
        p(
            "list-ref",
            2,
            list_ref_native,
            Rule::Element { vjp: "(lambda ((cons l i) y yb) (cons (%one-hot l i yb) (zero i)))" },
            Other,
        ),
        // `(%one-hot l i v)`: the zero of list `l` with element `i` replaced by `v`
        // (the elements after it one lazy zero).
        p(
            "%one-hot",
            3,
            one_hot,
            rules!(
                "(lambda ((cons l (cons i v)) y (cons dl (cons di dv))) (%one-hot l i dv))",
                "(lambda ((cons l (cons i v)) y yb) (cons (zero l) (cons (zero i) (list-ref yb i))))"
            ),
            Other,
        ),
        // (the error of a list walk's definition where its list is not one: see `LIST_WALKS`)
        p("%list-error", 2, list_error, Rule::Predicate, Other),
        p("append", 2, append_native, Rule::Via { f: APPEND_VIA }, Other),
        p("map", 2, map_native, Rule::Via { f: MAP_VIA }, Other),
        p("map2", 3, map2_native, Rule::Via { f: MAP2_VIA }, Other),
        p("fold-left", 3, fold_left_native, Rule::Via { f: FOLD_LEFT_VIA }, Other),
        p("reduce", 3, reduce_native, Rule::Via { f: REDUCE_VIA }, Other),
        // The sensitivity `s` of a value `y`, checked to be shaped like it (by `vjp`, who = -1,
        // and by the backpropagators of the vector primitives, who = the primitive's id).
        p(
            "%check-sensitivity",
            3,
            check_sensitivity,
            rules!(
                "(lambda ((cons y (cons s w)) r (cons dy (cons ds dw))) ds)",
                "(lambda ((cons y (cons s w)) r rb) (cons (zero y) (cons rb (zero w))))"
            ),
            Other,
        ),
        // The tangent `dx` of an argument `x`, checked to be shaped like it (by `jvp`).
        p(
            "%check-tangent",
            2,
            check_tangent,
            rules!(
                "(lambda ((cons x dx) r (cons dxx ddx)) ddx)",
                "(lambda ((cons x dx) r rb) (cons (zero x) rb))"
            ),
            Other,
        ),
        // The derivative the prelude's forward-mode gradient takes along one real of
        // the argument: a real, as the function must return a real.
        p(
            "%real-derivative",
            1,
            |m, a| {
                if ops::strip(&a[0]).is_number() || a[0].is_active() {
                    return Ok(a[0].clone());
                }
                let d = primal_view(m, &a[0], &mut 64);
                Err(err(format!(
                    "gradient-F: the function must return a real, but its derivative along a real of the \
                     argument is {} ({}); for other results use jvp, or jacobian-F",
                    crate::print::brief(&d, 60),
                    d.kind_name()
                )))
            },
            rules!("(lambda (x y dx) dx)", "(lambda (x y yb) yb)"),
            Other,
        ),
        // The `error` form: `(error "message" irritant ...)` is `(%error k (list irritant ...))`.
        p("%error", 2, raise_error, Rule::Predicate, Other),
        p(
            "if-procedure",
            3,
            |_, a| Ok(if a[0].is_true_stripped() { a[1].clone() } else { a[2].clone() }),
            Rule::Select,
            Other,
        ),
        p("read-real", 0, |m, _| m.read_real(), ZERO_RULES, Other),
        p(
            "write-real",
            1,
            |m, a| {
                real_arg("write-real", &a[0])?;
                m.write_value(&a[0])?;
                Ok(a[0].clone())
            },
            rules!("(lambda (x y dx) dx)", "(lambda (x y yb) yb)"),
            Other,
        ),
        p(
            "write",
            1,
            |m, a| {
                m.write_value(&a[0])?;
                Ok(a[0].clone())
            },
            rules!("(lambda (x y dx) dx)", "(lambda (x y yb) yb)"),
            Other,
        ),
        // The labelled `write` form: `(write "label" x)` is `(%write-label k x)`,
        // `(write "text")` is `(%write-text k)` (strings are no values: `k` is the
        // text's index, as for `error`).
        p("%write-label", 2, write_labelled, LABEL_RULES, Other),
        // `(write-real "label" x)`: the same for a real.
        p(
            "%write-real-label",
            2,
            |m, a| {
                real_arg("write-real", &a[1])?;
                write_labelled(m, a)
            },
            LABEL_RULES,
            Other,
        ),
        p(
            "%write-text",
            1,
            |m, a| {
                write_message(m, &a[0], "\n")?;
                Ok(Value::Nil)
            },
            Rule::Predicate,
            Other,
        ),
        p(
            "real",
            1,
            |_, a| {
                if a[0].is_active() {
                    return Ok(a[0].clone());
                }
                real_arg("real", &a[0])?;
                Ok(a[0].clone())
            },
            rules!("(lambda (x y dx) dx)", "(lambda (x y yb) yb)"),
            Other,
        ),
        // Forward-mode AD primitives.
        p("zero", 1, |m, a| ops::lazy_zero(m, &a[0]), rules!("(lambda (x y dx) (zero dx))", "(lambda (x y yb) (zero x))"), Other),
        p(
            "perturb",
            1,
            |m, a| ops::tag(m, Tag::Perturbation, &a[0]),
            rules!("(lambda (x y dx) (perturb dx))", "(lambda (x y yb) (unperturb yb))"),
            Other,
        ),
        p(
            "unperturb",
            1,
            |m, a| ops::untag(m, Tag::Perturbation, &a[0]),
            rules!("(lambda (x y dx) (unperturb dx))", "(lambda (x y yb) (perturb yb))"),
            Other,
        ),
        p(
            "primal",
            1,
            |m, a| ops::primal(m, &a[0]),
            rules!("(lambda (x y dx) (primal dx))", "(lambda (x y yb) (bundle yb (zero (tangent x))))"),
            Other,
        ),
        p(
            "tangent",
            1,
            |m, a| ops::tangent(m, &a[0]),
            rules!("(lambda (x y dx) (tangent dx))", "(lambda (x y yb) (bundle (zero (primal x)) yb))"),
            Other,
        ),
        p(
            "bundle",
            2,
            |m, a| ops::bundle(m, &a[0], &a[1]),
            rules!("(lambda (x y dx) (bundle dx))", "(lambda (x y yb) (cons (primal yb) (tangent yb)))"),
            Other,
        ),
        // Reverse-mode AD primitives.
        p(
            "sensitize",
            1,
            |m, a| ops::tag(m, Tag::Sensitivity, &a[0]),
            rules!("(lambda (x y dx) (sensitize dx))", "(lambda (x y yb) (unsensitize yb))"),
            Other,
        ),
        p(
            "unsensitize",
            1,
            |m, a| ops::untag(m, Tag::Sensitivity, &a[0]),
            rules!("(lambda (x y dx) (unsensitize dx))", "(lambda (x y yb) (sensitize yb))"),
            Other,
        ),
        p("plus", 2, |m, a| ops::plus(m, &a[0], &a[1]), rules!("(lambda (x y dx) (plus dx))", "(lambda (x y yb) (cons yb yb))"), Other),
        p(
            "*j",
            1,
            |m, a| ops::tag(m, Tag::Reverse, &a[0]),
            rules!("(lambda (x y dx) (*j dx))", "(lambda (x y yb) (*j-inverse yb))"),
            Other,
        ),
        p(
            "*j-inverse",
            1,
            |m, a| ops::untag(m, Tag::Reverse, &a[0]),
            rules!("(lambda (x y dx) (*j-inverse dx))", "(lambda (x y yb) (*j yb))"),
            Other,
        ),
        p("perturbation?", 1, |_, a| Ok(Value::Bool(ops::outer_tag(&a[0]) == Some(ops::OuterTag::P))), ZERO_RULES, Other),
        p("forward?", 1, |_, a| Ok(Value::Bool(ops::outer_tag(&a[0]) == Some(ops::OuterTag::F))), ZERO_RULES, Other),
        p("sensitivity?", 1, |_, a| Ok(Value::Bool(ops::outer_tag(&a[0]) == Some(ops::OuterTag::S))), ZERO_RULES, Other),
        p("reverse?", 1, |_, a| Ok(Value::Bool(ops::outer_tag(&a[0]) == Some(ops::OuterTag::R))), ZERO_RULES, Other),
    ];
    // Reversible procedures (REVERSIBLE.md): call/uncall/rev-grad and their helpers.
    t.extend(crate::rev::prims());
    t
}

static TABLE: OnceLock<Vec<PrimDef>> = OnceLock::new();

/// The core primitives followed by the vector primitives (`vec::prims`).
fn full_table() -> Vec<PrimDef> {
    let mut t = table();
    let _ = CORE_LEN.set(t.len());
    t.extend(crate::vec::prims::table());
    t
}

static CORE_LEN: OnceLock<usize> = OnceLock::new();

/// Is `p` one of the vector primitives (`vec::prims`)?
pub fn is_vector_prim(p: PrimId) -> bool {
    prims();
    CORE_LEN.get().is_some_and(|n| p as usize >= *n)
}

/// All primitives; a [`PrimId`] indexes this slice.
pub fn prims() -> &'static [PrimDef] {
    TABLE.get_or_init(full_table)
}

pub fn prim(id: PrimId) -> &'static PrimDef {
    &prims()[id as usize]
}

/// Looks a primitive up by name.
pub fn lookup(name: &str) -> Option<PrimId> {
    prims().iter().position(|p| p.name == name).map(|i| i as PrimId)
}

/// A value with its AD tags and tangents stripped, for an error message (at
/// most `budget` pairs are taken apart).
fn primal_view(m: &mut Machine, v: &Value, budget: &mut u32) -> Value {
    let v = match ops::hnf(m, v) {
        Ok(h) => h,
        Err(_) => return v.clone(),
    };
    match &*ops::strip(&v) {
        Value::Pair(p) if *budget > 0 => {
            *budget -= 1;
            let a = primal_view(m, &p.car, budget);
            Value::cons(a, primal_view(m, &p.cdr, budget))
        }
        Value::Lazy(_) if *budget > 0 => {
            *budget -= 1;
            primal_view(m, &ops::strip(&v), budget)
        }
        other => other.clone(),
    }
}

/// The messages of the program's `error` forms and the texts of its labelled
/// `write` forms, each once: the expander turns `(error "message" x ...)` into
/// `(%error k (list x ...))`, `k` the message's index here (VLAD has no strings
/// as values), `(write "label" x)` into `(%write-label k x)`, and `(write-real
/// "label" x)` into `(%write-real-label k x)`.
static MESSAGES: std::sync::Mutex<Vec<std::sync::Arc<str>>> = std::sync::Mutex::new(Vec::new());

/// The index of `msg` among the `error` forms' messages (added if new).
pub fn intern_message(msg: &str) -> i64 {
    let mut t = MESSAGES.lock().unwrap_or_else(|e| e.into_inner());
    let k = t.iter().position(|m| &**m == msg).unwrap_or_else(|| {
        t.push(msg.into());
        t.len() - 1
    });
    k as i64
}

/// Message `k` of [`intern_message`].
pub fn message(k: i64) -> Option<std::sync::Arc<str>> {
    let t = MESSAGES.lock().unwrap_or_else(|e| e.into_inner());
    usize::try_from(k).ok().and_then(|k| t.get(k).cloned())
}

/// The index `k` of a message (of [`intern_message`]), -1 if it is none. (It
/// may come tagged, or as a double, through the AD transforms.)
pub fn int_index(k: &Value) -> i64 {
    match &*ops::strip(k) {
        Value::Int(k) => *k,
        Value::Real(r) if r.fract() == 0.0 => *r as i64,
        _ => -1,
    }
}

/// Prints message `k` (a labelled `write`'s text) followed by `end`.
fn write_message(m: &mut Machine, k: &Value, end: &str) -> Result<()> {
    m.write_text(message(int_index(k)).as_deref().unwrap_or(""), end)
}

/// `(%write-label k x)`: prints message `k`, a space and `x`'s value; returns `x`.
fn write_labelled(m: &mut Machine, a: &[Value]) -> Result<Value> {
    write_message(m, &a[0], " ")?;
    m.write_value(&a[1])?;
    Ok(a[1].clone())
}

/// The rules of a labelled write (`write`'s, identity in the value; the
/// label's index has none).
const LABEL_RULES: Rule =
    rules!("(lambda ((cons k x) y (cons dk dx)) dx)", "(lambda ((cons k x) y yb) (cons (zero k) yb))");

/// `(%error k irritants)`, the `error` form: fails with message `k` followed by
/// the irritants as they print (AD tags and tangents stripped), each after a
/// space, as Scheme's `error` reports them.
fn raise_error(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let k = int_index(&a[0]);
    let mut msg = message(k).map_or_else(|| "error".to_string(), |s| s.to_string());
    let mut budget = 64;
    let mut rest = primal_view(m, &a[1], &mut budget);
    while let Value::Pair(p) = rest {
        msg.push(' ');
        msg.push_str(&crate::print::brief(&p.car, 200));
        rest = p.cdr.clone();
    }
    Err(err(msg))
}

/// `(%check-sensitivity y s who)`: `s`, checked to be a sensitivity of `y`
/// (`who`: -1 for `vjp`, else the id of the vector primitive whose backpropagator
/// checks it). vjp's check accepts what the reversible procedures' derivatives
/// do; the primitives' rules need the exact shape.
fn check_sensitivity(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let who = match &*ops::strip(&a[2]) {
        Value::Int(i) if *i >= 0 && (*i as usize) < prims().len() => Some(prims()[*i as usize].name),
        _ => None,
    };
    let Some(why) = ops::sensitivity_mismatch(m, &a[0], &a[1], who.is_some())? else {
        // (`vjp`'s: a `()` it accepted for a number is that number's zero)
        return if who.is_none() { ops::nil_as_zero(m, &a[0], &a[1]) } else { Ok(a[1].clone()) };
    };
    Err(err(match who {
        None => format!("vjp: the sensitivity must be shaped like the function's result: {why}"),
        Some(n) => format!("{n}: the sensitivity of its result must be shaped like the result: {why}"),
    }))
}

/// `(%check-tangent x dx)`: `dx`, checked to be a tangent of `x` (by `jvp`:
/// pairs where `x` has pairs, `()` where it has `()`, reals where it has reals,
/// vectors of its shapes), so that a mismatch is named at the call, not where
/// the function takes the bundled argument apart.
fn check_tangent(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let Some(why) = ops::tangent_mismatch(m, &a[0], &a[1])? else {
        return Ok(a[1].clone());
    };
    // (`derivative-F`'s tangent is the exact 1: a function of a list given to it)
    let hint = if matches!(&*ops::strip(&a[1]), Value::Int(1)) && !ops::strip(&a[0]).is_number() {
        " (derivative-F takes a real: for a function of a list or vector, use gradient-F, or jvp with a tangent shaped like the argument)"
    } else {
        ""
    };
    Err(err(format!("jvp: the tangent must be shaped like the argument: {why}{hint}")))
}

/// `(%env c)`: the values closure `c` captures, as a list; `()` for a
/// primitive, a primitive's transformed version, a reversible procedure, or
/// `()` (such procedures' zero).
fn env_list(_: &mut Machine, a: &[Value]) -> Result<Value> {
    match &a[0] {
        Value::Closure(inst, _) if !ops::is_prim_based(&a[0]) => Ok(Value::list(inst.env.iter().cloned())),
        Value::Closure(..) | Value::Prim(_) | Value::Rev(_) | Value::Nil => Ok(Value::Nil),
        v => Err(err(format!("%env: expected a procedure, got {} ({})", describe(v), v.kind_name()))),
    }
}

/// `(%with-env c l)`: a closure of `c`'s code capturing the values of list
/// `l` (as many as `c` captures) instead; `c` itself where it captures
/// nothing ([`env_list`] gives `()`).
fn with_env(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (Value::Closure(inst, idx), false) = (&a[0], ops::is_prim_based(&a[0])) else {
        return Ok(a[0].clone());
    };
    let mut env = Vec::with_capacity(inst.env.len());
    // (a lazy zero's parts built: `zero` of the other captured values)
    let l = ops::force(m, &a[1])?;
    walk(m, "%with-env", &l, |_, v| {
        env.push(v.clone());
        Ok(())
    })?;
    if env.len() != inst.env.len() {
        return Err(err(format!(
            "%with-env: the closure captures {} values, the list has {}",
            inst.env.len(),
            env.len()
        )));
    }
    Ok(Value::Closure(crate::value::InstRc::new(inst.group.clone(), env), *idx))
}

fn err(msg: String) -> Error {
    Error::runtime(None, msg)
}

/// A value in an error message: a procedure of transformed code as the
/// program gave it (see `print::brief_source`).
fn describe(v: &Value) -> String {
    crate::print::brief_source(v, 60)
}

fn arith(m: &mut Machine, op: char, a: &[Value]) -> Result<Value> {
    match num::arith(op, &a[0], &a[1]) {
        Some(r) => r.map_err(|m| err(format!("{}: {}", op, m))),
        None if tape::any_active(a) => {
            let (f, imp): (Formula, PrimFn) = match op {
                '+' => (Formula::Add, |m, a| arith(m, '+', a)),
                '-' => (Formula::Sub, |m, a| arith(m, '-', a)),
                '*' => (Formula::Mul, |m, a| arith(m, '*', a)),
                _ => (Formula::Div, |m, a| arith(m, '/', a)),
            };
            tape::record(m, f, a, &imp)
        }
        None => Err(not_two_numbers(op, a)),
    }
}

/// The error of binary primitive `name` given `a`, not two numbers: names the
/// first operand that is not one. A pair as the second is also what more than two
/// arguments make (`(* a b c)` passes `(a . (b . c))`), which code being
/// differentiated passes on without the call's count of its arguments: said so
/// (without saying that it was so: `(< 1 (list 2))` passes a pair too).
fn not_two_numbers(name: impl std::fmt::Display, a: &[Value]) -> Error {
    let second = a[0].is_number();
    let bad = if second { &a[1] } else { &a[0] };
    let kind = match bad {
        Value::Pair(_) if second => {
            format!("a pair, which is also what more than two arguments make: `{name}` takes two")
        }
        _ => bad.kind_name().to_string(),
    };
    err(format!("{}: expected two numbers, got {} ({})", name, describe(bad), kind))
}

fn real_arg(name: &str, v: &Value) -> Result<f64> {
    v.as_f64()
        .ok_or_else(|| err(format!("{}: expected a number, got {} ({})", name, describe(v), v.kind_name())))
}

/// Unary primitive `name` (of formula `formula`), computed on numbers by `f`.
fn unary(
    m: &mut Machine,
    name: &str,
    formula: Formula,
    v: &Value,
    f: fn(&Value) -> Option<Value>,
) -> Result<Value> {
    if v.is_active() {
        return tape::record(m, formula, std::slice::from_ref(v), &|m, x| unary(m, name, formula, &x[0], f));
    }
    f(v).ok_or_else(|| not_one_number(name, v))
}

/// The error of one-argument primitive `name` given `v`, not a number. A pair
/// is what more than one argument make (`(sqrt 1 2)` passes `(1 . 2)`): said so.
fn not_one_number(name: &str, v: &Value) -> Error {
    let kind = match v {
        Value::Pair(_) => {
            format!("a pair, which is also what more than one argument make: `{name}` takes one")
        }
        _ => v.kind_name().to_string(),
    };
    err(format!("{}: expected a number, got {} ({})", name, describe(v), kind))
}

/// `atan` on numbers (for a tape's record of it).
/// `atan` of two numbers (or reals on a tape: recorded, with this as their computation).
fn atan(m: &mut Machine, a: &[Value]) -> Result<Value> {
    if tape::any_active(a) {
        return tape::record(m, Formula::Atan, a, &atan);
    }
    real_arg("atan", &a[0])?;
    real_arg("atan", &a[1])?;
    Ok(Value::Real(num::atan2(&a[0], &a[1]).unwrap_or(f64::NAN)))
}

fn cmp(name: &str, a: &[Value], f: fn(Ordering) -> bool) -> Result<Value> {
    match num::compare(&a[0], &a[1]) {
        Some(o) => Ok(Value::Bool(o.map(f).unwrap_or(false))),
        // (a real on a tape compares by its value)
        None if tape::any_active(a) => {
            cmp(name, &[tape::strip(&a[0]).into_owned(), tape::strip(&a[1]).into_owned()], f)
        }
        None => Err(not_two_numbers(name, a)),
    }
}

fn sign(name: &str, v: &Value, f: fn(Ordering) -> bool) -> Result<Value> {
    match num::sign(&tape::strip(v)) {
        Some(o) => Ok(Value::Bool(o.map(f).unwrap_or(false))),
        None => Err(not_one_number(name, v)),
    }
}

/// Destructures one argument value into `arity` arguments (a tuple built by `*j-inverse`
/// or `primal` in a rule may be lazy past its first pair: it is forced as it is walked).
pub fn spread(
    m: &mut Machine,
    id: PrimId,
    arg: Value,
    out: &mut smallvec::SmallVec<[Value; 4]>,
) -> Result<()> {
    let def = prim(id);
    match def.arity {
        // (no arguments: the empty tuple, `()`, as `(read-real)` passes it)
        0 => match if let Value::Lazy(_) = arg { ops::hnf(m, &arg)? } else { arg } {
            Value::Nil => Ok(()),
            other => {
                // (a pair is also what more than one argument make)
                let kind = match &other {
                    Value::Pair(_) => "a pair, which is also what more than one argument make".to_string(),
                    _ => other.kind_name().to_string(),
                };
                Err(err(format!(
                    "{}: expected no arguments (the empty list), got {} ({kind}): `{}` takes none",
                    def.name,
                    describe(&other),
                    def.name
                )))
            }
        },
        1 => {
            out.push(arg);
            Ok(())
        }
        n => {
            let mut cur = arg;
            for _ in 0..n - 1 {
                if let Value::Lazy(_) = cur {
                    cur = ops::hnf(m, &cur)?;
                }
                match cur {
                    Value::Pair(p) => {
                        out.push(p.car.clone());
                        cur = p.cdr.clone();
                    }
                    other => {
                        // One argument that is not a tuple, or a tuple of too few.
                        let got = if out.is_empty() {
                            format!("one: {} ({})", describe(&other), other.kind_name())
                        } else {
                            (out.len() + 1).to_string()
                        };
                        return Err(err(format!("{}: expected {} arguments, got {}", def.name, n, got)));
                    }
                }
            }
            out.push(cur);
            Ok(())
        }
    }
}

/// How many elements a list walk takes between checks of the limits (its
/// function may be a primitive, whose calls do not check them).
const WALK_CHECK_EVERY: usize = 4096;

/// Walks list `l` (for the walk `name`), giving `each` its elements in order
/// as it goes (so a function with an effect has run on the elements before
/// an improper tail, as the prelude's recursion did); an error naming the walk
/// for anything but a proper list.
fn walk(
    m: &mut Machine,
    name: &str,
    l: &Value,
    mut each: impl FnMut(&mut Machine, &Value) -> Result<()>,
) -> Result<()> {
    let whole = l;
    let mut l = l;
    let mut n = 0usize;
    // (the rest of the list, built, once a lazy tail was met)
    let mut built;
    loop {
        match l {
            Value::Pair(p) => {
                each(m, &p.car)?;
                l = &p.cdr;
                n += 1;
                if n.is_multiple_of(WALK_CHECK_EVERY) {
                    m.check_limits()?;
                }
            }
            Value::Nil => return Ok(()),
            // (a list whose tail is a lazy value, as the transforms' zeros leave
            // (`vjp`'s result where the tape gave way): the rest built, then
            // walked on, without another lazy value in it)
            Value::Lazy(z) if z.pair => {
                built = build_rest(m, l)?;
                l = &built;
            }
            other => return Err(not_a_list(name, whole, other, n)),
        }
    }
}

/// [`walk`]'s lazy tail, built.
#[cold]
#[inline(never)]
fn build_rest(m: &mut Machine, l: &Value) -> Result<Value> {
    ops::force(m, l)
}

/// [`walk`]'s error for a list ending in `other`.
#[cold]
#[inline(never)]
fn not_a_list(name: &str, whole: &Value, other: &Value, n: usize) -> Error {
    if n == 0 {
        return err(format!("{name}: expected a list, got {} ({})", describe(other), other.kind_name()));
    }
    err(format!(
        "{name}: expected a list, got {} (not a list: after {n} element{} it ends in {}, not ())",
        describe(whole),
        if n == 1 { "" } else { "s" },
        describe(other)
    ))
}

/// `f` called with `args` (pushed as a call's arguments are).
fn call_with(m: &mut Machine, f: &Value, args: &[Value]) -> Result<Value> {
    m.call_on(f, args)
}

/// `(%list-error k x)`: the error of list walk `LIST_WALKS[k]`'s definition
/// where its list ends in `x` (for `map2`, `(cons m1 m2)`: the two lists
/// where one of them ended), seen through AD tags, as it was before the
/// transform.
fn list_error(m: &mut Machine, a: &[Value]) -> Result<Value> {
    // (a constant of transformed code: seen through its tags)
    let (name, whole) = match &*ops::strip(&a[0]) {
        Value::Int(k @ 0..=9) => (LIST_WALKS.get(*k as usize % 5).copied(), *k >= 5),
        _ => (None, false),
    };
    let Some(name) = name else { return Err(err("%list-error: not a list walk's error".into())) };
    // (what a list ends in, a leaf, or for `map2` a pair of the two lists'
    // rests, as transformed code holds them: seen through tags and laziness)
    let seen = |m: &mut Machine, v: &Value| Ok::<_, Error>(ops::strip(&ops::hnf(m, v)?).into_owned());
    let x = seen(m, &a[1])?;
    let ends = |which: &str, v: &Value| {
        err(format!(
            "{name}: expected a list, but {which} ends in {} ({}), not ()",
            describe(v),
            v.kind_name()
        ))
    };
    // (the whole argument: as the primitive says it, `not_a_list`)
    let got = |v: &Value| not_a_list(name, v, v, 0);
    Err(match (name, &x) {
        ("map2", Value::Pair(p)) => match (seen(m, &p.car)?, seen(m, &p.cdr)?) {
            (Value::Pair(_), Value::Nil) => err("map2: the second list is shorter than the first".into()),
            (Value::Pair(_), l2) if whole => got(&l2),
            (Value::Pair(_), l2) => ends("the second list", &l2),
            (l1, _) if whole => got(&l1),
            (l1, _) => ends("the first list", &l1),
        },
        _ if whole => got(&x),
        _ => ends("it", &x),
    })
}

/// `(length l)` called directly (a primitive so that what is not a list is
/// named: the prelude's loop failed in its `cdr`, inside `length`).
fn length_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    // (a lazy tail, as a transformed list is (`length`'s versions apply it to
    // one: `Rule::Predicate`), is taken one pair at a time: its head normal
    // form, which it keeps, so that counting it again builds nothing)
    match walk_to(m, "length", &a[0], u64::MAX, |_, _| Ok(()))? {
        Err(n) => Ok(Value::Int(n as i64)),
        Ok(_) => Err(err("length: the list is too long to count".into())),
    }
}

/// `(list-ref l i)` called directly: an index that is not a whole number
/// from 0, or past the list's end, is named (the prelude's loop failed in its
/// `cdr`). The index may be inexact (`2.0`) or a real being differentiated,
/// as `=` and `-` took it there.
fn list_ref_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let i = list_index("list-ref", &a[1])?;
    match walk_to(m, "list-ref", &a[0], i, |_, _| Ok(()))? {
        Ok(p) => Ok(p.car.clone()),
        Err(len) => Err(past_the_end("list-ref", &a[1], len)),
    }
}

/// The index argument `i` of `list-ref` (or `%one-hot`, as `who`).
fn list_index(who: &str, i: &Value) -> Result<u64> {
    let bad =
        |why: &str| err(format!("{who}: the index must be {why}, got {} ({})", describe(i), i.kind_name()));
    Ok(match &*tape::strip(i) {
        Value::Int(i) if *i >= 0 => *i as u64,
        Value::Real(x) if *x >= 0.0 && x.fract() == 0.0 && *x < 2f64.powi(63) => *x as u64,
        Value::Big(b) if b.sign() == num_bigint::Sign::Plus => u64::MAX,
        v if v.is_number() => return Err(bad("a whole number from 0")),
        _ => return Err(bad("a number")),
    })
}

#[cold]
fn past_the_end(who: &str, i: &Value, len: u64) -> Error {
    err(format!(
        "{who}: index {} is past the end of a list of {len} element{}",
        describe(i),
        if len == 1 { "" } else { "s" }
    ))
}

/// Walks list `l` to its pair `i` (counting from 0), calling `each` on the
/// elements before it; gives that pair, or the list's length where it is
/// shorter. A lazy tail, as a transformed list is, is taken one pair at a
/// time through its head normal form (the rest of it is not built).
fn walk_to(
    m: &mut Machine,
    who: &str,
    l: &Value,
    i: u64,
    mut each: impl FnMut(&mut Machine, &Value) -> Result<()>,
) -> Result<std::result::Result<Rc<crate::value::Pair>, u64>> {
    let (mut at, mut k) = (l, 0u64);
    let mut here;
    loop {
        match at {
            Value::Pair(p) if k == i => return Ok(Ok(p.clone())),
            Value::Pair(p) => {
                each(m, &p.car)?;
                at = &p.cdr;
                k += 1;
                if k.is_multiple_of(WALK_CHECK_EVERY as u64) {
                    m.check_limits()?;
                }
            }
            Value::Nil => return Ok(Err(k)),
            Value::Lazy(_) => {
                here = ops::hnf(m, at)?;
                at = &here;
            }
            other => return Err(not_a_list(who, &ops::force(m, l)?, other, k as usize)),
        }
    }
}

/// `(%one-hot l i v)`: the zero of list `l` (each element's zero, lazy where
/// it is an aggregate) up to element `i`, which is `v`, and after it the
/// zero of the rest, lazily. `list-ref`'s cotangent.
fn one_hot(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let i = list_index("%one-hot", &a[1])?;
    let mut zeros = Vec::new();
    let p = match walk_to(m, "%one-hot", &a[0], i, |m, x| {
        zeros.push(ops::lazy_zero(m, x)?);
        Ok(())
    })? {
        Ok(p) => p,
        Err(len) => return Err(past_the_end("%one-hot", &a[1], len)),
    };
    let mut out = Value::cons(a[2].clone(), ops::lazy_zero(m, &p.cdr)?);
    for z in zeros.into_iter().rev() {
        out = Value::cons(z, out);
    }
    Ok(out)
}

/// `(append a b)` called directly: what is not a list in `a` is named.
fn append_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let mut out = ListBuilder::new();
    walk(m, "append", &a[0], |_, x| {
        out.push(x.clone());
        Ok(())
    })?;
    Ok(out.finish(a[1].clone()))
}

/// `(map f l)` called directly: f on every element, first to last.
fn map_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let mut out = ListBuilder::new();
    walk(m, "map", &a[1], |m, x| {
        out.push(call_with(m, &a[0], std::slice::from_ref(x))?);
        Ok(())
    })?;
    Ok(out.finish(Value::Nil))
}

/// Arithmetic primitive `op` (`+ - * /` passed as a procedure: see
/// `arith_op`) on `x` and `y` as a call of it in a procedure's body computes
/// it (where nothing is metered): by the inline arithmetic of numbers or of a
/// level's reals (`tape::level_arith2`) where either applies, a real on a level
/// straight to the tape's `record` (as the primitive does); `None` otherwise
/// (the caller calls the primitive).
#[inline(always)]
fn arith2(m: &mut Machine, op: Option<(Op2, PrimId)>, x: &Value, y: &Value) -> Option<Result<Value>> {
    let (op, p) = op?;
    arith2_of(m, op, p, x, y)
}

/// [`arith2`] of primitive `p`, of operation `op`.
fn arith2_of(m: &mut Machine, op: Op2, p: PrimId, x: &Value, y: &Value) -> Option<Result<Value>> {
    if m.meter.is_some() || m.meter_derivative.is_some() {
        return None;
    }
    if let Some(v) = crate::eval::inline_arith(op, x, y) {
        return Some(Ok(v));
    }
    arith2_active(m, op, p, x, y)
}

/// [`arith2_of`] past the inline arithmetic of numbers (which does not apply),
/// where nothing is metered: a level's reals. (Apart so that
/// `Machine::call_arith_body` runs its own inline arithmetic first: calling
/// `arith2_of` from there instead was 3.6% slower on the FF particle solve.)
pub(crate) fn arith2_active(
    m: &mut Machine,
    op: Op2,
    p: PrimId,
    x: &Value,
    y: &Value,
) -> Option<Result<Value>> {
    if !(x.is_active() || y.is_active()) {
        return None;
    }
    if let Some(v) = tape::level_arith2(&mut m.tape, op, x, y) {
        return Some(Ok(v));
    }
    // (a lazy operand is built by the primitive's call first)
    if matches!(x, Value::Lazy(_)) || matches!(y, Value::Lazy(_)) {
        return None;
    }
    let f = tape::scalar_formula(p)?;
    Some(tape::record(m, f, &[x.clone(), y.clone()], &prim(p).imp))
}

/// `f` (the procedure `fv`) on `x` and `y`, where `op` is `f`'s operation if
/// it is an arithmetic primitive (see `arith2`).
fn call_with2(m: &mut Machine, fv: &Value, op: Option<(Op2, PrimId)>, x: &Value, y: &Value) -> Result<Value> {
    match arith2(m, op, x, y) {
        Some(v) => v,
        None => call_with(m, fv, &[x.clone(), y.clone()]),
    }
}

/// The operation of `f` if it is an arithmetic primitive, `+ - * /` (see `arith2`).
fn arith_op(f: &Value) -> Option<(Op2, PrimId)> {
    let Value::Prim(p) = f else { return None };
    let op = match tape::scalar_formula(*p)? {
        Formula::Add => Op2::Add,
        Formula::Sub => Op2::Sub,
        Formula::Mul => Op2::Mul,
        Formula::Div => Op2::Div,
        _ => return None,
    };
    Some((op, *p))
}

/// Does list `l`'s spine end in, or pass through, a lazy value?
#[inline(always)]
fn lazy_spine(mut l: &Value) -> bool {
    loop {
        match l {
            Value::Pair(p) => l = &p.cdr,
            Value::Lazy(_) => return true,
            _ => return false,
        }
    }
}

/// `(map2 f l1 l2)` called directly: f on corresponding elements, as many as `l1` has.
fn map2_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let op = arith_op(&a[0]);
    // (numbers first: a list of a level's reals goes the other way at once)
    let numbers = |l: &Value| matches!(l, Value::Pair(p) if matches!(p.car, Value::Real(_) | Value::Int(_)));
    if let Some((op, _)) = op {
        if numbers(&a[1]) && numbers(&a[2]) && m.meter.is_none() && m.meter_derivative.is_none() {
            if let Some(v) = map2_numbers(m, op, &a[1], &a[2])? {
                return Ok(v);
            }
        }
    }
    let mut out = ListBuilder::new();
    // (built where its spine holds a lazy value, as `walk` builds the first list's)
    let built;
    let mut l2 = &a[2];
    if lazy_spine(l2) {
        built = ops::force(m, l2)?;
        l2 = &built;
    }
    let mut n2 = 0;
    walk(m, "map2", &a[1], |m, x| {
        let p = match l2 {
            Value::Pair(p) => p,
            Value::Nil => return Err(err("map2: the second list is shorter than the first".into())),
            other => return Err(not_a_list("map2", &a[2], other, n2)),
        };
        out.push(call_with2(m, &a[0], op, x, &p.car)?);
        l2 = &p.cdr;
        n2 += 1;
        Ok(())
    })?;
    Ok(out.finish(Value::Nil))
}

/// [`map2_native`]'s commonest case in one loop: arithmetic primitive `op` on
/// two proper lists of one length whose elements the inline arithmetic of
/// numbers takes (`eval::inline_arith`, as `arith2` tries it first), nothing
/// metered; `None` (the walk to be made as for any other) where that does not
/// hold, found before or during the loop (what it built is dropped: the
/// arithmetic has no effects).
fn map2_numbers(m: &mut Machine, op: Op2, l1: &Value, l2: &Value) -> Result<Option<Value>> {
    let mut out = ListBuilder::new();
    let (mut x, mut y) = (l1, l2);
    let mut n = 0usize;
    loop {
        match (x, y) {
            (Value::Pair(p), Value::Pair(q)) => {
                let Some(v) = crate::eval::inline_arith(op, &p.car, &q.car) else { return Ok(None) };
                out.push(v);
                (x, y) = (&p.cdr, &q.cdr);
                n += 1;
                if n.is_multiple_of(WALK_CHECK_EVERY) {
                    m.check_limits()?;
                }
            }
            (Value::Nil, Value::Nil) => return Ok(Some(out.finish(Value::Nil))),
            _ => return Ok(None),
        }
    }
}

/// `(fold-left f acc l)` called directly.
fn fold_left_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let mut acc = a[1].clone();
    let Some((op, p)) = arith_op(&a[0]) else {
        walk(m, "fold-left", &a[2], |m, x| {
            acc = call_with(m, &a[0], &[std::mem::replace(&mut acc, Value::Nil), x.clone()])?;
            Ok(())
        })?;
        return Ok(acc);
    };
    walk(m, "fold-left", &a[2], |m, x| {
        acc = match arith2_of(m, op, p, &acc, x) {
            Some(v) => v?,
            None => call_with(m, &a[0], &[std::mem::replace(&mut acc, Value::Nil), x.clone()])?,
        };
        Ok(())
    })?;
    Ok(acc)
}

/// `(reduce f i l)` called directly: the last element's application first
/// (after the whole list is walked, as the prelude's recursion did).
fn reduce_native(m: &mut Machine, a: &[Value]) -> Result<Value> {
    // (the short lists of the common case, such as a point's coordinates, held
    // without an allocation)
    let mut xs: smallvec::SmallVec<[Value; 8]> = smallvec::SmallVec::new();
    walk(m, "reduce", &a[2], |_, x| {
        xs.push(x.clone());
        Ok(())
    })?;
    let op = arith_op(&a[0]);
    let mut acc = a[1].clone();
    for (n, x) in xs.into_iter().rev().enumerate() {
        if n > 0 && n.is_multiple_of(WALK_CHECK_EVERY) {
            m.check_limits()?;
        }
        acc = match arith2(m, op, &x, &acc) {
            Some(v) => v?,
            None => call_with(m, &a[0], &[x, acc])?,
        };
    }
    Ok(acc)
}
