#!/usr/bin/env bash
# Fuzz smoke: runs every fuzz target for a short time (default 30 s each),
# seeded from the repository's examples; exits non-zero on the first crash.
# For CI (.ci/run) and for a quick local check. Needs the nightly toolchain
# and cargo-fuzz (`cargo install cargo-fuzz`).
#
#   fuzz/smoke.sh            # 30 s per target
#   fuzz/smoke.sh 600        # 10 min per target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"

# target, then the directories its seeds come from
targets=(
  "directory_document directory/examples"
  "directory_release_target directory/examples"
)

for entry in "${targets[@]}"; do
  read -r target seeds <<<"$entry"
  mkdir -p "fuzz/corpus/$target"
  printf '\n== fuzz %s for %s s\n' "$target" "$seconds"
  # shellcheck disable=SC2086 # $seeds is a list of directories
  cargo +nightly fuzz run "$target" "fuzz/corpus/$target" $seeds -- \
    -max_total_time="$seconds" -dict=fuzz/directory.dict -max_len=4096 -print_final_stats=1
done
