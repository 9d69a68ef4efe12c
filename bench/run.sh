#!/usr/bin/env bash
# Run vlad and every installed peer (bench/peers/install.sh installs them) on
# the workloads of bench/peers and print a table of median CPU times, the
# ratio peer/vlad, and vlad's gradient/primal time and metered-operation ratios.
#   bench/run.sh            standard profile (about 10 minutes on 2 cores)
#   bench/run.sh --quick    one repetition, skips the slowest runs
#   bench/run.sh --full     adds the slow peer runs (autograd/torch on every saddle variant, ...)
#   bench/run.sh --rounds 3 vlad and the peers alternately, three times; medians over the rounds
#   bench/run.sh --help     all options (--only REGEX, --peers LIST, --reps N, --rounds K, --json FILE, --md FILE,
#                           --vlad-clock self|process: vlad's own `--time` report, the default, or the whole process)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release --quiet
py="python3"
[ -x bench/peers/.venv/bin/python ] && py="bench/peers/.venv/bin/python"
exec "$py" bench/peers/bench.py "$@"
