//! The `vlad` command line.

fn main() {
    std::process::exit(vlad::cli::main());
}
