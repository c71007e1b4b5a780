#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) on the stable toolchain.
#
#   bash scripts/fuzz.sh TARGET SECONDS     # fuzz one target for SECONDS
#   bash scripts/fuzz.sh all SECONDS        # every target, one after the other
#   bash scripts/fuzz.sh coverage TARGET [SOURCE...]   # line/function coverage of its corpus
#   bash scripts/fuzz.sh coverage all       # the same for every target, then a table
#   bash scripts/fuzz.sh seeds [TARGET...]  # remake fuzz/corpus/ (fuzz/seeds.sh), or some of it
#   bash scripts/fuzz.sh list
# Targets: luks1 luks2 nbd cipher_spec cli_values geli nbd_client nbd_uri rbd_spec pem bitlk
# fvault2 tcrypt
# (harnesses in fuzz/src/, described in fuzz/src/lib.rs). PARALLEL=2 runs `all` two
# targets at a time.
#
# Builds, corpora, logs and reports go to cargo's target directory: target/, or
# $CARGO_TARGET_DIR when set (written target/ below).
#
# Each target for 10 minutes, then the coverage of what the runs found:
#
#   bash scripts/fuzz.sh all 600 && bash scripts/fuzz.sh coverage all
#
# The table at the end gives per target the executions and edges of its last run and the
# line and function coverage of the project's own code (crates/, fuzz/); for luks1 and
# luks2 the functions of crates/volume/src/luks/ are listed with their coverage, and those
# named *valid* are shown, so the JSON parser and its validation show as reached or not;
# the other targets list the files of their parser (geli: crates/volume/src/geli/,
# nbd_client: crates/nbd/src/client/, nbd_uri: its uri.rs, rbd_spec: crates/rbd's spec.rs,
# pem: crates/nbd/src/tls/; SOURCE... chooses other files or folders). Reports:
# target/fuzz/TARGET.coverage.txt (per file), target/fuzz/TARGET.functions.txt (per
# function of the SOURCEs).
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
#
# Coverage is source-based (rustc's -Cinstrument-coverage, a stable flag): `cargo fuzz
# coverage` builds the target again with it (in target/x86_64-unknown-linux-gnu/coverage/),
# runs every input of target/fuzz/corpus/TARGET, fuzz/corpus/TARGET and
# fuzz/regressions/TARGET once, and merges the profiles into
# fuzz/coverage/TARGET/coverage.profdata (not kept in git); llvm-cov reports from it.
# llvm-cov and llvm-profdata come from rustup's llvm-tools component, added here when
# missing (the system's LLVM may not read the profile format of rustc's LLVM).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(luks1 luks2 nbd cipher_spec cli_values geli nbd_client nbd_uri rbd_spec pem bitlk fvault2 tcrypt)
# Cargo's target directory (CARGO_TARGET_DIR, or the workspace's target/), and this
# script's folder in it.
tdir=$(bash scripts/target-dir.sh)
out=$tdir/fuzz

# cargo-fuzz, installed here when missing (crates.io, pinned).
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

# Largest input per target: a LUKS2 seed with whole keyslot material is 96 KiB; an
# nbd_client capture (replies to 16 KiB reads in 4 KiB blocks) 41 KiB; a certificates
# directory with a chain and two key pairs 8 KiB; a GELI seed 4 KiB; a BitLocker seed
# (header and three FVE blocks) 13 KiB; a FileVault 2 seed (header, disk label, three
# metadata blocks) 48 KiB; a TCRYPT seed (options, chain, decrypted header) 514 bytes.
max_len() {
    case "$1" in
    luks1) echo 131072 ;;
    luks2) echo 262144 ;;
    nbd | nbd_client | fvault2) echo 65536 ;;
    cipher_spec | geli | pem | bitlk) echo 16384 ;;
    tcrypt) echo 8192 ;;
    *) echo 4096 ;;
    esac
}

build() {
    cargo fuzz build --sanitizer none --features libfuzzer "$@"
}

binary() {
    echo "$tdir/x86_64-unknown-linux-gnu/release/$1"
}

run() {
    local t=$1 secs=$2
    local work=$out/corpus/$t art=$out/artifacts/$t log=$out/$t.log
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
    local t=$1 log=$out/$1.log
    local last runs rate
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "$t: executions ${runs:-?} (${rate:-?}/s); $(echo "$last" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*')"
}

known() {
    [[ " ${targets[*]} " == *" $1 "* ]] || { echo "unknown target $1 (scripts/fuzz.sh list)"; exit 2; }
}

# Where rustup's llvm-cov and llvm-profdata are (the LLVM of rustc), added when missing.
llvm_bin() {
    local bin
    bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
    if [ ! -x "$bin/llvm-cov" ]; then
        rustup component add llvm-tools-preview >&2
    fi
    echo "$bin"
}

# The sources whose functions are listed by default: the code each target is for.
focus() {
    case "$1" in
    luks1 | luks2) echo crates/volume/src/luks ;;
    geli) echo crates/volume/src/geli ;;
    bitlk) echo crates/volume/src/bitlk ;;
    fvault2) echo crates/volume/src/fvault2 ;;
    tcrypt) echo crates/volume/src/tcrypt ;;
    nbd_client) echo crates/nbd/src/client ;;
    nbd_uri) echo crates/nbd/src/client/uri.rs ;;
    rbd_spec) echo crates/rbd/src/spec.rs ;;
    pem) echo crates/nbd/src/tls ;;
    esac
}

# Coverage of TARGET's inputs; SOURCE... (files or folders) have their functions listed.
coverage() {
    local t=$1
    shift
    local srcs=("$@") llvm bin prof files=()
    [ "${#srcs[@]}" -gt 0 ] || read -ra srcs <<<"$(focus "$t")"
    llvm=$(llvm_bin)
    mkdir -p "$out/corpus/$t" "fuzz/regressions/$t"
    rm -rf "fuzz/coverage/$t"
    echo "coverage of $t (log: $out/$t.coverage.log)"
    # cargo-fuzz puts its coverage build in ./target/ whatever CARGO_TARGET_DIR says:
    # the folder is given to it.
    cargo fuzz coverage --sanitizer none --features libfuzzer \
        --target-dir "$tdir/x86_64-unknown-linux-gnu/coverage" "$t" "$out/corpus/$t" \
        "fuzz/corpus/$t" "fuzz/regressions/$t" -- -rss_limit_mb=2048 -timeout=60 \
        >"$out/$t.coverage.log" 2>&1 || { tail -30 "$out/$t.coverage.log"; return 1; }
    bin=$tdir/x86_64-unknown-linux-gnu/coverage/x86_64-unknown-linux-gnu/release/$t
    prof=fuzz/coverage/$t/coverage.profdata
    # The project's own code only: not the standard library or crates.io.
    local mine=(-instr-profile="$prof" -ignore-filename-regex='/\.cargo/|/rustc/|/rustlib/')
    "$llvm/llvm-cov" report "$bin" "${mine[@]}" >"$out/$t.coverage.txt"
    rm -f "$out/$t.functions.txt"
    for s in "${srcs[@]}"; do
        if [ -d "$s" ]; then
            while IFS= read -r f; do files+=("$PWD/$f"); done < <(find "$s" -name '*.rs' | sort)
        else
            files+=("$PWD/$s")
        fi
    done
    if [ "${#files[@]}" -gt 0 ]; then
        "$llvm/llvm-cov" report --show-functions -Xdemangler=c++filt "$bin" "${mine[@]}" \
            "${files[@]}" >"$out/$t.functions.txt"
    fi
}

# Per target: executions and edges of its last run, line and function coverage of the
# project's code; the files and functions listed for it.
table() {
    local t list=("$@")
    [ "${#list[@]}" -gt 0 ] || list=("${targets[@]}")
    printf '%-12s %12s %8s %18s %18s\n' target executions edges "lines covered" "functions run"
    for t in "${list[@]}"; do
        [ -f "$out/$t.coverage.txt" ] || continue
        local runs=? edges=?
        if [ -f "$out/$t.log" ]; then
            runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log")
            edges=$(grep -E '^#[0-9]+' "$out/$t.log" | tail -1 | grep -oE 'cov: [0-9]+' | cut -d' ' -f2)
        fi
        awk -v t="$t" -v r="${runs:-?}" -v e="${edges:-?}" '$1 == "TOTAL" {
            printf "%-12s %12s %8s %9d/%-6d %s %9d/%-6d %s\n", t, r, e, $8 - $9, $8, $10, $5 - $6, $5, $7
        }' "$out/$t.coverage.txt"
    done
    for t in "${list[@]}"; do
        local f=$out/$t.functions.txt
        [ -f "$f" ] || continue
        echo "$t: lines covered per file listed (functions: $f)"
        sed -n "s|^File '$PWD/\(.*\)':.*|\1|p" "$f" | while IFS= read -r src; do
            awk -v f="$src" '$1 == f { printf "  %-50s %6d/%-6d %s\n", f, $8 - $9, $8, $10 }' \
                "$out/$t.coverage.txt"
        done
        # Closures are left out; a name may hold spaces (`<T as Trait>::f`): the nine
        # numbers are the last fields.
        echo "$t: functions of *valid* files or named *valid* (lines: count, missed, covered)"
        sed -E 's/\[[0-9a-f]+\]//g; s/ +/ /g' "$f" | awk '
            /^File / { file = $2; next }
            NF < 10 || /^(Name|TOTAL) / || /^-/ || /\{closure/ { next }
            {
                name = $1; for (i = 2; i <= NF - 9; i++) name = name " " $i
                if (file ~ /valid/ || name ~ /valid/)
                    printf "  %-64s %4s %4s %s\n", name, $(NF-5), $(NF-4), $(NF-3)
            }'
    done
}

case "${1:-}" in
list) printf '%s\n' "${targets[@]}" ;;
seeds)
    shift
    bash fuzz/seeds.sh "$@"
    ;;
coverage)
    t=${2:?usage: scripts/fuzz.sh coverage TARGET|all [SOURCE...]}
    shift 2
    if [ "$t" = all ]; then
        for t in "${targets[@]}"; do coverage "$t" "$@"; done
        table
    else
        known "$t"
        coverage "$t" "$@"
        table "$t"
    fi
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
"" | -h | --help) sed -n '2,/^# Stable, not nightly/{/^# Stable/d;s/^# \{0,1\}//;p}' "$0" ;;
*)
    t=$1
    secs=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
    known "$t"
    build "$t"
    run "$t" "$secs"
    ;;
esac
