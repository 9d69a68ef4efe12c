//! Unit tests of the expander: each syntactic form's core expansion (written
//! out by hand from LANGUAGE.md) and the messages and locations of bad syntax.

use super::*;
use crate::source::SourceMap;

/// Prints core as an S-expression. Hidden temporaries (names starting with a
/// space) print as `%name`; constants `()` and pairs print quoted.
fn show(c: &Core) -> String {
    match c {
        Core::Const(v, _) => show_const(&v.0),
        Core::Var(n, _) => name(n),
        Core::Lambda(l) => show_lambda(l),
        Core::App(f, args, _) => {
            let mut parts = vec![show(f)];
            parts.extend(args.iter().map(show));
            format!("({})", parts.join(" "))
        }
        Core::Letrec(defs, body, _) => {
            let ds: Vec<String> =
                defs.iter().map(|(n, _, l)| format!("({} {})", name(n), show_lambda(l))).collect();
            format!("(letrec ({}) {})", ds.join(" "), show(body))
        }
        Core::Let(p, e, b, _) => format!("(let ({} {}) {})", show_pat(p), show(e), show(b)),
        Core::If(c, t, e, _) => format!("(if {} {} {})", show(c), show(t), show(e)),
        Core::Cons(a, d, _) => format!("(cons {} {})", show(a), show(d)),
    }
}

fn name(n: &str) -> String {
    match n.strip_prefix(' ') {
        Some(rest) => format!("%{rest}"),
        None => n.to_string(),
    }
}

fn show_const(v: &DatumKindValue) -> String {
    let s = crate::print::to_string(&v.to_value());
    match v {
        DatumKindValue::Nil | DatumKindValue::Pair(..) => format!("'{s}"),
        _ => s,
    }
}

fn show_lambda(l: &CoreLambda) -> String {
    format!("(lambda {} {})", show_pat(&l.param), show(&l.body))
}

fn show_pat(p: &Pat) -> String {
    match p {
        Pat::Var(n, _) => name(n),
        Pat::Const(v, _) => show_const(&v.0),
        Pat::Cons(a, d, _) => format!("(cons {} {})", show_pat(a), show_pat(d)),
    }
}

fn read1(src: &str) -> Datum {
    let mut ds = crate::reader::read_all(src, 0).unwrap_or_else(|e| panic!("read {src:?}: {e}"));
    assert_eq!(ds.len(), 1, "{src:?}");
    ds.pop().unwrap()
}

fn ex(src: &str) -> String {
    match expand(&read1(src)) {
        Ok(c) => show(&c),
        Err(e) => panic!("expanding {src:?} failed: {}", e.message),
    }
}

/// Expands a bad expression; returns `LINE:COL: message`.
fn bad_syntax(src: &str) -> String {
    let mut sm = SourceMap::new();
    let f = sm.add("t", src);
    let d = crate::reader::read_all(src, f).unwrap().pop().unwrap();
    match expand(&d) {
        Ok(c) => panic!("{src:?} should be rejected, expanded to {}", show(&c)),
        Err(e) => {
            assert_eq!(e.kind, crate::error::ErrorKind::Syntax);
            let loc = sm.location(e.span.expect("syntax errors have a location"));
            format!("{}: {}", loc.trim_start_matches("t:"), e.message)
        }
    }
}

#[test]
fn constants_and_variables() {
    assert_eq!(ex("42"), "42");
    assert_eq!(ex("-1.5"), "-1.5");
    assert_eq!(ex("#t"), "#t");
    assert_eq!(ex("#f"), "#f");
    assert_eq!(ex("123456789012345678901234567890"), "123456789012345678901234567890");
    assert_eq!(ex("x"), "x");
    assert_eq!(ex("car"), "car");
}

#[test]
fn quote() {
    assert_eq!(ex("'()"), "'()");
    assert_eq!(ex("(quote ())"), "'()");
    assert_eq!(ex("'5"), "5");
    assert_eq!(ex("'#f"), "#f");
    assert_eq!(ex("'(1 #t . 2.5)"), "'(1 #t . 2.5)");
    assert_eq!(ex("'(1 (2 3) ())"), "'(1 (2 3) ())");
}

#[test]
fn lambda_parameter_conventions() {
    // 0 parameters: the argument must be '()
    assert_eq!(ex("(lambda () 1)"), "(lambda '() 1)");
    // 1 parameter: as is
    assert_eq!(ex("(lambda (x) x)"), "(lambda x x)");
    // n parameters: the right-nested tuple (cons* p1 ... pn)
    assert_eq!(ex("(lambda (a b) a)"), "(lambda (cons a b) a)");
    assert_eq!(ex("(lambda (a b c) c)"), "(lambda (cons a (cons b c)) c)");
}

#[test]
fn application_keeps_its_arguments() {
    // the tuple convention for arguments is applied when converting to A-normal form
    assert_eq!(ex("(f)"), "(f)");
    assert_eq!(ex("(f 1)"), "(f 1)");
    assert_eq!(ex("(f 1 2 3)"), "(f 1 2 3)");
    assert_eq!(ex("((g 1) (h))"), "((g 1) (h))");
}

#[test]
fn patterns() {
    assert_eq!(ex("(lambda ((cons a b)) a)"), "(lambda (cons a b) a)");
    assert_eq!(ex("(lambda ((cons* a b c)) a)"), "(lambda (cons a (cons b c)) a)");
    assert_eq!(ex("(lambda ((cons* a)) a)"), "(lambda a a)");
    assert_eq!(ex("(lambda ((cons*)) 1)"), "(lambda '() 1)");
    assert_eq!(ex("(lambda ((list a b)) a)"), "(lambda (cons a (cons b '())) a)");
    assert_eq!(ex("(lambda ((list)) 1)"), "(lambda '() 1)");
    assert_eq!(ex("(lambda (() x) x)"), "(lambda (cons '() x) x)");
    assert_eq!(ex("(lambda (0 x) x)"), "(lambda (cons 0 x) x)");
    assert_eq!(ex("(lambda (#t 2.5 x) x)"), "(lambda (cons #t (cons 2.5 x)) x)");
    assert_eq!(ex("(lambda ('(1 2) x) x)"), "(lambda (cons '(1 2) x) x)");
    assert_eq!(
        ex("(lambda ((list a (cons b (list c d)))) a)"),
        "(lambda (cons a (cons (cons b (cons c (cons d '()))) '())) a)"
    );
}

#[test]
fn let_forms() {
    assert_eq!(ex("(let ((x 1)) x)"), "(let (x 1) x)");
    assert_eq!(ex("(let (((cons a b) p)) a)"), "(let ((cons a b) p) a)");
    // parallel: every init is evaluated before any pattern binds
    assert_eq!(
        ex("(let ((x y) (y x)) (f x y))"),
        "(let (%let0 y) (let (%let1 x) (let (x %let0) (let (y %let1) (f x y)))))"
    );
    assert_eq!(ex("(let () 5)"), "5");
    // sequential
    assert_eq!(ex("(let* ((x 1) (y x)) y)"), "(let (x 1) (let (y x) y))");
    assert_eq!(ex("(let* () 5)"), "5");
    assert_eq!(ex("(let* (((list a) l) (a (+ a 1))) a)"), "(let ((cons a '()) l) (let (a (+ a 1)) a))");
}

#[test]
fn named_let_is_a_letrec_applied_to_the_inits() {
    assert_eq!(
        ex("(let loop ((i 0) (acc 1)) (loop i acc))"),
        "((letrec ((loop (lambda (cons i acc) (loop i acc)))) loop) 0 1)"
    );
    assert_eq!(ex("(let loop ((i 0)) i)"), "((letrec ((loop (lambda i i))) loop) 0)");
    assert_eq!(ex("(let loop () 1)"), "((letrec ((loop (lambda '() 1))) loop))");
}

#[test]
fn letrec() {
    assert_eq!(
        ex("(letrec ((f (lambda (n) (g n))) (g (lambda (n) n))) (f 1))"),
        "(letrec ((f (lambda n (g n))) (g (lambda n n))) (f 1))"
    );
}

#[test]
fn if_cond_and_or() {
    assert_eq!(ex("(if a b c)"), "(if a b c)");
    assert_eq!(ex("(cond (else 1))"), "1");
    assert_eq!(ex("(cond (a 1) (b 2) (else 3))"), "(if a 1 (if b 2 3))");
    // a clause without an expression yields its test's value
    assert_eq!(ex("(cond (a) (else 3))"), "(let (%or a) (if %or %or 3))");
    // `(test => receiver)` applies the receiver to the test's value
    assert_eq!(ex("(cond (a => f) (else 3))"), "(let (%cond a) (if %cond (f %cond) 3))");
    assert_eq!(ex("(and)"), "#t");
    assert_eq!(ex("(and a)"), "a");
    assert_eq!(ex("(and a b c)"), "(if a (if b c #f) #f)");
    assert_eq!(ex("(or)"), "#f");
    assert_eq!(ex("(or a)"), "a");
    assert_eq!(ex("(or a b)"), "(let (%or a) (if %or %or b))");
    assert_eq!(ex("(or a b c)"), "(let (%or a) (if %or %or (let (%or b) (if %or %or c))))");
}

#[test]
fn cons_cons_star_and_list_are_syntax() {
    assert_eq!(ex("(cons 1 2)"), "(cons 1 2)");
    assert_eq!(ex("(cons*)"), "'()");
    assert_eq!(ex("(cons* a)"), "a");
    assert_eq!(ex("(cons* 1 2 3)"), "(cons 1 (cons 2 3))");
    assert_eq!(ex("(list)"), "'()");
    assert_eq!(ex("(list 1 2)"), "(cons 1 (cons 2 '()))");
}

#[test]
fn bad_syntax_is_reported_with_its_location() {
    let cases = [
        ("(lambda (x))", "1:1: `lambda` needs a parameter list and a body"),
        ("(lambda (x) 1 2)", "1:1: a VLAD `lambda` has exactly one body expression"),
        ("(lambda x x)", "1:9: expected a parameter list `(p ...)`"),
        ("(lambda (x x) x)", "1:12: variable `x` is bound twice"),
        ("(lambda ((cons a a)) a)", "1:18: variable `a` is bound twice"),
        ("(lambda (lambda) 1)", "1:10: `lambda` is syntax and cannot be bound"),
        ("(lambda ((cons a)) a)", "1:10: a `cons` pattern has two parts"),
        (
            "(lambda ((foo a)) a)",
            "1:10: bad pattern: expected a variable, a constant, or (cons ...), (cons* ...), (list ...)",
        ),
        ("(lambda (\"s\") 1)", "1:10: bad pattern"),
        ("(if 1 2)", "1:1: `if` needs a test, a consequent and an alternative"),
        ("(if 1 2 3 4)", "1:1: `if` needs a test, a consequent and an alternative"),
        ("(let ((x)) x)", "1:7: a binding is `(pattern expression)`"),
        ("(let x)", "1:1: `let` needs bindings and exactly one body expression"),
        ("(let ((x 1)) x x)", "1:1: `let` needs bindings and exactly one body expression"),
        ("(let ((x 1) (x 2)) x)", "1:14: variable `x` is bound twice"),
        ("(let loop ((i 0) (i 1)) i)", "1:19: variable `i` is bound twice"),
        ("(let (if 1) if)", "1:7: a binding is `(pattern expression)`"),
        ("(let 5 x)", "1:6: expected a list of bindings `((p e) ...)`"),
        ("(let* ((x 1)) 1 2)", "1:1: `let*` needs bindings and exactly one body expression"),
        ("(letrec ((f 1)) f)", "1:13: `letrec` binds lambda expressions only"),
        ("(letrec (((cons f g) (lambda () 1))) f)", "1:11: `letrec` binds variables only"),
        ("(letrec ((f (lambda () 1)) (f (lambda () 2))) f)", "1:29: `f` is bound twice in this `letrec`"),
        ("(cond)", "1:1: `cond` needs a final `else` clause"),
        ("(cond (1 2))", "1:1: `cond` needs a final `else` clause"),
        ("(cond (else 1) (#t 2))", "1:7: `else` must be the last `cond` clause"),
        ("(cond (else))", "1:7: `else` takes exactly one expression"),
        (
            "(cond (1 2 3) (else 4))",
            "1:7: a `cond` clause has exactly one expression after its test (or `=> receiver`)",
        ),
        (
            "(cond (1 => f g) (else 4))",
            "1:7: a `cond` clause has exactly one expression after its test (or `=> receiver`)",
        ),
        ("(cond (1 =>) (else 4))", "1:7: a `cond` clause `(test => receiver)` needs a receiver after `=>`"),
        ("(cond 5 (else 4))", "1:7: a `cond` clause is `(test expression)`"),
        ("(quote)", "1:1: `quote` takes one datum"),
        ("(quote 1 2)", "1:1: `quote` takes one datum"),
        ("(quote a)", "1:8: symbols are not VLAD data: `a` cannot be quoted"),
        // the first bad element is named
        ("'(1 a b)", "1:5: symbols are not VLAD data: `a` cannot be quoted"),
        ("'(1 . a)", "1:7: symbols are not VLAD data: `a` cannot be quoted"),
        ("'\"s\"", "1:2: strings are not VLAD data"),
        (
            "\"str\"",
            "1:1: a string is not a VLAD expression (a string may only be the message of \
             `(error \"...\" x ...)`, the label of `(write \"...\" x)` or `(write-real \"...\" x)`, \
             or the file of `(include \"...\")`)",
        ),
        // (a label goes first: `write-real`'s value is the real)
        (
            "(write-real 1.0 \"x:\")",
            "1:17: a string is not a VLAD expression (a string may only be the message of \
             `(error \"...\" x ...)`, the label of `(write \"...\" x)` or `(write-real \"...\" x)`, \
             or the file of `(include \"...\")`)",
        ),
        (
            "(write-real \"x:\")",
            "1:1: `write-real` with a label prints a real after it: `(write-real \"x:\" x)`",
        ),
        ("(f . x)", "1:1: a dotted list is not an expression"),
        ("(cons 1)", "1:1: `cons` takes exactly two expressions"),
        ("(cons 1 2 3)", "1:1: `cons` takes exactly two expressions"),
        ("(+ 1 (define x 1))", "1:6: `define` is allowed only at top level"),
        ("(f (include \"x\"))", "1:4: `include` is allowed only at top level"),
        ("(else)", "1:1: `else` outside `cond`"),
        ("else", "1:1: `else` is syntax and cannot be used as a variable"),
        ("(f lambda)", "1:4: `lambda` is syntax and cannot be used as a variable"),
        // errors inside nested forms point at the nested form, on its own line
        ("(lambda (x)\n  (if x\n      (let ((y)) y)\n      2))", "3:13: a binding is `(pattern expression)`"),
    ];
    for (src, expected) in cases {
        assert_eq!(bad_syntax(src), expected, "for {src:?}");
    }
}

#[test]
fn unquoted_empty_list_is_the_empty_list() {
    // STALINGRAD accepts `()` unquoted.
    assert_eq!(ex("()"), ex("'()"));
}
