//! Unit tests of the A-normal form conversion: alpha renaming, scoping,
//! closure groups and their captured-variable order.

use super::*;
use crate::expand::expand;

/// Top-level names: the primitives only.
pub(crate) struct PrimsOnly;

impl GlobalScope for PrimsOnly {
    fn lookup(&self, name: &str) -> Option<Atom> {
        crate::prims::lookup(name).map(|p| Atom::Const(Value::Prim(p)))
    }
}

/// Converts a `(lambda ...)` expression.
pub(crate) fn normalize(src: &str) -> Result<Rc<Group>> {
    let d = crate::reader::read_all(src, 0).unwrap().pop().unwrap();
    match &expand(&d)? {
        Core::Lambda(l) => Normalizer::new(&PrimsOnly).lambda(l),
        _ => panic!("{src} is not a lambda"),
    }
}

pub(crate) fn norm(src: &str) -> Rc<Group> {
    normalize(src).unwrap_or_else(|e| panic!("{src}: {}", e.message))
}

fn members(g: &Group) -> &[Lambda] {
    g.members.get().expect("source groups have their members")
}

fn binders_group(g: &Group, out: &mut Vec<VarId>) {
    out.extend(&g.names);
    for m in members(g) {
        out.push(m.param);
        binders_block(&m.body, out);
    }
}

fn binders_block(b: &Block, out: &mut Vec<VarId>) {
    for bind in &b.binds {
        match bind {
            Bind::Let(x, e) => {
                out.push(*x);
                match e {
                    Expr::Lambda(g) => binders_group(g, out),
                    Expr::If(_, t, f) => {
                        binders_block(t, out);
                        binders_block(f, out);
                    }
                    _ => {}
                }
            }
            Bind::Uncons(x, y, _, _) => out.extend([*x, *y]),
            Bind::Check(..) => {}
            Bind::Letrec(names, g) => {
                assert_eq!(names, &g.names);
                binders_group(g, out);
            }
            Bind::EnvSens(xs, _) => out.extend(xs),
        }
    }
}

/// Asserts every variable is used inside the scope of its binder, and a
/// group's captured variables are in scope where the group is created.
fn check_scopes_group(g: &Group, scope: &[VarId]) {
    for v in &g.free {
        assert!(scope.contains(v), "captured {} is not in scope", var_name(*v));
    }
    for m in members(g) {
        let mut inner: Vec<VarId> = g.free.clone();
        inner.extend(&g.names);
        inner.push(m.param);
        check_scopes_block(&m.body, &mut inner);
    }
}

fn check_atom(a: &Atom, scope: &[VarId]) {
    if let Atom::Var(v) = a {
        assert!(scope.contains(v), "{} used out of scope", var_name(*v));
    }
}

fn check_scopes_block(b: &Block, scope: &mut Vec<VarId>) {
    let mark = scope.len();
    for bind in &b.binds {
        match bind {
            Bind::Let(x, e) => {
                match e {
                    Expr::Atom(a) => check_atom(a, scope),
                    Expr::App(f, args, _) => {
                        check_atom(f, scope);
                        args_atoms(args).for_each(|a| check_atom(a, scope));
                    }
                    Expr::Prim(_, args, _) => args_atoms(args).for_each(|a| check_atom(a, scope)),
                    Expr::Cons(a, d) => {
                        check_atom(a, scope);
                        check_atom(d, scope);
                    }
                    Expr::Lambda(g) => check_scopes_group(g, scope),
                    Expr::If(c, t, f) => {
                        check_atom(c, scope);
                        check_scopes_block(t, scope);
                        check_scopes_block(f, scope);
                    }
                    Expr::MakeEnvSens(..) | Expr::MakeEnvSensLike(..) => panic!("AD-only expression"),
                }
                scope.push(*x);
            }
            Bind::Uncons(x, y, a, _) => {
                check_atom(a, scope);
                scope.extend([*x, *y]);
            }
            Bind::Check(_, a, _) => check_atom(a, scope),
            Bind::Letrec(names, g) => {
                scope.extend(names);
                check_scopes_group(g, scope);
            }
            Bind::EnvSens(..) => panic!("AD-only binding"),
        }
    }
    check_atom(&b.result, scope);
    scope.truncate(mark);
}

fn args_atoms(a: &Args) -> Box<dyn Iterator<Item = &Atom> + '_> {
    match a {
        Args::One(x) => Box::new(std::iter::once(x)),
        Args::Tuple(xs) => Box::new(xs.iter()),
    }
}

/// Renumbers `name_ID` variables by first appearance, so printed ANF can be
/// compared independently of the session's variable counter; whitespace collapsed.
fn canonical(text: &str) -> String {
    let re = regex::Regex::new(r"([A-Za-z?*!<>=/+-]+)_(\d+)").unwrap();
    let mut ids: Vec<String> = Vec::new();
    let renamed = re.replace_all(text, |c: &regex::Captures| {
        let id = c[2].to_string();
        let k = ids.iter().position(|x| *x == id).unwrap_or_else(|| {
            ids.push(id);
            ids.len() - 1
        });
        format!("{}_{}", &c[1], k)
    });
    renamed.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn shown(src: &str) -> String {
    let g = norm(src);
    canonical(&crate::show::lambda_to_string(&members(&g)[0]))
}

#[test]
fn every_intermediate_value_is_named() {
    assert_eq!(
        shown("(lambda (x) (* x (+ x 1)))"),
        "(lambda (x_0) (let* ((t_1 (+ x_0 1)) (t_2 (* x_0 t_1))) t_2))"
    );
    // an n-ary call passes its arguments as a tuple of atoms; no call gets '()
    assert_eq!(
        shown("(lambda (f) (f (f) (f 1 2)))"),
        "(lambda (f_0) (let* ((t_1 (f_0 '())) (t_2 (f_0 1 2)) (t_3 (f_0 t_1 t_2))) t_3))"
    );
    assert_eq!(
        shown("(lambda (a b) (cons b a))"),
        "(lambda (arg_0) (let* (((cons a_1 b_2) arg_0) (p_3 (cons b_2 a_1))) p_3))"
    );
}

#[test]
fn alpha_renaming_gives_every_binder_a_fresh_name() {
    let src = "(lambda (x)
                 (let ((x (+ x 1)))
                   (let* ((x (* x 2)) ((cons x y) (cons x x)))
                     (let ((f (lambda (x) (letrec ((x (lambda (x) x))) (x y))))) (f x)))))";
    let g = norm(src);
    let mut binders = Vec::new();
    binders_group(&g, &mut binders);
    let mut sorted = binders.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), binders.len(), "a variable is bound twice");
    // Five of the seven source binders of x bind new variables: the parameter, the
    // pattern (cons x y), the inner lambda's parameter, the letrec name and its lambda's
    // parameter. The two `let` binders of x only name a call's result, which already
    // has its own variable.
    // (A lambda applied where it stands would be a `let`, hence the binding of f.)
    let xs = binders.iter().filter(|v| &*var_base_name(**v) == "x").count();
    assert_eq!(xs, 5);
    check_scopes_group(&g, &[]);
}

#[test]
fn shadowed_names_refer_to_the_innermost_binder() {
    // (let ((x (+ x 1))) (* x x)): `+` reads the parameter, `*` reads the new x
    let g = norm("(lambda (x) (let ((x (+ x 1))) (* x x)))");
    let m = &members(&g)[0];
    match &m.body.binds[..] {
        [Bind::Let(t, Expr::Prim(_, Args::Tuple(a1), _)), Bind::Let(r, Expr::Prim(_, Args::Tuple(a2), _))] => {
            assert!(matches!(a1[0], Atom::Var(p) if p == m.param));
            assert!(a2.iter().all(|a| matches!(a, Atom::Var(v) if v == t)));
            assert!(matches!(m.body.result, Atom::Var(v) if v == *r));
        }
        _ => panic!("unexpected shape: {}", crate::show::lambda_to_string(m)),
    }
    // a let-bound constant gets its own variable named after the source
    assert_eq!(
        shown("(lambda (x) (let ((x 5)) (+ x x)))"),
        "(lambda (x_0) (let* ((x_1 5) (t_2 (+ x_1 x_1))) t_2))"
    );
}

#[test]
fn nested_programs_are_well_scoped() {
    for src in [
        "(lambda (n) (let loop ((i 0) (acc 1)) (if (= i n) acc (loop (+ i 1) (* acc 2)))))",
        "(lambda (l) (cond ((null? l) 0) ((pair? l) (let (((cons a d) l)) a)) (else (or #f 1))))",
        "(lambda (k) (letrec ((ev (lambda (n) (if (= n 0) #t (od (- n 1))))) (od (lambda (n) (and (> n 0) (ev (- n k)))))) ev))",
        "(lambda ((list a (cons b c)) d) (lambda (e) (lambda () (list a b c d e))))",
    ] {
        let g = norm(src);
        check_scopes_group(&g, &[]);
        let mut b = Vec::new();
        binders_group(&g, &mut b);
        let n = b.len();
        b.sort_unstable();
        b.dedup();
        assert_eq!(b.len(), n, "{src}");
    }
}

/// The group of the first `Expr::Lambda` in a lambda's body.
fn inner_group(g: &Group) -> Rc<Group> {
    members(g)[0]
        .body
        .binds
        .iter()
        .find_map(|b| match b {
            Bind::Let(_, Expr::Lambda(g)) => Some(g.clone()),
            _ => None,
        })
        .expect("a nested lambda")
}

#[test]
fn closures_capture_their_free_variables_in_sorted_order() {
    let g = norm("(lambda (c) (lambda (a) (lambda (b) (+ c (+ b a)))))");
    assert!(g.free.is_empty());
    let g1 = inner_group(&g);
    let g2 = inner_group(&g1);
    let names = |g: &Group| g.free.iter().map(|v| var_base_name(*v).to_string()).collect::<Vec<_>>();
    assert_eq!(names(&g1), ["c"]);
    // c was bound before a, so it has the smaller id and comes first
    assert_eq!(names(&g2), ["c", "a"]);
    assert!(g2.free.windows(2).all(|w| w[0] < w[1]));
    // exactly the outer parameters, not the group's own parameter
    assert_eq!(g2.free, group_free_vars(&g2.names, members(&g2)));
    assert_eq!(g1.free[0], members(&g)[0].param);
    assert_eq!(g2.free[1], members(&g1)[0].param);
}

#[test]
fn letrec_members_form_one_group() {
    let g = norm("(lambda (k) (letrec ((ev (lambda (n) (od n))) (od (lambda (n) (+ n k)))) ev))");
    let m = &members(&g)[0];
    let (names, lg) = m
        .body
        .binds
        .iter()
        .find_map(|b| match b {
            Bind::Letrec(n, g) => Some((n.clone(), g.clone())),
            _ => None,
        })
        .expect("a letrec binding");
    assert_eq!(lg.len(), 2);
    assert_eq!(names.iter().map(|v| var_base_name(*v).to_string()).collect::<Vec<_>>(), ["ev", "od"]);
    assert_eq!(lg.member_names, [Some("ev".into()), Some("od".into())]);
    // the siblings are not captured; k is
    assert_eq!(lg.free, [m.param]);
    assert!(matches!(m.body.result, Atom::Var(v) if v == names[0]));
}

#[test]
fn primitives_are_called_directly_and_globals_are_atoms() {
    let g = norm("(lambda (x) (write (+ x 1)))");
    let m = &members(&g)[0];
    assert!(matches!(m.body.binds[0], Bind::Let(_, Expr::Prim(..))));
    assert!(matches!(m.body.binds[1], Bind::Let(_, Expr::Prim(..))));
    // `car` is not a primitive: the prelude defines it
    let e = normalize("(lambda (x) (car x))").err().expect("car is unbound without the prelude");
    assert_eq!(e.message, "unbound variable `car`");
}

#[test]
fn unbound_variables_are_reported_at_their_use() {
    let e = normalize("(lambda (x) (+ x y))").err().unwrap();
    assert_eq!(e.message, "unbound variable `y`");
    let sp = e.span.unwrap();
    assert_eq!((sp.start, sp.end), (17, 18));
    // a variable bound in a sibling scope is not visible
    let e = normalize("(lambda (x) (cons (let ((y 1)) y) y))").err().unwrap();
    assert_eq!(e.message, "unbound variable `y`");
    assert_eq!(e.span.unwrap().start, 34);
}

#[test]
fn a_lambda_applied_where_it_stands_is_a_let() {
    // No closure is made and nothing is called; a tuple parameter is taken
    // apart without building the tuple.
    let g = norm("(lambda (a) ((lambda ((cons x y) z) (+ x z)) a 2))");
    let m = &members(&g)[0];
    assert!(
        !m.body
            .binds
            .iter()
            .any(|b| matches!(b, Bind::Let(_, Expr::Lambda(_) | Expr::App(..) | Expr::Cons(..)))),
        "{}",
        crate::show::lambda_to_string(m)
    );
    assert!(m.body.binds.iter().any(|b| matches!(b, Bind::Uncons(..))));
}

fn count_uncons(b: &Block) -> usize {
    b.binds
        .iter()
        .map(|bind| match bind {
            Bind::Uncons(..) => 1,
            Bind::Let(_, Expr::If(_, t, f)) => count_uncons(t) + count_uncons(f),
            _ => 0,
        })
        .sum()
}

#[test]
fn a_variable_is_taken_apart_once_where_that_dominates() {
    // The second destructuring of `l` reuses the parts of the first (so the
    // reverse transform gives `l` one sensitivity, not a sum of two half-zero pairs).
    let g = norm("(lambda (l) (let (((cons a b) l)) (let (((cons c d) l)) (cons (+ a c) d))))");
    let m = &members(&g)[0];
    assert_eq!(count_uncons(&m.body), 1, "{}", crate::show::lambda_to_string(m));
    check_scopes_group(&g, &[]);
    // Not across branches: each branch that takes `l` apart has its own.
    let g = norm("(lambda (l) (if (null? l) (let (((cons a b) l)) a) (let (((cons c d) l)) c)))");
    assert_eq!(count_uncons(&members(&g)[0].body), 2);
    // Not after a branch that took it apart.
    let g = norm("(lambda (l) (cons (if (null? l) 0 (let (((cons a b) l)) a)) (let (((cons c d) l)) c)))");
    assert_eq!(count_uncons(&members(&g)[0].body), 2);
    check_scopes_group(&g, &[]);
    // Not into a nested lambda: it captures `l` itself and takes it apart.
    let g = norm("(lambda (l) (let (((cons a b) l)) (lambda (z) (let (((cons c d) l)) (+ a c)))))");
    let inner = inner_group(&g);
    assert!(inner.free.iter().any(|v| var_base_name(*v).as_ref() == "l"));
    assert_eq!(count_uncons(&members(&inner)[0].body), 1);
    check_scopes_group(&g, &[]);
}
