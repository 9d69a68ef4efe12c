//! Property: what the printer writes, the reader reads back as an equal value,
//! for values built from (), booleans, machine and big integers, finite doubles
//! (compared bit for bit, so -0.0 and subnormals count), and pairs.

use num_bigint::{BigInt, Sign};
use proptest::prelude::*;
use vlad::datum::{Datum, DatumKind};
use vlad::value::Value;

/// A generated value (Value itself is not `Debug`).
#[derive(Clone, Debug)]
enum V {
    Nil,
    Bool(bool),
    Int(i64),
    Big(BigInt),
    Real(f64),
    Pair(Box<V>, Box<V>),
}

fn to_value(v: &V) -> Value {
    match v {
        V::Nil => Value::Nil,
        V::Bool(b) => Value::Bool(*b),
        V::Int(i) => Value::Int(*i),
        V::Big(b) => vlad::num::from_big(b.clone()),
        V::Real(r) => Value::Real(*r),
        V::Pair(a, d) => Value::cons(to_value(a), to_value(d)),
    }
}

fn big() -> impl Strategy<Value = BigInt> {
    prop_oneof![
        // beyond i64 on either side
        (any::<bool>(), prop::collection::vec(any::<u32>(), 3..8), 1u32..).prop_map(
            |(neg, mut words, top)| {
                words.push(top);
                BigInt::from_slice(if neg { Sign::Minus } else { Sign::Plus }, &words)
            }
        ),
        // at the edges of i64
        Just(BigInt::from(i64::MAX) + 1),
        Just(BigInt::from(i64::MIN) - 1),
        Just(BigInt::from(i64::MIN)),
        (any::<i64>(), any::<u64>()).prop_map(|(a, b)| BigInt::from(a) * BigInt::from(b)),
    ]
}

fn real() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |x| x.is_finite()),
        prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
        Just(-0.0),
        Just(1.0),
        Just(1e21),
        Just(1e-7),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        (-1_000_000i64..1_000_000).prop_map(|i| i as f64),
    ]
}

fn value() -> impl Strategy<Value = V> {
    let leaf = prop_oneof![
        Just(V::Nil),
        any::<bool>().prop_map(V::Bool),
        any::<i64>().prop_map(V::Int),
        prop_oneof![Just(0i64), Just(i64::MIN), Just(i64::MAX), -10i64..10].prop_map(V::Int),
        big().prop_map(V::Big),
        real().prop_map(V::Real),
    ];
    leaf.prop_recursive(8, 96, 4, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, d)| V::Pair(Box::new(a), Box::new(d))),
            // proper lists, which print in list notation
            prop::collection::vec(inner, 0..6).prop_map(|items| items
                .into_iter()
                .rev()
                .fold(V::Nil, |acc, x| V::Pair(Box::new(x), Box::new(acc)))),
        ]
    })
}

/// Checks that a datum read back denotes `v`.
fn same(d: &Datum, v: &V) -> Result<(), String> {
    let bad = || Err(format!("read back {:?}, expected {:?}", d.kind, v));
    match (v, &d.kind) {
        (V::Nil, DatumKind::List(items, None)) if items.is_empty() => Ok(()),
        (V::Bool(a), DatumKind::Bool(b)) if a == b => Ok(()),
        (V::Int(_) | V::Big(_), DatumKind::Int(_) | DatumKind::Big(_)) => {
            let want = match v {
                V::Int(i) => BigInt::from(*i),
                V::Big(b) => b.clone(),
                _ => unreachable!(),
            };
            let (got, small) = match &d.kind {
                DatumKind::Int(i) => (BigInt::from(*i), true),
                DatumKind::Big(b) => ((**b).clone(), false),
                _ => unreachable!(),
            };
            // an integer reads as a machine integer exactly when it fits
            if got == want && small == i64::try_from(&want).is_ok() {
                Ok(())
            } else {
                bad()
            }
        }
        (V::Real(a), DatumKind::Real(b)) if a.to_bits() == b.to_bits() => Ok(()),
        (V::Pair(..), DatumKind::List(items, tail)) => {
            let mut cur = v;
            let mut elems = Vec::new();
            while let V::Pair(a, rest) = cur {
                elems.push(&**a);
                cur = rest;
            }
            if elems.len() != items.len() {
                return bad();
            }
            for (x, y) in items.iter().zip(elems) {
                same(x, y)?;
            }
            match (cur, tail) {
                (V::Nil, None) => Ok(()),
                (t, Some(dt)) if !matches!(t, V::Nil) => same(dt, t),
                _ => bad(),
            }
        }
        _ => bad(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn printed_values_read_back_equal(v in value()) {
        let text = vlad::print::to_string(&to_value(&v));
        let data = vlad::reader::read_all(&text, 0).map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(data.len(), 1, "{:?} read as {} data", text, data.len());
        if let Err(e) = same(&data[0], &v) {
            return Err(TestCaseError::fail(format!("{text:?}: {e}")));
        }
    }

    /// A double always prints so that it reads back as a double (never as an integer).
    #[test]
    fn doubles_read_back_as_doubles(x in real()) {
        let text = vlad::print::format_real(x);
        let d = vlad::reader::read_all(&text, 0).unwrap();
        prop_assert!(matches!(d[0].kind, DatumKind::Real(y) if y.to_bits() == x.to_bits()), "{}", text);
    }
}
