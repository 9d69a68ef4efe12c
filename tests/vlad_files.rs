//! Runs every `tests/vlad/*.vlad` file through the checker behind `vlad test`
//! (`EXPR ===> EXPECTED` annotations), with `tests/vlad_include` on the include
//! search path as `-I` would put it and a fixed standard input for `read-real`,
//! and fails listing every failing annotation.

use std::path::{Path, PathBuf};
use vlad::check::{check_file, expand_paths, Report};
use vlad::toplevel::Session;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// What `read-real` reads in every file (see tests/vlad/read_real.vlad).
const INPUT: &str = "2.5 -7\n\n  100000000000000000000\n";

/// Checks one file in a fresh session; `write` output is discarded.
fn check(path: &Path) -> Report {
    let include = tests_dir().join("vlad_include");
    let new_session = move || {
        let mut s = Session::new();
        s.include_dirs = vec![include.clone()];
        s.m.out = Box::new(std::io::sink());
        s.m.input = Box::new(std::io::Cursor::new(INPUT));
        s
    };
    let mut report = Report::default();
    check_file(&new_session, path, &mut report);
    report
}

#[test]
fn vlad_files_pass() {
    let files = expand_paths(&[tests_dir().join("vlad")]);
    assert!(files.len() >= 10, "expected the .vlad test files, found {files:?}");
    // One thread per file (sessions are not shared); a large stack for deep data.
    let reports: Vec<(PathBuf, Report)> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let f = f.clone();
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn_scoped(s, move || {
                        let r = check(&f);
                        (f, r)
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("checker panicked")).collect()
    });
    let mut passed = 0;
    let mut failures = Vec::new();
    for (f, r) in &reports {
        passed += r.passed;
        failures.extend(r.failures.iter().cloned());
        if r.passed == 0 && r.failed == 0 {
            failures.push(format!("{}: no annotations were checked", f.display()));
        }
    }
    assert!(failures.is_empty(), "{} passed, {} failed:\n{}", passed, failures.len(), failures.join("\n"));
}

/// Checks `text` as a file `wrong-N.vlad` in a scratch directory; returns the
/// report and the file's name as the report shows it.
fn check_text(n: u32, text: &str) -> (Report, String) {
    let dir = std::env::temp_dir().join(format!("vlad-files-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(format!("wrong-{n}.vlad"));
    std::fs::write(&f, text).unwrap();
    let r = check(&f);
    let _ = std::fs::remove_dir_all(&dir);
    (r, f.display().to_string())
}

#[test]
fn an_expression_that_does_not_compile_is_one_failure() {
    // (fact 25) is used before its definition: that check fails, the others still run
    let (r, name) = check_text(
        1,
        "(+ 1 2) ===> 4\n(car '(1)) ===> 1\n(fact 25) ===> 1\n(+ 1 1) ===> 2\n\
         (define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))\n(fact 3) ===> 6\n",
    );
    let expected = [
        format!("{name}:1: expected 4, got 3"),
        format!("{name}:3: expected 1, got error: unbound variable `fact`"),
    ];
    assert_eq!(r.failures, expected);
    assert_eq!((r.passed, r.failed), (3, 2));
}

/// A file the reader cannot read is one failure.
#[test]
fn a_file_that_does_not_read_is_one_failure() {
    let (r, name) = check_text(3, "(+ 1 2) ===> 3\n(+ 1\n");
    assert_eq!(r.failures, [format!("{name}:2:1: error: unclosed list (missing `)`)")]);
    assert_eq!((r.passed, r.failed), (0, 1));
}

/// The checker really fails: each wrong expectation is one failure line.
#[test]
fn each_wrong_expectation_is_one_failure() {
    let (r, name) = check_text(
        2,
        "(define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))\n\
         (+ 1 2) ===> 4\n(list 1 2) ===> (1 2 3)\n(= 1 2)\n(car '(1)) ===> (error \"\")\n\
         (car 5) ===> (error \"^zzz\")\n(+ 1 1) ===> 2\n\
         (+ (fact 25) 1) ===> 15511210043330985984000000\n(fact 25) ===> 15511210043330985984000000\n",
    );
    let expected = [
        format!("{name}:2: expected 4, got 3"),
        format!("{name}:3: expected (1 2 3), got (1 2)"),
        format!("{name}:4: expected #t, got #f"),
        format!("{name}:5: expected an error matching \"\", got 1"),
        format!(
            "{name}:6: expected an error matching \"^zzz\", got error: pattern mismatch: expected a pair, got 5 (an exact integer), for the pattern `(cons a d)` of `car`"
        ),
        // big integers compare exactly: 25! + 1 is not 25!
        format!("{name}:8: expected 15511210043330985984000000, got 15511210043330985984000001"),
    ];
    assert_eq!(r.failures, expected);
    assert_eq!((r.passed, r.failed), (2, 6));
}

/// An infinity matches only the same infinity: not a finite number (inf <= 1e-10 * inf
/// made the relative test accept any), and not the other infinity.
#[test]
fn infinities_match_only_themselves() {
    let (r, name) = check_text(
        4,
        "(log 0.0) ===> -863.2\n(/ 1.0 0) ===> 7\n(/ 1.0 0) ===> -inf.0\n(/ -1.0 0) ===> -inf.0\n\
         (/ 1.0 0) ===> +inf.0\n(/ 0.0 0) ===> +nan.0\n(/ 0.0 0) ===> 1\n(* 1e300 1e10) ===> 1e308\n",
    );
    let expected = [
        format!("{name}:1: expected -863.2, got -inf.0"),
        format!("{name}:2: expected 7, got +inf.0"),
        format!("{name}:3: expected -inf.0, got +inf.0"),
        format!("{name}:7: expected 1, got +nan.0"),
        format!("{name}:8: expected 1e308, got +inf.0"),
    ];
    assert_eq!(r.failures, expected);
    assert_eq!((r.passed, r.failed), (3, 5));
}

/// A packed vector (printed `(vector x ...)`) or matrix (`(matrix (x ...) ...)`)
/// matches the list `list-of` gives of it, as well as its printed form; not a list
/// of other numbers, of another length, or of a matrix's elements unrowed.
#[test]
fn a_vector_matches_the_list_of_its_numbers() {
    let (r, name) = check_text(
        5,
        "(vector-of (list 1 2 3)) ===> (1 2 3)\n(vector-of (list 1 2 3)) ===> (vector 1 2 3)\n\
         (vector-of (list (list 1 2) (list 3 4))) ===> ((1 2) (3 4))\n(vector-of '()) ===> ()\n\
         (perturb (vector-of (list 1 2))) ===> (perturbation (1 2))\n\
         (vector-of (list 1 2 3)) ===> (1 2)\n(vector-of (list 1 2 3)) ===> (1 2 4)\n\
         (vector-of (list (list 1 2) (list 3 4))) ===> (1 2 3 4)\n(vector-of (list 1 2)) ===> (vector 1 3)\n",
    );
    let expected = [
        format!("{name}:6: expected (1 2), got (vector 1.0 2.0 3.0)"),
        format!("{name}:7: expected (1 2 4), got (vector 1.0 2.0 3.0)"),
        format!("{name}:8: expected (1 2 3 4), got (matrix (1.0 2.0) (3.0 4.0))"),
        format!("{name}:9: expected (vector 1 3), got (vector 1.0 2.0)"),
    ];
    assert_eq!(r.failures, expected);
    assert_eq!((r.passed, r.failed), (5, 4));
    // so does a vector or matrix in a list's tail (printed `(1 . (vector 2.0 3.0))`)
    let (r, name) = check_text(
        50,
        "(cons 1 (vector-of (list 2 3))) ===> (1 2 3)\n(cons 1 (vector-of (list 2 3))) ===> (1 . (vector 2 3))\n\
         (cons 1 (vec-reshape (vector-of (list 2 3)) 1 2)) ===> (1 (2 3))\n(cons 1 (vector-of '())) ===> (1)\n\
         (list 0 (cons 1 (vector-of (list 2)))) ===> (0 (1 2))\n\
         (cons 1 (vector-of (list 2 3))) ===> (1 2 4)\n(cons 1 (vector-of (list 2 3))) ===> (1 2)\n",
    );
    let expected = [
        format!("{name}:6: expected (1 2 4), got (1 . (vector 2.0 3.0))"),
        format!("{name}:7: expected (1 2), got (1 . (vector 2.0 3.0))"),
    ];
    assert_eq!(r.failures, expected);
    assert_eq!((r.passed, r.failed), (5, 2));
}
