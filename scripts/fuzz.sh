#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) on the stable toolchain.
#
#   bash scripts/fuzz.sh TARGET SECONDS     # fuzz one target for SECONDS
#   bash scripts/fuzz.sh all SECONDS        # every target, one after the other
#   bash scripts/fuzz.sh coverage TARGET    # the functions its corpus reaches (-print_coverage)
#   bash scripts/fuzz.sh seeds              # remake fuzz/corpus/ (fuzz/seeds.sh)
#   bash scripts/fuzz.sh list
# Targets: luks1 luks2 nbd cipher_spec cli_values (harnesses in fuzz/src/). PARALLEL=2 runs
# `all` two targets at a time.
#
# Stable, not nightly: cargo-fuzz's default build asks for -Zsanitizer=address, a nightly
# flag. With `--sanitizer none` it passes only stable codegen options
# (-Cpasses=sancov-module and -Cllvm-args=-sanitizer-coverage-*: inline 8-bit counters, the
# PC table, compare tracing) and libfuzzer-sys compiles libFuzzer with the system C++
# compiler, so the fuzzing is coverage-guided with no nightly feature (no RUSTC_BOOTSTRAP
# either). The build is cargo-fuzz's default: release, with debug assertions and overflow
# checks. Without ASan, memory errors are caught only in safe code (all of it but the
# crypto crate's SIMD backends, which the cipher_spec target checks against the portable
# backend instead).
#
# Each run reads the committed seeds (fuzz/corpus/TARGET, read-only) and keeps what it
# finds in target/fuzz/corpus/TARGET; a crash is written to target/fuzz/artifacts/TARGET/
# and the run fails. A crash becomes a regression input: copy it to
# fuzz/regressions/TARGET/ under a name that says what it broke; `cargo test -p
# sectorcrypt-fuzz` (in scripts/test.sh) replays every corpus and regression input on
# stable. The summary line of each run (executions, corpus, coverage) is printed at the end
# and kept in target/fuzz/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(luks1 luks2 nbd cipher_spec cli_values)

# cargo-fuzz, installed here when missing (crates.io, pinned).
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

# Largest input per target: a LUKS2 seed with whole keyslot material is 96 KiB.
max_len() {
    case "$1" in
    luks1) echo 131072 ;;
    luks2) echo 262144 ;;
    nbd) echo 65536 ;;
    cipher_spec) echo 16384 ;;
    *) echo 4096 ;;
    esac
}

build() {
    cargo fuzz build --sanitizer none --features libfuzzer "$@"
}

binary() {
    echo "target/x86_64-unknown-linux-gnu/release/$1"
}

run() {
    local t=$1 secs=$2
    local work=target/fuzz/corpus/$t art=target/fuzz/artifacts/$t log=target/fuzz/$t.log
    mkdir -p "$work" "$art"
    echo "fuzzing $t for ${secs}s (log: $log)"
    local rc=0
    "$(binary "$t")" "$work" "fuzz/corpus/$t" -max_total_time="$secs" -max_len="$(max_len "$t")" \
        -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" \
        >"$log" 2>&1 || rc=$?
    summary "$t"
    if [ "$rc" != 0 ]; then
        tail -40 "$log"
        echo "$t: CRASH or error (exit $rc); inputs in $art/"
        return 1
    fi
}

# One line per run: executions, rate, corpus entries and bytes, edges (cov), features (ft).
summary() {
    local t=$1 log=target/fuzz/$1.log
    local last runs rate
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "$t: executions ${runs:-?} (${rate:-?}/s); $(echo "$last" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*')"
}

case "${1:-}" in
list) printf '%s\n' "${targets[@]}" ;;
seeds) bash fuzz/seeds.sh ;;
coverage)
    t=${2:?usage: scripts/fuzz.sh coverage TARGET}
    build "$t"
    mkdir -p "target/fuzz/corpus/$t"
    # Every input once; COVERED_FUNC lines name the functions reached, with file:line.
    "$(binary "$t")" -runs=0 -print_coverage=1 "target/fuzz/corpus/$t" "fuzz/corpus/$t" \
        "fuzz/regressions/$t" 2>&1 | grep -E '^COVERED_FUNC|^UNCOVERED_FUNC' \
        >"target/fuzz/$t.coverage"
    echo "target/fuzz/$t.coverage: $(grep -c ^COVERED_FUNC "target/fuzz/$t.coverage") functions reached"
    ;;
all)
    secs=${2:?usage: scripts/fuzz.sh all SECONDS}
    build
    failed=0
    if [ "${PARALLEL:-1}" -ge 2 ]; then
        for ((i = 0; i < ${#targets[@]}; i += 2)); do
            pids=()
            for t in "${targets[@]:i:2}"; do
                run "$t" "$secs" &
                pids+=($!)
            done
            for p in "${pids[@]}"; do wait "$p" || failed=1; done
        done
    else
        for t in "${targets[@]}"; do run "$t" "$secs" || failed=1; done
    fi
    echo "summary:"
    for t in "${targets[@]}"; do summary "$t"; done
    exit "$failed"
    ;;
"" | -h | --help) sed -n '2,10p' "$0" ;;
*)
    t=$1
    secs=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
    [[ " ${targets[*]} " == *" $t "* ]] || { echo "unknown target $t (scripts/fuzz.sh list)"; exit 2; }
    build "$t"
    run "$t" "$secs"
    ;;
esac
