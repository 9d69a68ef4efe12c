//! Unit tests of the numeric tower. Expected values are worked out by hand or
//! with `BigInt` arithmetic, never taken from the interpreter's output.

use super::*;
use proptest::prelude::*;

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn bigv(s: &str) -> Value {
    from_big(s.parse::<BigInt>().unwrap())
}

/// Shows a value with its representation, so `Int` and `Big` are told apart.
fn show(v: &Value) -> String {
    match v {
        Value::Int(i) => format!("int {i}"),
        Value::Big(b) => format!("big {b}"),
        Value::Real(r) => format!("real {r:?}"),
        other => format!("other {}", crate::print::to_string(other)),
    }
}

fn op(o: char, a: &Value, b: &Value) -> String {
    match arith(o, a, b) {
        Some(Ok(v)) => show(&v),
        Some(Err(e)) => format!("error {e}"),
        None => "not numbers".into(),
    }
}

#[test]
fn machine_integers_stay_machine_integers() {
    assert_eq!(op('+', &int(2), &int(3)), "int 5");
    assert_eq!(op('-', &int(2), &int(3)), "int -1");
    assert_eq!(op('*', &int(-4), &int(6)), "int -24");
    assert_eq!(op('+', &int(i64::MAX - 1), &int(1)), format!("int {}", i64::MAX));
    assert_eq!(op('-', &int(i64::MIN + 1), &int(1)), format!("int {}", i64::MIN));
}

#[test]
fn overflow_promotes_to_big_integers() {
    // 2^63 - 1 + 1 = 2^63 = 9223372036854775808
    assert_eq!(op('+', &int(i64::MAX), &int(1)), "big 9223372036854775808");
    // -2^63 - 1
    assert_eq!(op('-', &int(i64::MIN), &int(1)), "big -9223372036854775809");
    // (2^63 - 1) * 2 = 2^64 - 2
    assert_eq!(op('*', &int(i64::MAX), &int(2)), "big 18446744073709551614");
    // -2^63 * -1 = 2^63
    assert_eq!(op('*', &int(i64::MIN), &int(-1)), "big 9223372036854775808");
    // 0 - (-2^63) = 2^63
    assert_eq!(op('-', &int(0), &int(i64::MIN)), "big 9223372036854775808");
    // 2^32 * 2^32 = 2^64
    assert_eq!(op('*', &int(1 << 32), &int(1 << 32)), "big 18446744073709551616");
}

#[test]
fn big_results_that_fit_demote_to_machine_integers() {
    let two63 = bigv("9223372036854775808");
    assert!(matches!(two63, Value::Big(_)));
    assert_eq!(op('-', &two63, &int(1)), format!("int {}", i64::MAX));
    assert_eq!(op('-', &two63, &two63), "int 0");
    assert_eq!(op('/', &bigv("100000000000000000000"), &bigv("10000000000000000000")), "int 10");
    assert!(matches!(from_big(BigInt::from(i64::MIN)), Value::Int(i64::MIN)));
}

#[test]
fn division_is_exact_when_it_divides() {
    assert_eq!(op('/', &int(6), &int(3)), "int 2");
    assert_eq!(op('/', &int(-6), &int(3)), "int -2");
    assert_eq!(op('/', &int(0), &int(7)), "int 0");
    assert_eq!(op('/', &int(1), &int(2)), "real 0.5");
    assert_eq!(op('/', &int(-7), &int(2)), "real -3.5");
    assert_eq!(op('/', &int(10), &int(4)), "real 2.5");
    // 10^20 / 10 = 10^19, which does not fit in i64 (max about 9.22e18)
    assert_eq!(op('/', &bigv("100000000000000000000"), &int(10)), "big 10000000000000000000");
    // 10^20 / 3 is not an integer: a double close to 3.333...e19
    match arith('/', &bigv("100000000000000000000"), &int(3)) {
        Some(Ok(Value::Real(r))) => assert!((r - 1e20 / 3.0).abs() <= 1e20 / 3.0 * 1e-15, "{r}"),
        other => panic!("expected a double, got {:?}", other.map(|r| r.map(|v| show(&v)))),
    }
    // A ratio of two numbers too large for doubles is still correctly scaled: (3*10^400) / 10^400 = 3
    // exactly, and (10^400 + 1) / (2*10^400) is close to 0.5.
    let e400 = BigInt::from(10).pow(400);
    assert_eq!(op('/', &from_big(&e400 * 3), &from_big(e400.clone())), "int 3");
    match arith('/', &from_big(&e400 + 1), &from_big(&e400 * 2)) {
        Some(Ok(Value::Real(r))) => assert!((r - 0.5).abs() < 1e-15, "{r}"),
        other => panic!("expected a double, got {:?}", other.map(|r| r.map(|v| show(&v)))),
    }
}

#[test]
fn i64_min_divided_by_minus_one_is_a_big_integer() {
    // -2^63 / -1 = 2^63 overflows i64; it used to panic in `%`.
    assert_eq!(op('/', &int(i64::MIN), &int(-1)), "big 9223372036854775808");
    assert_eq!(op('/', &int(i64::MIN), &int(1)), format!("int {}", i64::MIN));
    assert_eq!(op('/', &int(i64::MIN), &int(2)), format!("int {}", i64::MIN / 2));
}

#[test]
fn division_by_zero() {
    assert_eq!(op('/', &int(5), &int(0)), "error exact division by zero");
    assert_eq!(op('/', &bigv("100000000000000000000"), &int(0)), "error exact division by zero");
    assert_eq!(op('/', &Value::Real(1.0), &int(0)), "real inf");
    assert_eq!(op('/', &Value::Real(-1.0), &int(0)), "real -inf");
    assert_eq!(op('/', &int(1), &Value::Real(0.0)), "real inf");
    assert_eq!(op('/', &int(1), &Value::Real(-0.0)), "real -inf");
    assert_eq!(op('/', &Value::Real(0.0), &Value::Real(0.0)), "real NaN");
}

#[test]
fn any_double_makes_a_double() {
    assert_eq!(op('+', &int(1), &Value::Real(0.5)), "real 1.5");
    assert_eq!(op('*', &int(2), &Value::Real(1.0)), "real 2.0");
    assert_eq!(op('-', &Value::Real(2.0), &int(2)), "real 0.0");
    assert_eq!(op('+', &bigv("100000000000000000000"), &Value::Real(0.5)), "real 1e20");
    assert_eq!(op('+', &int(1), &Value::Bool(true)), "not numbers");
    assert_eq!(op('+', &Value::Nil, &int(1)), "not numbers");
}

fn cmp(a: &Value, b: &Value) -> Option<Ordering> {
    compare(a, b).expect("both are numbers")
}

#[test]
fn mixed_exact_inexact_comparison_is_exact() {
    use Ordering::*;
    assert_eq!(cmp(&int(1), &Value::Real(1.0)), Some(Equal));
    assert_eq!(cmp(&int(1), &Value::Real(1.5)), Some(Less));
    assert_eq!(cmp(&Value::Real(1.5), &int(1)), Some(Greater));
    assert_eq!(cmp(&int(-2), &Value::Real(-1.5)), Some(Less));
    assert_eq!(cmp(&int(-1), &Value::Real(-1.5)), Some(Greater));
    // 2^53 + 1 is not a double; 2^53 is. Converting the integer to a double would say "equal".
    let two53p1 = int((1 << 53) + 1);
    let two53 = Value::Real(9007199254740992.0);
    assert_eq!(cmp(&two53p1, &two53), Some(Greater));
    assert_eq!(cmp(&two53, &two53p1), Some(Less));
    // 10^20 is exactly 1e20 as a double (1e20 = 2^20 * 95367431640625, which fits 53 bits).
    assert_eq!(cmp(&bigv("100000000000000000000"), &Value::Real(1e20)), Some(Equal));
    assert_eq!(cmp(&bigv("100000000000000000001"), &Value::Real(1e20)), Some(Greater));
    assert_eq!(cmp(&bigv("99999999999999999999"), &Value::Real(1e20)), Some(Less));
    // a huge double against a big integer
    let e400 = from_big(BigInt::from(10).pow(400));
    assert_eq!(cmp(&e400, &Value::Real(1e300)), Some(Greater));
    assert_eq!(cmp(&e400, &Value::Real(f64::INFINITY)), Some(Less));
    assert_eq!(cmp(&e400, &Value::Real(f64::NEG_INFINITY)), Some(Greater));
    assert_eq!(cmp(&int(0), &Value::Real(f64::NAN)), None);
    assert_eq!(cmp(&Value::Real(f64::NAN), &Value::Real(f64::NAN)), None);
    assert_eq!(cmp(&int(0), &Value::Real(-0.0)), Some(Equal));
    assert!(num_equal(&int(3), &Value::Real(3.0)));
    assert!(!num_equal(&int(3), &Value::Real(3.0000000000000004)));
    assert_eq!(compare(&int(1), &Value::Nil), None);
}

#[test]
fn big_integer_comparison() {
    use Ordering::*;
    assert_eq!(cmp(&bigv("-100000000000000000000"), &int(i64::MIN)), Some(Less));
    assert_eq!(cmp(&bigv("100000000000000000000"), &int(i64::MAX)), Some(Greater));
    assert_eq!(cmp(&bigv("100000000000000000000"), &bigv("100000000000000000000")), Some(Equal));
    assert_eq!(sign(&bigv("-100000000000000000000")), Some(Some(Less)));
    assert_eq!(sign(&bigv("100000000000000000000")), Some(Some(Greater)));
    assert_eq!(sign(&Value::Real(-0.0)), Some(Some(Equal)));
    assert_eq!(sign(&Value::Real(f64::NAN)), Some(None));
    assert_eq!(sign(&Value::Bool(false)), None);
}

#[test]
fn sqrt_is_exact_for_perfect_squares() {
    assert_eq!(show(&sqrt(&int(16)).unwrap()), "int 4");
    assert_eq!(show(&sqrt(&int(0)).unwrap()), "int 0");
    assert_eq!(show(&sqrt(&int(2)).unwrap()), format!("real {:?}", 2f64.sqrt()));
    assert_eq!(show(&sqrt(&Value::Real(2.25)).unwrap()), "real 1.5");
    // (10^20)^2 = 10^40
    assert_eq!(
        show(&sqrt(&bigv("10000000000000000000000000000000000000000")).unwrap()),
        "big 100000000000000000000"
    );
    // 123456789^2 = 15241578750190521
    assert_eq!(show(&sqrt(&int(15241578750190521)).unwrap()), "int 123456789");
    assert!(matches!(sqrt(&int(-4)), Some(Value::Real(r)) if r.is_nan()));
    assert!(sqrt(&Value::Nil).is_none());
}

/// Integers that exercise the i64 edges.
fn edge_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MIN + 1),
        Just(i64::MAX),
        Just(i64::MAX - 1),
        Just(-1i64),
        Just(0i64),
        Just(1i64),
        Just(1i64 << 32),
        Just(-(1i64 << 31)),
        -1000i64..1000,
        any::<i64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Exact `+ - *` on machine integers agree with BigInt arithmetic.
    #[test]
    fn exact_arithmetic_matches_bigint(a in edge_int(), b in edge_int()) {
        let (x, y) = (BigInt::from(a), BigInt::from(b));
        for (o, expect) in [('+', &x + &y), ('-', &x - &y), ('*', &x * &y)] {
            let got = arith(o, &int(a), &int(b)).unwrap().unwrap();
            prop_assert_eq!(show(&got), show(&from_big(expect)), "{} {} {}", a, o, b);
        }
    }

    /// `/` is exact (and equal to the BigInt quotient) exactly when it divides.
    #[test]
    fn division_matches_bigint(a in edge_int(), b in edge_int()) {
        let got = arith('/', &int(a), &int(b)).unwrap();
        if b == 0 {
            prop_assert!(got.is_err());
        } else {
            let (x, y) = (BigInt::from(a), BigInt::from(b));
            let (q, r) = x.div_rem(&y);
            let got = got.unwrap();
            if r.is_zero() {
                prop_assert_eq!(show(&got), show(&from_big(q)));
            } else {
                let expect = a as f64 / b as f64;
                match got {
                    Value::Real(g) => prop_assert!((g - expect).abs() <= expect.abs() * 1e-15),
                    other => prop_assert!(false, "expected a double, got {}", show(&other)),
                }
            }
        }
    }

    /// Integer/double comparison agrees with exact rational comparison.
    #[test]
    fn mixed_comparison_matches_exact(a in edge_int(), m in -(1i64 << 52)..(1i64 << 52), e in -4i32..70) {
        // the double m * 2^e, exactly representable; compare to `a` exactly with BigInt
        let d = (m as f64) * 2f64.powi(e);
        let (num, den) = if e >= 0 {
            (BigInt::from(m) << e as usize, BigInt::from(1))
        } else {
            (BigInt::from(m), BigInt::from(1) << (-e) as usize)
        };
        let expect = (BigInt::from(a) * &den).cmp(&num);
        prop_assert_eq!(cmp(&int(a), &Value::Real(d)), Some(expect));
        prop_assert_eq!(cmp(&Value::Real(d), &int(a)), Some(expect.reverse()));
    }
}

/// A rational too large for machine words: `n` / `d` times powers of 3 and 2
/// (so that its denominator shares factors with small ones), in lowest terms.
fn big_rat(n: i64, d: i64, k3: u32, k2: u32) -> BigRational {
    let num = BigInt::from(n) * BigInt::from(3).pow(k3) + 1;
    let den = BigInt::from(d.unsigned_abs().max(1)) * BigInt::from(2).pow(k2) * BigInt::from(3).pow(k3 / 2);
    BigRational::new(num, den)
}

proptest! {
    /// A big rational and a small one (a machine integer or a rational of
    /// two): `arith`'s shortcut (`rat_small_arith`) gives the lowest-terms
    /// value that num-rational's general arithmetic gives, both ways round.
    #[test]
    fn big_and_small_rationals_match_general_arithmetic(
        n in any::<i64>(), d in 1i64..1000, k3 in 25u32..80, k2 in 0u32..70,
        c in prop_oneof![any::<i64>(), -40i64..40], e in prop_oneof![Just(1i64), 1i64..50, 1i64..i64::MAX],
    ) {
        let x = big_rat(n, d, k3, k2);
        let y = BigRational::new(BigInt::from(c), BigInt::from(e));
        let (xv, yv) = (from_rat(x.clone()), from_rat(y.clone()));
        prop_assume!(matches!(xv, Value::Rat(_)));
        for o in ['+', '-', '*', '/'] {
            for (a, b, av, bv) in [(&x, &y, &xv, &yv), (&y, &x, &yv, &xv)] {
                let want = if o == '/' && b.is_zero() {
                    "error exact division by zero".to_string()
                } else {
                    let r = match o { '+' => a + b, '-' => a - b, '*' => a * b, _ => a / b };
                    crate::print::to_string(&from_rat(r))
                };
                let got = match arith(o, av, bv) {
                    Some(Ok(v)) => crate::print::to_string(&v),
                    Some(Err(e)) => format!("error {e}"),
                    None => "none".into(),
                };
                prop_assert_eq!(&got, &want, "{} {} {}", a, o, b);
            }
        }
    }
}

/// The shortcut keeps a loop of `(*= x 1/3) (+= x 1)` on exact rationals in
/// lowest terms: after 200 steps x = 3/2 (1 - 3^-200) = ((3^200 - 1) / 2) /
/// 3^199 exactly (3^200 - 1 is even), checked by BigInt arithmetic.
#[test]
fn a_rational_loop_stays_exact_and_reduced() {
    let third = from_rat(BigRational::new(BigInt::from(1), BigInt::from(3)));
    let mut x = Value::Int(0);
    for _ in 0..200 {
        x = arith('*', &x, &third).unwrap().unwrap();
        x = arith('+', &x, &Value::Int(1)).unwrap().unwrap();
    }
    let p3 = BigInt::from(3).pow(200u32);
    let want = BigRational::new(BigInt::from(3) * (&p3 - 1), BigInt::from(2) * &p3);
    let Value::Rat(q) = &x else { panic!("{}", show(&x)) };
    assert_eq!(**q, want);
    assert_eq!(q.denom(), &BigInt::from(3).pow(199u32));
    assert_eq!(q.numer(), &((p3 - 1) / 2));
}
