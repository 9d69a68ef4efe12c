//! Unit tests of the printer.

use super::*;
use crate::toplevel::Session;
use num_bigint::BigInt;

fn int(i: i64) -> Value {
    Value::Int(i)
}

#[test]
fn doubles_print_in_shortest_round_trip_form_with_a_point() {
    let cases: [(f64, &str); 16] = [
        (1.0, "1.0"),
        (0.25, "0.25"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (123456789.0, "123456789.0"),
        (9007199254740992.0, "9007199254740992.0"),
        (1e21, "1e21"),
        (1e100, "1e100"),
        (1.5e-7, "1.5e-7"),
        (5e-324, "5e-324"),
        (f64::MAX, "1.7976931348623157e308"),
        (f64::INFINITY, "+inf.0"),
        (f64::NEG_INFINITY, "-inf.0"),
        (f64::NAN, "+nan.0"),
    ];
    for (x, s) in cases {
        assert_eq!(format_real(x), s, "{x:?}");
        assert_eq!(to_string(&Value::Real(x)), s);
    }
    // 1/3 needs 16 significant digits to read back
    assert_eq!(format_real(1.0 / 3.0), "0.3333333333333333");
}

#[test]
fn atoms() {
    assert_eq!(to_string(&Value::Nil), "()");
    assert_eq!(to_string(&Value::Bool(true)), "#t");
    assert_eq!(to_string(&Value::Bool(false)), "#f");
    assert_eq!(to_string(&int(120)), "120");
    assert_eq!(to_string(&int(-7)), "-7");
    assert_eq!(to_string(&int(i64::MIN)), "-9223372036854775808");
    // 25! = 15511210043330985984000000
    let f25: BigInt = (1..=25).map(BigInt::from).product();
    assert_eq!(to_string(&crate::num::from_big(f25)), "15511210043330985984000000");
    assert_eq!(to_string(&crate::num::from_big(-(BigInt::from(1) << 64usize))), "-18446744073709551616");
}

#[test]
fn lists_and_dotted_pairs() {
    assert_eq!(to_string(&Value::list([int(1), int(2), int(3)])), "(1 2 3)");
    assert_eq!(to_string(&Value::cons(int(1), int(2))), "(1 . 2)");
    assert_eq!(to_string(&Value::cons(int(1), Value::cons(int(2), int(3)))), "(1 2 . 3)");
    assert_eq!(to_string(&Value::cons(Value::Nil, Value::Nil)), "(())");
    assert_eq!(to_string(&Value::list([Value::Bool(true), Value::Bool(false), Value::Nil])), "(#t #f ())");
    let nested =
        Value::list([Value::list([int(1)]), Value::cons(int(2), int(3)), Value::Nil, Value::Real(0.5)]);
    assert_eq!(to_string(&nested), "((1) (2 . 3) () 0.5)");
    assert_eq!(to_string(&Value::cons(Value::cons(int(1), int(2)), Value::Real(3.0))), "((1 . 2) . 3.0)");
}

#[test]
fn long_lists_print_without_deep_recursion() {
    let n = 200_000;
    let l = Value::list((0..n).map(|_| int(7)));
    let s = to_string(&l);
    // "(" + n sevens separated by n-1 spaces + ")"
    assert_eq!(s.len(), 2 + n + (n - 1));
    assert!(s.starts_with("(7 7 ") && s.ends_with(" 7 7)"));
}

#[test]
fn tagged_values() {
    use crate::value::Tag;
    assert_eq!(to_string(&Value::tagged(Tag::Perturbation, int(1))), "(perturbation 1)");
    assert_eq!(to_string(&Value::tagged(Tag::Sensitivity, Value::Real(0.5))), "(sensitivity 0.5)");
    assert_eq!(to_string(&Value::tagged(Tag::Reverse, int(2))), "(reverse 2)");
    assert_eq!(
        to_string(&Value::bundle(int(3), Value::tagged(Tag::Perturbation, int(1)))),
        "(forward 3 (perturbation 1))"
    );
}

#[test]
fn procedures() {
    let mut s = Session::new();
    let vals = s.run_text("t.vlad", "+ write (lambda (x) (* x x)) (lambda () 1) car").unwrap();
    let shown: Vec<String> = vals.iter().map(to_string).collect();
    assert_eq!(shown[0], "+");
    assert_eq!(shown[1], "write");
    // a closure prints as its lambda after renaming: name_N for every variable
    let re = regex::Regex::new(
        r"^\(lambda \(x_(\d+)\)\s+\(let\* \(\(t_(\d+) \(\* x_(\d+) x_(\d+)\)\)\)\s+t_(\d+)\)\)$",
    )
    .unwrap();
    let c = re.captures(&shown[2]).unwrap_or_else(|| panic!("{}", shown[2]));
    assert!(c[1] == c[3] && c[3] == c[4] && c[2] == c[5] && c[1] != c[2], "{}", shown[2]);
    assert!(shown[3].starts_with("(lambda (arg_"), "{}", shown[3]);
    // car is a prelude procedure taking the pattern (cons a d)
    assert!(shown[4].starts_with("(lambda (arg_"), "{}", shown[4]);
    assert!(shown[4].contains("((cons a_"), "{}", shown[4]);
}

#[test]
fn brief_forms_are_cut_short_without_printing_the_whole_value() {
    let short = Value::list(vec![int(1), int(2), int(3)]);
    assert_eq!(brief(&short, 60), "(1 2 3)");
    // A long list: the first elements, then `...`; 60 characters at most.
    let long = Value::list((0..1_000_000).map(int).collect::<Vec<_>>());
    let b = brief(&long, 60);
    assert!(b.starts_with("(0 1 2 3 4 5 6 7 8 9 10 ") && b.ends_with("..."), "{b}");
    assert_eq!(b.chars().count(), 60, "{b}");
    // Deep nesting stops at the limit as well (a million levels would overflow a
    // recursive printer's stack).
    let mut deep = int(7);
    for _ in 0..1_000_000 {
        deep = Value::cons(deep, Value::Nil);
    }
    let b = brief(&deep, 60);
    assert_eq!(b, format!("{}...", "(".repeat(57)));
    // The limit is the only difference from the full form.
    let mid = Value::list((0..30).map(int).collect::<Vec<_>>());
    assert_eq!(brief(&mid, 1000), to_string(&mid));
}

#[test]
fn deeply_nested_values_print_whole() {
    use crate::value::Tag;
    let n = 200_000;
    let mut deep = int(7);
    for _ in 0..n {
        deep = Value::cons(deep, Value::Nil);
    }
    assert_eq!(to_string(&deep), format!("{}7{}", "(".repeat(n), ")".repeat(n)));
    // (a list's tail after a dot, inside tagged values and bundles)
    let mut t = Value::Real(0.5);
    for i in 0..n {
        let pair = Value::cons(int(1), t);
        t = if i % 2 == 0 { Value::tagged(Tag::Sensitivity, pair) } else { Value::bundle(pair, int(2)) };
    }
    // (openers from the outermost, closers from the innermost)
    let (mut want, mut end) = (String::new(), String::new());
    for i in (0..n).rev() {
        want.push_str(if i % 2 == 0 { "(sensitivity (1 . " } else { "(forward (1 . " });
    }
    for i in 0..n {
        end.push_str(if i % 2 == 0 { "))" } else { ") 2)" });
    }
    assert_eq!(to_string(&t), format!("{want}0.5{end}"));
}
