//! The numeric tower: machine integers that promote to big integers, exact
//! rationals (which arise from literals such as `1/3` and from reversible `*=`/`/=`),
//! and doubles. Exact arithmetic stays exact; any double makes the result a double.

use crate::value::Value;
use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{Signed, ToPrimitive, Zero};
use std::cmp::Ordering;
use std::rc::Rc;

/// A big integer as a value, demoted to `Int` when it fits.
pub fn from_big(b: BigInt) -> Value {
    match b.to_i64() {
        Some(i) => Value::Int(i),
        None => {
            note_made(b.bits());
            Value::Big(Rc::new(b))
        }
    }
}

/// A rational as a value: an integer when the denominator is 1.
pub fn from_rat(r: BigRational) -> Value {
    if r.is_integer() {
        from_big(r.to_integer())
    } else {
        note_made(r.numer().bits() + r.denom().bits());
        Value::Rat(Rc::new(r))
    }
}

thread_local! {
    /// The bits of the big integers and rationals made (`from_big`,
    /// `from_rat`) since [`made_past`] last found them past its bound.
    static MADE_BITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[inline]
fn note_made(bits: u64) {
    MADE_BITS.with(|m| m.set(m.get().saturating_add(bits)));
}

/// Whether the big integers and rationals made since this last said so hold
/// more than `bytes` in all (counting from 0 again if so). A single exact
/// operation may make a number of any size, and a program's steps may each
/// make a larger one (a recursion multiplying as it descends holds them all:
/// memory growing as the square of its depth), so the evaluator, which looks
/// at the memory left every so many steps, looks also each time this says
/// so (`Machine::call_prim`): a program whose numbers outgrow the memory
/// left stops with an error rather than being killed.
pub fn made_past(bytes: usize) -> bool {
    MADE_BITS.with(|m| {
        let past = m.get() / 8 > bytes as u64;
        if past {
            m.set(0);
        }
        past
    })
}

/// An exact number (integer or rational) as a rational.
pub fn rat(v: &Value) -> Option<BigRational> {
    match v {
        Value::Rat(q) => Some((**q).clone()),
        _ => big(v).map(BigRational::from_integer),
    }
}

/// The nearest double to a rational.
pub fn rat_f64(q: &BigRational) -> f64 {
    ratio_f64(q.numer(), q.denom())
}

/// Is this an exact number (integer or rational)?
pub fn is_exact_num(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Big(_) | Value::Rat(_))
}

pub fn big(v: &Value) -> Option<BigInt> {
    match v {
        Value::Int(i) => Some(BigInt::from(*i)),
        Value::Big(b) => Some((**b).clone()),
        _ => None,
    }
}

fn is_exact(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Big(_))
}

/// [`arith`] where an operand is a double and the other a double or a machine
/// integer (converted to a double, as the general path converts an exact
/// integer meeting a real); `None` otherwise.
#[inline]
pub fn real_arith(op: char, a: &Value, b: &Value) -> Option<Value> {
    let (x, y) = match (a, b) {
        (Value::Real(x), Value::Real(y)) => (*x, *y),
        (Value::Int(x), Value::Real(y)) => (*x as f64, *y),
        (Value::Real(x), Value::Int(y)) => (*x, *y as f64),
        _ => return None,
    };
    Some(Value::Real(match op {
        '+' => x + y,
        '-' => x - y,
        '*' => x * y,
        _ => x / y,
    }))
}

/// Binary arithmetic on two numbers. `None` when an operand is not a number.
pub fn arith(op: char, a: &Value, b: &Value) -> Option<Result<Value, String>> {
    // Reals first (what derivative code computes with).
    if let Some(v) = real_arith(op, a, b) {
        return Some(Ok(v));
    }
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        let r = match op {
            '+' => x.checked_add(*y),
            '-' => x.checked_sub(*y),
            '*' => x.checked_mul(*y),
            _ => {
                if *y == 0 {
                    return Some(Err("exact division by zero".into()));
                }
                // `checked_rem` is `None` only for i64::MIN / -1, which the big path handles.
                match x.checked_rem(*y) {
                    Some(0) => x.checked_div(*y),
                    Some(_) => return Some(Ok(Value::Real(int_ratio_f64(*x, *y)))),
                    None => None,
                }
            }
        };
        if let Some(r) = r {
            return Some(Ok(Value::Int(r)));
        }
    }
    if is_exact(a) && is_exact(b) {
        let (x, y) = (big(a)?, big(b)?);
        return Some(Ok(match op {
            '+' => from_big(x + y),
            '-' => from_big(x - y),
            '*' => from_big(x * y),
            _ => {
                if y.is_zero() {
                    return Some(Err("exact division by zero".into()));
                }
                let (q, r) = x.div_rem(&y);
                if r.is_zero() {
                    from_big(q)
                } else {
                    Value::Real(ratio_f64(&x, &y))
                }
            }
        }));
    }
    if let Some(r) = rat_small_arith(op, a, b) {
        return Some(r);
    }
    if is_exact_num(a) && is_exact_num(b) {
        let (x, y) = (rat(a)?, rat(b)?);
        return Some(Ok(match op {
            '+' => from_rat(x + y),
            '-' => from_rat(x - y),
            '*' => from_rat(x * y),
            _ => {
                if y.is_zero() {
                    return Some(Err("exact division by zero".into()));
                }
                from_rat(x / y)
            }
        }));
    }
    let (x, y) = (a.as_f64()?, b.as_f64()?);
    Some(Ok(Value::Real(match op {
        '+' => x + y,
        '-' => x - y,
        '*' => x * y,
        _ => x / y,
    })))
}

/// A machine integer or a rational whose numerator and denominator are machine
/// integers, as (numerator, denominator > 0); not `i64::MIN`, whose negation
/// overflows.
fn small_rat(v: &Value) -> Option<(i64, i64)> {
    match v {
        Value::Int(i) if *i != i64::MIN => Some((*i, 1)),
        Value::Rat(q) => Some((q.numer().to_i64().filter(|&n| n != i64::MIN)?, q.denom().to_i64()?)),
        _ => None,
    }
}

/// `x mod m` (0 <= it < m) for m > 0: one pass over `x`'s digits.
fn rem_small(x: &BigInt, m: i64) -> i64 {
    let r = (x % m).to_i64().expect("a remainder by a machine integer");
    if r < 0 {
        r + m
    } else {
        r
    }
}

/// [`arith`] of a rational `a` or `b` (`Value::Rat`) and a small one (a machine
/// integer, or a rational of two), without the general path's gcd of the
/// full-size numbers: num-bigint's gcd takes time quadratic in their length, so
/// a loop that adds to or scales a growing rational (a reversible `(*= x 1/3)
/// (+= x 1)`) took quadratic time per step. The gcds needed to keep the result
/// in lowest terms here involve the small operand only (Knuth, TAOCP 4.5.1), so
/// each is one remainder of a big number by a machine integer. `None` where
/// this does not apply.
fn rat_small_arith(op: char, a: &Value, b: &Value) -> Option<Result<Value, String>> {
    // (the big operand as p/q, the small one as c/d, and whether the big one
    // is on the left)
    let (big_q, (c, d), big_left) = match (a, b) {
        (Value::Rat(q), _) if small_rat(a).is_none() => (q, small_rat(b)?, true),
        (_, Value::Rat(q)) if small_rat(b).is_none() => (q, small_rat(a)?, false),
        _ => return None,
    };
    let (p, q) = (big_q.numer(), big_q.denom());
    let gcd = |x: i64, y: i64| x.gcd(&y);
    // p/q × c/d, in lowest terms: gcd(p, d) and gcd(q, c) divided out.
    let mul = |p: &BigInt, q: &BigInt, c: i64, d: i64| -> (BigInt, BigInt) {
        if c == 0 {
            return (BigInt::zero(), BigInt::from(1));
        }
        let g1 = gcd(rem_small(p, d), d);
        let g2 = gcd(rem_small(q, c.abs()), c.abs());
        (p / g1 * (c / g2), q / g2 * (d / g1))
    };
    // p/q + c/d, in lowest terms
    let add = |c: i64| -> (BigInt, BigInt) {
        let d1 = gcd(rem_small(q, d), d);
        if d1 == 1 {
            return (p * d + q * c, q * d);
        }
        let t = p * (d / d1) + q / d1 * c;
        let d2 = gcd(rem_small(&t, d1), d1);
        (t / d2, q / d1 * (d / d2))
    };
    let (n, m) = match op {
        '+' => add(c),
        '-' if big_left => add(-c),
        '-' => {
            let (n, m) = add(-c);
            (-n, m)
        }
        '*' => mul(p, q, c, d),
        '/' if big_left => {
            if c == 0 {
                return Some(Err("exact division by zero".into()));
            }
            // p/q ÷ c/d = p/q × d/c, the sign on the numerator
            mul(p, q, d * c.signum(), c.abs())
        }
        '/' => {
            // c/d ÷ p/q = q/p × c/d (p is not zero: a rational never is)
            let (q2, p2) = if p.is_negative() { (-q, -p) } else { (q.clone(), p.clone()) };
            mul(&q2, &p2, c, d)
        }
        _ => return None,
    };
    Some(Ok(from_rat(BigRational::new_raw(n, m))))
}

/// x / y as the nearest double, for machine integers: one IEEE division where
/// both convert exactly (no allocation), else [`ratio_f64`].
fn int_ratio_f64(x: i64, y: i64) -> f64 {
    const EXACT: u64 = 1 << 53;
    if x.unsigned_abs() <= EXACT && y.unsigned_abs() <= EXACT {
        return x as f64 / y as f64;
    }
    ratio_f64(&BigInt::from(x), &BigInt::from(y))
}

/// x / y as the nearest double, also when either is beyond a double's range (a
/// quotient of two huge integers, or of a huge one by a small one, can be finite).
fn ratio_f64(x: &BigInt, y: &BigInt) -> f64 {
    // Below 2^53 both convert exactly and one IEEE division rounds once; above, the
    // conversions would round first (2^53 + 1 becomes 2^53), so the quotient is taken
    // from the exact values.
    if x.bits() <= 53 && y.bits() <= 53 {
        return x.to_f64().unwrap_or(f64::NAN) / y.to_f64().unwrap_or(f64::NAN);
    }
    // Correctly rounded, whatever the sizes (num-rational's conversion).
    BigRational::new_raw(x.clone(), y.clone()).to_f64().unwrap_or(f64::NAN)
}

/// The square root of a non-negative exact n/d that is not a perfect square, as a
/// double, without going through a double of n/d (which can overflow or underflow):
/// sqrt(n/d) = sqrt(n d 2^256) / (d 2^128), the integer square root's error being
/// below 2^-128 relative.
fn exact_sqrt_f64(n: &BigInt, d: &BigInt) -> f64 {
    let num = ((n * d) << 256usize).sqrt();
    ratio_f64(&num, &(d << 128usize))
}

/// The natural logarithm of a positive exact integer of any size.
fn big_ln(b: &BigInt) -> f64 {
    let bits = b.bits();
    if bits <= 1000 {
        return b.to_f64().unwrap_or(f64::NAN).ln();
    }
    let shift = bits - 64;
    (b >> shift).to_f64().unwrap_or(f64::NAN).ln() + shift as f64 * std::f64::consts::LN_2
}

/// `log`: for exact numbers beyond a double's range (`(log (fact 200))`) it works on
/// the exact value rather than on its (infinite or zero) double.
pub fn log(a: &Value) -> Option<Value> {
    let q = match a {
        Value::Big(_) | Value::Rat(_) => rat(a)?,
        _ => return real_fn(f64::ln, a),
    };
    if q.is_negative() {
        // As for a negative double; its double may be -0.0, whose log is -inf.
        return Some(Value::Real(f64::NAN));
    }
    let f = rat_f64(&q);
    if f.is_finite() && f >= f64::MIN_POSITIVE {
        return Some(Value::Real(f.ln()));
    }
    Some(Value::Real(big_ln(q.numer()) - big_ln(q.denom())))
}

/// Numeric comparison; `None` if either is not a number, `Some(None)` for NaN.
pub fn compare(a: &Value, b: &Value) -> Option<Option<Ordering>> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(Some(x.cmp(y))),
        _ if is_exact(a) && is_exact(b) => Some(Some(big(a)?.cmp(&big(b)?))),
        (Value::Real(x), Value::Real(y)) => Some(x.partial_cmp(y)),
        _ if is_exact_num(a) && is_exact_num(b) => Some(Some(rat(a)?.cmp(&rat(b)?))),
        (Value::Rat(q), Value::Real(r)) | (Value::Real(r), Value::Rat(q)) => {
            let o = if r.is_nan() {
                None
            } else if r.is_infinite() {
                Some(if *r > 0.0 { Ordering::Less } else { Ordering::Greater })
            } else {
                Some((**q).cmp(&BigRational::from_float(*r)?))
            };
            Some(if matches!(a, Value::Real(_)) { o.map(Ordering::reverse) } else { o })
        }
        _ => {
            // Mixed exact/inexact: compare exactly where the double is finite.
            let (ex, r, flip) = match (a, b) {
                (Value::Real(r), e) => (e, *r, true),
                (e, Value::Real(r)) => (e, *r, false),
                _ => return None,
            };
            let e = big(ex)?;
            let o = if r.is_nan() {
                None
            } else if r.is_infinite() {
                Some(if r > 0.0 { Ordering::Less } else { Ordering::Greater })
            } else {
                let fl = r.floor();
                let fb = num_bigint::BigInt::from(fl as i128);
                let fb = if fl.abs() < 1e30 { fb } else { big_from_f64(fl) };
                match e.cmp(&fb) {
                    Ordering::Equal if r > fl => Some(Ordering::Less),
                    o => Some(o),
                }
            };
            Some(if flip { o.map(Ordering::reverse) } else { o })
        }
    }
}

fn big_from_f64(f: f64) -> BigInt {
    // f is an integral, finite double.
    let bits = f.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64 - 1075;
    let mant = (bits & ((1 << 52) - 1)) | (1 << 52);
    let m = BigInt::from(mant);
    let v = if exp >= 0 { m << exp as usize } else { m >> (-exp) as usize };
    if f < 0.0 {
        -v
    } else {
        v
    }
}

/// Sign test for `zero?`, `positive?`, `negative?`.
pub fn sign(a: &Value) -> Option<Option<Ordering>> {
    match a {
        Value::Int(i) => Some(Some(i.cmp(&0))),
        Value::Big(b) => Some(Some(if b.is_negative() { Ordering::Less } else { Ordering::Greater })),
        Value::Real(r) => Some(r.partial_cmp(&0.0)),
        Value::Rat(q) => Some(Some(if q.is_negative() { Ordering::Less } else { Ordering::Greater })),
        _ => None,
    }
}

/// `sqrt`: exact for perfect squares of exact integers, a double otherwise.
pub fn sqrt(a: &Value) -> Option<Value> {
    match a {
        Value::Int(_) | Value::Big(_) => {
            let b = big(a)?;
            if !b.is_negative() {
                let r = b.sqrt();
                if &r * &r == b {
                    return Some(from_big(r));
                }
            }
            // Above 2^53 the integer's double is already rounded, and its square root
            // can then miss the nearest double by one unit: work on the exact value.
            if !b.is_negative() && b.bits() > 53 {
                return Some(Value::Real(exact_sqrt_f64(&b, &BigInt::from(1))));
            }
            Some(Value::Real(a.as_f64()?.sqrt()))
        }
        Value::Real(r) => Some(Value::Real(r.sqrt())),
        Value::Rat(q) => {
            if !q.is_negative() {
                let (n, d) = (q.numer().sqrt(), q.denom().sqrt());
                if &n * &n == *q.numer() && &d * &d == *q.denom() {
                    return Some(from_rat(BigRational::new(n, d)));
                }
            }
            if q.is_negative() {
                return Some(Value::Real(f64::NAN));
            }
            Some(Value::Real(exact_sqrt_f64(q.numer(), q.denom())))
        }
        _ => None,
    }
}

/// A unary real function applied to a number.
pub fn real_fn(f: fn(f64) -> f64, a: &Value) -> Option<Value> {
    Some(Value::Real(f(a.as_f64()?)))
}

/// `atan` of y and x (atan2). Where an exact argument is beyond a double's range
/// (or so small that it rounds to zero) both are scaled by one power of two before
/// the conversion, so that `(atan #e1e400 #e2e400)` is atan(1/2), not atan2(inf, inf).
pub fn atan2(y: &Value, x: &Value) -> Option<f64> {
    let (fy, fx) = (y.as_f64()?, x.as_f64()?);
    let lost = |v: &Value, f: f64| matches!(v, Value::Big(_) | Value::Rat(_)) && (!f.is_finite() || f == 0.0);
    if !(lost(y, fy) || lost(x, fx)) || fy.is_nan() || fx.is_nan() {
        return Some(fy.atan2(fx));
    }
    // One is an exact number whose double lost it; the other is exact or a double.
    let exact = |v: &Value, f: f64| match v {
        Value::Real(_) if f.is_infinite() => None,
        Value::Real(_) => BigRational::from_float(f),
        _ => rat(v),
    };
    let (qy, qx) = match (exact(y, fy), exact(x, fx)) {
        (Some(qy), Some(qx)) => (qy, qx),
        // An infinite double dominates any finite exact number.
        _ => return Some(fy.atan2(fx)),
    };
    let log2 = |q: &BigRational| {
        if q.is_zero() {
            i64::MIN
        } else {
            q.numer().bits() as i64 - q.denom().bits() as i64
        }
    };
    let k = log2(&qy).max(log2(&qx));
    let scale = |q: BigRational, v: &Value, f: f64| {
        if matches!(v, Value::Real(_)) && f == 0.0 {
            return f; // a zero double keeps its sign: atan2(-0.0, x < 0) is -pi
        }
        let (n, d) = (q.numer().clone(), q.denom().clone());
        let (n, d) = if k >= 0 { (n, d << k as usize) } else { (n << (-k) as usize, d) };
        ratio_f64(&n, &d)
    };
    Some(scale(qy, y, fy).atan2(scale(qx, x, fx)))
}

/// The exact zero of an exact number, `0.0` of a double.
pub fn zero_like(a: &Value) -> Value {
    match a {
        Value::Real(_) => Value::Real(0.0),
        _ => Value::Int(0),
    }
}

/// Numeric equality for the test checker (exact/inexact compare by value).
pub fn num_equal(a: &Value, b: &Value) -> bool {
    matches!(compare(a, b), Some(Some(Ordering::Equal)))
}

#[cfg(test)]
mod tests;
