//! The hint after "unbound variable `x`": what VLAD has in place of a Scheme
//! form it lacks (`set!`, `begin`, quasiquote...), or the bound name nearest
//! to a misspelt one.

/// Scheme's names that VLAD does not have (LANGUAGE.md: no mutation, no
/// continuations, no macros, no Scheme vectors...), and what to use instead.
const SCHEME_ONLY: &[(&[&str], &str)] = &[
    (
        &["set!", "set-car!", "set-cdr!", "vector-set!", "string-set!"],
        "VLAD has no mutation: bind the new value with `let`",
    ),
    (&["begin"], "a body is one expression: sequence effects with `let*`"),
    (
        &["quasiquote", "unquote", "unquote-splicing"],
        "VLAD has no quasiquote: build the list with `list`, `cons` or `cons*`",
    ),
    (
        &["call/cc", "call-with-current-continuation", "dynamic-wind", "values", "call-with-values"],
        "VLAD has no continuations or multiple values: return a pair and take it apart with a pattern",
    ),
    (&["define-syntax", "let-syntax", "letrec-syntax", "syntax-rules"], "VLAD has no macros"),
    (&["do", "when", "unless", "case"], "not VLAD syntax: use `if` or `cond`, and a named `let` to loop"),
    (
        &["display", "newline", "print", "printf"],
        "print a value with `write`, a number with `write-real`; each top-level expression's value is printed anyway",
    ),
    (
        &["vector", "make-vector", "vector-ref", "vector-length", "list->vector", "vector->list"],
        "Scheme vectors are not VLAD data: use lists, or the packed real vectors of `vector-of`, `make-vec`, `vec-ref`, `vec-length`, `list-of`",
    ),
    (&["error"], "`error` needs its message first, a string: `(error \"f: bad input\" x)`"),
    (&["assert", "raise"], "stop with a message by `(if ok value (error \"f: bad input\" x))`"),
    (&["apply"], "a VLAD procedure takes one argument, several being one tuple: `(f (cons* a b))` is `(f a b)`"),
    (
        &["foldl", "foldr", "fold", "fold-right", "reduce-left", "reduce-right"],
        "VLAD folds with `fold-left`, `(fold-left f acc l)` being `(f (f acc x1) x2)`..., and `reduce`, `(reduce f i l)` being `(f x1 (f x2 ... (f xn i)))`",
    ),
    (&["for-each"], "VLAD has no loops for effect: `map` over the list, calling `write` in the procedure"),
    (
        &[
            "filter", "remove", "assoc", "assq", "assv", "member", "memq", "memv", "list-tail", "last",
            "last-pair", "list-copy", "append-map", "filter-map", "sort", "list-index", "vector-map",
        ],
        "not in VLAD's prelude, which has length, list-ref, append, map, map2, fold-left, reduce, reverse and iota: define it with recursion or a named `let`",
    ),
    (&["eq?", "eqv?"], "VLAD compares structures with `equal?` and numbers with `=`"),
    (&["number?", "integer?", "rational?", "exact?", "inexact?"], "VLAD's numeric type test is `real?`"),
    (&["add1", "sub1", "1+", "-1+", "1-"], "write `(+ x 1)` or `(- x 1)`"),
    (&["expt"], "VLAD has no power primitive: multiply, or write `(exp (* y (log x)))` for x > 0"),
    (&["exact->inexact", "inexact"], "`(* 1.0 n)` is the double of an integer n"),
    (&["tan"], "write `(/ (sin x) (cos x))`"),
    (
        &[
            "modulo", "remainder", "quotient", "floor", "ceiling", "round", "truncate", "inexact->exact", "exact",
            "even?", "odd?", "gcd", "lcm", "asin", "acos",
        ],
        "not a VLAD primitive: its numeric primitives are `+ - * / sqrt exp log sin cos atan`, the comparisons, and `zero? positive? negative? real?`",
    ),
];

/// The hint for an unbound `name` (without the leading separator), if any.
/// `bound` lists the names in scope (locals and globals, possibly repeated);
/// names starting with `%` are the implementation's and only suggested for
/// a name that starts with `%` too.
pub fn unbound_hint<'a>(name: &str, bound: impl IntoIterator<Item = &'a str>) -> Option<String> {
    if let Some((_, hint)) = SCHEME_ONLY.iter().find(|(names, _)| names.contains(&name)) {
        return Some(hint.to_string());
    }
    if let Some(hint) = number_hint(name) {
        return Some(hint.to_string());
    }
    nearest(name, bound).map(|n| format!("did you mean `{n}`?"))
}

/// A name that starts as a number does (a digit, or a sign or point and a
/// digit) was meant as one, but the reader could not read it so (`1/0`, `1e`,
/// `1.2.3`): it was taken for a symbol.
fn number_hint(name: &str) -> Option<&'static str> {
    let b = name.as_bytes();
    let digit_at = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let numeric = digit_at(0)
        || matches!(b.first(), Some(b'+' | b'-' | b'.'))
            && (digit_at(1) || b.get(1) == Some(&b'.') && digit_at(2));
    if !numeric {
        return None;
    }
    let zero_denominator =
        name.split_once('/').is_some_and(|(_, d)| !d.is_empty() && d.bytes().all(|c| c == b'0'));
    Some(if zero_denominator {
        "not a number: a rational's denominator cannot be zero"
    } else {
        "it starts like a number but is not one"
    })
}

/// " (did you mean `x`?)" where a name of `bound` is near `name` (as for
/// [`unbound_hint`]), or "": for messages that say themselves what is missing.
pub fn nearest_hint<'a>(name: &str, bound: impl IntoIterator<Item = &'a str>) -> String {
    nearest(name, bound).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default()
}

/// Names longer than this get no suggestion (the edit distance takes time and
/// memory in the product of the two lengths).
const MAX_LEN: usize = 64;

/// The bound name nearest to `name`: the same letters in another case, or
/// the fewest edits (insertions, deletions, substitutions, transpositions of
/// two neighbours), at most one per three characters of `name` (so names of
/// one or two characters get no suggestion: `y` is not a misspelling of `x`).
/// Ties go to the first in alphabetical order, so the hint does not depend on
/// the order of `bound`.
fn nearest<'a>(name: &str, bound: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = name.chars().count();
    if len > MAX_LEN {
        return None;
    }
    let limit = len / 3;
    let hidden = |n: &str| n.starts_with('%') && !name.starts_with('%');
    let lower = name.to_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for cand in bound {
        // (at least as many edits as the lengths differ)
        if cand == name || hidden(cand) || cand.chars().count().abs_diff(len) > limit {
            continue;
        }
        let d = if cand.to_lowercase() == lower { 0 } else { strsim::osa_distance(name, cand) };
        if d > limit {
            continue;
        }
        if best.is_none_or(|(bd, bn)| (d, cand) < (bd, bn)) {
            best = Some((d, cand));
        }
    }
    best.map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: &[&str] =
        &["length", "list-ref", "gradient-R", "gradient-F", "x", "lambda", "%unit", "map2"];

    fn hint(name: &str) -> Option<String> {
        unbound_hint(name, BOUND.iter().copied())
    }

    #[test]
    fn misspellings_get_the_nearest_name() {
        // one transposition, one case difference, one deletion, one insertion
        assert_eq!(hint("lenght").as_deref(), Some("did you mean `length`?"));
        assert_eq!(hint("gradient-r").as_deref(), Some("did you mean `gradient-R`?"));
        assert_eq!(hint("lamda").as_deref(), Some("did you mean `lambda`?"));
        assert_eq!(hint("mapp2").as_deref(), Some("did you mean `map2`?"));
    }

    #[test]
    fn far_or_short_names_get_no_suggestion() {
        assert_eq!(hint("y"), None);
        assert_eq!(hint("xx"), None);
        assert_eq!(hint("hessian-vector"), None);
        // nor one too long to measure cheaply, however near
        let long = "a".repeat(MAX_LEN + 1);
        assert_eq!(unbound_hint(&long, [&*format!("{long}b")]), None);
        assert!(unbound_hint(&long[1..], [&*long]).is_some());
        // the implementation's names are not offered for a user's
        assert_eq!(hint("unit"), None);
        assert_eq!(hint("%unitt").as_deref(), Some("did you mean `%unit`?"));
    }

    #[test]
    fn ties_do_not_depend_on_the_order_of_the_names() {
        let a = unbound_hint("gradient-X", ["gradient-R", "gradient-F"]);
        let b = unbound_hint("gradient-X", ["gradient-F", "gradient-R"]);
        assert_eq!(a.as_deref(), Some("did you mean `gradient-F`?"));
        assert_eq!(a, b);
    }

    #[test]
    fn a_malformed_number_is_said_to_be_one() {
        assert_eq!(hint("1/0").as_deref(), Some("not a number: a rational's denominator cannot be zero"));
        assert_eq!(hint("-3/00").as_deref(), Some("not a number: a rational's denominator cannot be zero"));
        for n in ["1e", "1.2.3", "-.5x", "+1/2/3", "12abc"] {
            assert_eq!(hint(n).as_deref(), Some("it starts like a number but is not one"), "{n}");
        }
        // names that start with a sign or a point and no digit are names
        assert_eq!(hint("-x"), None);
        assert_eq!(hint("..."), None);
        assert_eq!(hint("+"), None);
    }

    #[test]
    fn scheme_forms_say_what_to_use_instead() {
        assert!(hint("set!").unwrap().contains("no mutation"));
        assert!(hint("quasiquote").unwrap().contains("cons*"));
        assert!(hint("begin").unwrap().contains("let*"));
        assert!(hint("vector").unwrap().contains("make-vec"));
    }

    #[test]
    fn common_scheme_procedures_say_what_vlad_has() {
        // (before the nearest name: `expt` is one edit from `exp`, which is not a power)
        let bound = ["exp", "list", "fold-left", "reduce", "equal?", "real?"];
        let h = |n: &str| unbound_hint(n, bound.iter().copied()).unwrap();
        for n in ["foldl", "foldr", "fold", "fold-right"] {
            assert!(h(n).contains("`fold-left`") && h(n).contains("`reduce`"), "{n}");
        }
        assert!(h("expt").contains("(exp (* y (log x)))"));
        assert!(h("last").contains("define it"));
        assert!(h("filter").contains("define it"));
        assert!(h("eq?").contains("`equal?`"));
        assert!(h("number?").contains("`real?`"));
        assert!(h("exact->inexact").contains("(* 1.0 n)"));
        assert!(h("modulo").contains("not a VLAD primitive"));
        // a misspelling of a bound name still gets that name
        assert_eq!(h("fold-lefft"), "did you mean `fold-left`?");
    }
}
