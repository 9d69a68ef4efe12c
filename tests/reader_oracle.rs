//! Oracle test: random S-expressions in the subset that both VLAD's reader and
//! `lexpr` 0.2.7 understand must read to the same data.
//!
//! The subset: integers, simple decimals (`-12.5`, no exponent: lexpr's default
//! `fast-float-parsing` divides the significand by a power of ten, which is
//! correctly rounded only while both are exact, i.e. fewer than ~15 digits),
//! booleans written `#t`/`#f` (lexpr reads `#true` as `#t` followed by the symbol
//! `rue`), strings with `\\ \" \n \t` escapes, ASCII symbols, proper and dotted
//! lists in `()` or `[]`, and the quote abbreviations, separated by whitespace and
//! `;` comments (lexpr knows neither `#| |#` nor `#;`).

use lexpr::Value;
use proptest::prelude::*;
use vlad::datum::{Datum, DatumKind};

/// A generated S-expression.
#[derive(Clone, Debug)]
enum Sx {
    Int(i64),
    /// Decimal text such as `-12.034`.
    Dec(String),
    Bool(bool),
    Str(String),
    Sym(String),
    /// Items, optional dotted tail, brackets instead of parentheses.
    List(Vec<Sx>, Option<Box<Sx>>, bool),
    Quote(&'static str, Box<Sx>),
}

/// The comparable form both readers' output is converted to.
#[derive(Clone, Debug, PartialEq)]
enum Norm {
    Int(i64),
    Real(u64),
    Bool(bool),
    Str(String),
    Sym(String),
    /// Proper list (`None`) or dotted list; like Scheme, a list tail is spliced in.
    List(Vec<Norm>, Option<Box<Norm>>),
    Other(String),
}

const SEPS: [&str; 6] = [" ", "\n", "\t", "  ", " ; comment ( \" ;\n", "\r\n"];

/// Prints `sx` into `out`, taking separator choices from `seps` in turn.
fn print(sx: &Sx, out: &mut String, seps: &[u8], k: &mut usize) {
    let sep = |out: &mut String, k: &mut usize| {
        out.push_str(SEPS[seps[*k % seps.len()] as usize % SEPS.len()]);
        *k += 1;
    };
    match sx {
        Sx::Int(n) => out.push_str(&n.to_string()),
        Sx::Dec(s) => out.push_str(s),
        Sx::Bool(b) => out.push_str(if *b { "#t" } else { "#f" }),
        Sx::Str(s) => {
            out.push('"');
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    '\t' => out.push_str("\\t"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Sx::Sym(s) => out.push_str(s),
        Sx::List(items, tail, brackets) => {
            out.push(if *brackets { '[' } else { '(' });
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    sep(out, k);
                }
                print(item, out, seps, k);
            }
            if let Some(t) = tail {
                sep(out, k);
                out.push('.');
                sep(out, k);
                print(t, out, seps, k);
            }
            if *brackets && (out.ends_with('+') || out.ends_with('-')) {
                // lexpr 0.2.7 reads a `+`/`-` directly followed by `]` as a bad number.
                out.push(' ');
            }
            out.push(if *brackets { ']' } else { ')' });
        }
        Sx::Quote(prefix, x) => {
            out.push_str(prefix);
            print(x, out, seps, k);
        }
    }
}

fn from_vlad(d: &Datum) -> Norm {
    match &d.kind {
        DatumKind::Int(n) => Norm::Int(*n),
        DatumKind::Big(n) => Norm::Other(format!("big {n}")),
        DatumKind::Rat(q) => Norm::Other(format!("rat {q}")),
        DatumKind::Real(x) => Norm::Real(x.to_bits()),
        DatumKind::Bool(b) => Norm::Bool(*b),
        DatumKind::Str(s) => Norm::Str(s.to_string()),
        DatumKind::Symbol(s) => Norm::Sym(s.to_string()),
        // Deliberately not normalized: the reader itself must splice list tails.
        DatumKind::List(items, tail) => {
            Norm::List(items.iter().map(from_vlad).collect(), tail.as_deref().map(|t| Box::new(from_vlad(t))))
        }
    }
}

fn from_lexpr(v: &Value) -> Norm {
    match v {
        Value::Number(n) if n.is_f64() => Norm::Real(n.as_f64().unwrap().to_bits()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Norm::Int(i),
            None => Norm::Other(format!("number {n}")),
        },
        Value::Bool(b) => Norm::Bool(*b),
        Value::String(s) => Norm::Str(s.to_string()),
        Value::Symbol(s) => Norm::Sym(s.to_string()),
        Value::Null => Norm::List(vec![], None),
        Value::Cons(_) => {
            let mut items = vec![];
            let mut cur = v;
            while let Value::Cons(c) = cur {
                items.push(from_lexpr(c.car()));
                cur = c.cdr();
            }
            let tail = match cur {
                Value::Null => None,
                t => Some(Box::new(from_lexpr(t))),
            };
            Norm::List(items, tail)
        }
        other => Norm::Other(format!("{other:?}")),
    }
}

fn symbol() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-zA-Z][a-zA-Z0-9!$%&*/:<=>?^_~+.-]{0,8}",
        1 => prop::sample::select(vec!["+", "-", "...", "->x", "<=", "*", "/", "!", "a.b", "-a", "+b"])
            .prop_map(String::from),
    ]
}

fn decimal() -> impl Strategy<Value = String> {
    (any::<bool>(), 0u32..1_000_000, "[0-9]{1,6}")
        .prop_map(|(neg, int, frac)| format!("{}{int}.{frac}", if neg { "-" } else { "" }))
}

fn atom() -> impl Strategy<Value = Sx> {
    prop_oneof![
        3 => (-1000i64..1000).prop_map(Sx::Int),
        1 => any::<i64>().prop_map(Sx::Int),
        2 => decimal().prop_map(Sx::Dec),
        1 => any::<bool>().prop_map(Sx::Bool),
        1 => "[a-z λ\\\\\"\n\t]{0,6}".prop_map(Sx::Str),
        4 => symbol().prop_map(Sx::Sym),
    ]
}

fn sexpr() -> impl Strategy<Value = Sx> {
    // Depth is at most 10 (< 20).
    atom().prop_recursive(10, 64, 6, |inner| {
        prop_oneof![
            4 => (prop::collection::vec(inner.clone(), 0..6), any::<bool>())
                .prop_map(|(items, br)| Sx::List(items, None, br)),
            // lexpr 0.2.7 only accepts `)` after a dotted tail, so `[a . b]` is not generated.
            2 => (prop::collection::vec(inner.clone(), 1..5), inner.clone())
                .prop_map(|(items, tail)| Sx::List(items, Some(Box::new(tail)), false)),
            1 => (prop::sample::select(vec!["'", "`", ",", ",@"]), inner)
                .prop_map(|(q, x)| Sx::Quote(q, Box::new(x))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn reader_agrees_with_lexpr(
        data in prop::collection::vec(sexpr(), 1..4),
        seps in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let mut text = String::new();
        let mut k = 0;
        for (i, d) in data.iter().enumerate() {
            if i > 0 {
                text.push_str(if i % 2 == 0 { "\n" } else { " ; between\n " });
            }
            print(d, &mut text, &seps, &mut k);
        }

        let ours: Vec<Norm> = match vlad::reader::read_all(&text, 0) {
            Ok(v) => v.iter().map(from_vlad).collect(),
            Err(e) => panic!("vlad failed on {text:?}: {e:?}"),
        };
        let theirs: Vec<Norm> = match lexpr::Parser::from_str(&text).value_iter().collect::<Result<Vec<_>, _>>() {
            Ok(v) => v.iter().map(from_lexpr).collect(),
            Err(e) => panic!("lexpr failed on {text:?}: {e}"),
        };
        prop_assert_eq!(&ours, &theirs, "reading {:?}", text);

        // `lexpr::from_str` (one datum, default options) on the first datum alone.
        let mut first = String::new();
        print(&data[0], &mut first, &seps, &mut 0);
        let v = lexpr::from_str(&first).map_err(|e| TestCaseError::fail(format!("lexpr: {e} on {first:?}")))?;
        let ours = vlad::reader::read_all(&first, 0).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(ours.len(), 1);
        prop_assert_eq!(from_vlad(&ours[0]), from_lexpr(&v));
    }
}

#[test]
fn lexpr_conventions_this_oracle_relies_on() {
    // `#t`/`#f` are booleans; `()` and `[]` are the empty list; dotted list tails are spliced.
    // (lexpr rejects `[a . b]`: after a dotted tail it accepts only `)`.)
    assert!(lexpr::from_str("[a . b]").is_err());
    assert_eq!(lexpr::from_str("#t").unwrap(), Value::Bool(true));
    assert_eq!(lexpr::from_str("#f").unwrap(), Value::Bool(false));
    assert_eq!(from_lexpr(&lexpr::from_str("[]").unwrap()), Norm::List(vec![], None));
    let v = lexpr::from_str("(a . (b . c))").unwrap();
    assert_eq!(
        from_lexpr(&v),
        Norm::List(vec![Norm::Sym("a".into()), Norm::Sym("b".into())], Some(Box::new(Norm::Sym("c".into()))))
    );
    let ours = vlad::reader::read_all("(a . (b . c))", 0).unwrap();
    assert_eq!(from_vlad(&ours[0]), from_lexpr(&v));
}
