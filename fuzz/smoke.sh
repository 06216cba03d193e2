#!/usr/bin/env bash
# Fuzz smoke: runs every fuzz target for a short time (default 30 s each),
# seeded from the repository's examples; exits non-zero on the first crash.
# For CI (.ci/run) and for a quick local check. Needs the nightly toolchain
# and cargo-fuzz (`cargo install cargo-fuzz`). The targets, their seeds and
# the long-run commands: fuzz/README.md.
#
#   fuzz/smoke.sh                      # 30 s per target
#   fuzz/smoke.sh 600                  # 10 min per target
#   fuzz/smoke.sh 30 sim_trace         # only the targets named
#
# FUZZ_SANITIZER picks cargo-fuzz's sanitizer (default `address`). CI uses
# `none`: the workspace forbids unsafe code, so AddressSanitizer mostly
# instruments dependencies, and the uninstrumented build is about half the
# size and time. FUZZ_DEV=1 builds without optimizations (`cargo fuzz
# --dev`, same debug assertions): CI's short smoke spends its time in the
# build, which this makes several times shorter; long runs keep the
# optimized default.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
sanitizer="${FUZZ_SANITIZER:-address}"
build=()
if [ "${FUZZ_DEV:-0}" = 1 ]; then
  build=(--dev)
fi
shift || true

# target, its dictionary, its largest input in bytes, then the directories
# its seeds come from
targets=(
  "directory_document directory.dict 4096 directory/examples"
  "directory_release_target directory.dict 4096 directory/examples"
  "catalog_cursor catalog_cursor.dict 512 fuzz/seeds/catalog_cursor"
  "sim_scenario sim_scenario.dict 16384 scenarios"
  "qualify_contract qualify_contract.dict 16384 benches/environments"
  "sim_trace sim_trace.dict 262144 fuzz/seeds/sim_trace"
)

for entry in "${targets[@]}"; do
  read -r target dict max_len seeds <<<"$entry"
  if (($# > 0)) && [[ " $* " != *" $target "* ]]; then
    continue
  fi
  mkdir -p "fuzz/corpus/$target"
  printf '\n== fuzz %s for %s s\n' "$target" "$seconds"
  # shellcheck disable=SC2086 # $seeds is a list of directories
  cargo +nightly fuzz run "${build[@]}" --sanitizer "$sanitizer" "$target" "fuzz/corpus/$target" $seeds -- \
    -max_total_time="$seconds" -dict="fuzz/$dict" -max_len="$max_len" -print_final_stats=1
done
