//! The `vlad` command line.

// AD workloads allocate and free many small values (pairs, closures, lazy
// tags); mimalloc is markedly faster at that than the system allocator. Set
// here, for the program only: library users (and benchmarks that count
// allocations) choose their own.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(vlad::cli::main());
}
