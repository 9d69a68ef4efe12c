#!/bin/bash
# A profile-guided build of vlad (rustc's -Cprofile-generate / -Cprofile-use,
# with LLVM's machine function splitting), to measure how much of a workload's
# time goes to code layout: instruction-cache misses. An experiment for
# bench/peers/README.md ("Session 53"), not the build the README documents.
#
#   tools/pgo.sh [PROGRAM.vlad ...]
#
# Trains on `vlad test` of examples/ and tests/vlad/, then on each PROGRAM run
# (run from its own directory, so that its includes resolve); builds
# target/pgo-gen/release/vlad (instrumented), then target/pgo/release/vlad.
# Needs rustup's llvm-tools (`rustup component add llvm-tools`). Compare the
# result with `tools/abtime.py` and with valgrind's
# `--tool=cachegrind --cache-sim=yes` (its "I1 misses").
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
[ -x "$profdata" ] || { echo "pgo: $profdata not found (rustup component add llvm-tools)" >&2; exit 1; }
data="$root/target/pgo-data"
rm -rf "$data"
CARGO_TARGET_DIR=target/pgo-gen RUSTFLAGS="-Cprofile-generate=$data" cargo build --release
gen="$root/target/pgo-gen/release/vlad"
"$gen" test examples tests/vlad > /dev/null || true
for p in "$@"; do
  (cd "$(dirname "$p")" && "$gen" "$(basename "$p")" > /dev/null) || true
done
"$profdata" merge -o "$data/merged.profdata" "$data"
CARGO_TARGET_DIR=target/pgo \
  RUSTFLAGS="-Cprofile-use=$data/merged.profdata -Cllvm-args=-enable-split-machine-functions" \
  cargo build --release
echo "pgo: target/pgo/release/vlad"
