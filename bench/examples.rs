//! Benchmarks of the nested-AD examples: the saddle point (examples/saddle.vlad)
//! and the particle (examples/particle.vlad), each in the four combinations of
//! forward (F) and reverse (R) mode for the outer and inner derivatives.
//! Each iteration runs the whole optimisation; transforms are cached after the
//! first run, so this measures the steady state.
//!
//! `cargo bench --bench examples` (or `-- --test` to run each once).

// The program's own allocator (src/alloc.rs: mimalloc with a cache of small blocks),
// so that these time what `vlad` runs.
#[global_allocator]
static ALLOC: vlad::alloc::MiMalloc = vlad::alloc::MiMalloc;

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::Path;
use std::time::Duration;
use vlad::toplevel::Session;

const MODES: [(&str, &str, &str); 4] = [
    ("FF", "gradient-F", "gradient-F"),
    ("FR", "gradient-F", "gradient-R"),
    ("RF", "gradient-R", "gradient-F"),
    ("RR", "gradient-R", "gradient-R"),
];

/// A session with an example's definitions compiled (its expressions are not run).
fn session_with(file: &str) -> Session {
    let mut s = Session::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(file);
    let items = s.read_file(&path).unwrap_or_else(|e| panic!("{}: {}", file, e.render(&s.sources)));
    if let Err(e) = s.compile(items) {
        panic!("{}: {}", file, e.render(&s.sources));
    }
    s
}

fn bench_example(c: &mut Criterion, file: &str, group: &str, call: &str) {
    let mut s = session_with(file);
    let mut g = c.benchmark_group(group);
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(5));
    for (name, outer, inner) in MODES {
        let expr = format!("({} {} {})", call, outer, inner);
        let thunk = s.compile_expr(&expr, "<bench>").unwrap_or_else(|e| panic!("{}: {}", expr, e.message));
        g.bench_function(name, |b| {
            b.iter(|| {
                std::hint::black_box(
                    s.run_thunk(&thunk).unwrap_or_else(|e| panic!("{}: {}", expr, e.message)),
                )
            })
        });
    }
    g.finish();
}

fn saddle(c: &mut Criterion) {
    bench_example(c, "saddle.vlad", "saddle", "saddle");
}

fn particle(c: &mut Criterion) {
    bench_example(c, "particle.vlad", "particle", "steer");
}

criterion_group!(benches, saddle, particle);
criterion_main!(benches);
