#!/usr/bin/env bash
# Builds what the GPU checks need into one folder, for a GPU machine that has the NVIDIA
# driver but no Rust: stripped release binaries of vlad, of every test binary (the
# vector tests first, the rest with the GPU present) and of the vector benchmarks
# (bench/vectors.rs), the acceptance
# files, and DIR/run.sh, which runs them there, then the examples on both backends and
# bench/peers/gpu/run.sh (vector HVPs against JAX and torch.func, where installed).
#
#   tools/gpu-bundle.sh [DIR]      # here; DIR (default .gpu, git-ignored) must be a
#                                  # folder directly inside the checkout
#   bash DIR/run.sh [LOGDIR]       # there, in a copy of this checkout; logs to LOGDIR
#                                  # (QUICK=1: no benchmarks)
#
# The test binary looks for the checkout and the vlad binary at the absolute paths it
# was built at (cargo's CARGO_MANIFEST_DIR and CARGO_BIN_EXE_vlad); run.sh links that
# path to the copy it runs in when the two differ, and puts vlad where the tests expect it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=${1:-.gpu}
mkdir -p "$dir"
exe() { grep -o '(target/release/deps/[^)]*)' | tr -d '()' | tail -1; }
cargo build --release
b=$(cargo bench --bench vectors --no-run 2>&1 | grep Executable | exe)
strip -o "$dir/vlad" target/release/vlad
strip -o "$dir/b-vectors" "$b"
# every test binary: t-vectors (tests/vectors.rs), t-cli, ..., t-unit (the library's unit tests)
cargo test --release --no-run 2>&1 | awk '$1 == "Executable" { gsub(/[()]/, "", $NF); print $(NF-1), $NF }' |
  while read -r what path; do
  case $what in
    tests/*) name=$(basename "$what" .rs); [ "$name" = main ] && name=$(basename "$(dirname "$what")") ;;
    src/lib.rs) name=unit ;;
    *) continue ;;
  esac
  strip -o "$dir/t-$name" "$path"
done
# the acceptance files beside the checkout (or the project's copy of the vectors one)
mkdir -p "$dir/acceptance"
if [ -d "$root/../shared/acceptance" ]; then cp "$root"/../shared/acceptance/*.vlad "$dir/acceptance/"
else cp "$root/tests/vlad/vectors.vlad" "$dir/acceptance/"; fi
cat >"$dir/run.sh" <<EOF
#!/usr/bin/env bash
# Written by tools/gpu-bundle.sh: the GPU checks, from a copy of the checkout.
set -u
built=$root
dir=\$(cd "\$(dirname "\$0")" && pwd)
here=\$(cd "\$dir/.." && pwd)
logs=\${1:-\$dir/logs}
mkdir -p "\$logs"
if [ "\$here" != "\$built" ]; then mkdir -p "\$(dirname "\$built")" && ln -sfn "\$here" "\$built"; fi
[ -x "\$here/target/release/vlad" ] || { mkdir -p "\$here/target/release" && cp "\$dir/vlad" "\$here/target/release/vlad"; }
cd "\$built"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step() {
  local name=\$1; shift; echo "=== \$name: \$*"
  local s=\$EPOCHREALTIME; timeout 300 "\$@" >"\$logs/\$name.log" 2>&1; local rc=\$?
  echo "rc=\$rc, \$(awk "BEGIN{printf \"%.2f\", \$EPOCHREALTIME-\$s}") s"; tail -n 4 "\$logs/\$name.log"
}
step tests "\$dir/t-vectors"
for t in "\$dir"/t-*; do
  [ "\$t" = "\$dir/t-vectors" ] || step "\$(basename "\$t")" "\$t"
done
step vlad-test target/release/vlad test "\$dir"/acceptance/*.vlad examples/ examples/reversible
step acceptance-cuda target/release/vlad test --backend cuda "\$dir/acceptance/vectors.vlad"
for ex in mlp least_squares; do
  for be in cuda cpu; do step "\$ex-\$be" target/release/vlad --backend \$be examples/\$ex.vlad; done
done
[ -n "\${QUICK:-}" ] && exit 0   # (QUICK=1: the tests and examples only)
step bench "\$dir/b-vectors" --bench 'gradient n=10000000|gpu chain'
grep -E '^(gradient|gpu chain)|time:|thrpt:' "\$logs/bench.log"
step hvp-peers bash bench/peers/gpu/run.sh target/release/vlad
cat "\$logs/hvp-peers.log"
EOF
chmod +x "$dir/run.sh"
du -sh "$dir"
