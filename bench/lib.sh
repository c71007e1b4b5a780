# Shared by the benchmark scripts (and fuzz/seeds.sh); source it, do not run it.
#
# scratch TEMPLATE   makes the scratch folder $work (mktemp -d TEMPLATE) and arms an EXIT
#                    trap that kills every process whose pid was added to $pids, waits for
#                    them and removes $work.
# timed KEY ARGS...  runs `nbdcopy ARGS` with $CONNECTIONS connections and threads and
#                    $REQUESTS requests, and adds its GB/s over $size_bytes to
#                    samples[KEY] (and one[KEY $r], $r being the caller's round).
# median             the median of the numbers on standard input (spaces or newlines).
# wait_sock PATH     waits up to 10 s for the Unix socket PATH; exits the script without.

scratch() {
    work=$(mktemp -d "$1")
    pids=()
    trap cleanup_scratch EXIT
}

cleanup_scratch() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}

wait_sock() {
    for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done
    echo "no socket $1"; exit 1
}

declare -A samples one
timed() {
    local key=$1 t0 t1 g
    shift
    t0=$(date +%s.%N)
    nbdcopy --connections "$CONNECTIONS" --threads "$CONNECTIONS" --requests "$REQUESTS" "$@"
    t1=$(date +%s.%N)
    g=$(awk -v b="$size_bytes" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.4f", b/(z-a)/1e9}')
    samples[$key]+="$g "
    one[$key $r]=$g
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# rounds SERVER...   $ROUNDS rounds of a read (into null:) and a write (from
#                    $work/plain.bin) of each server's `uri SERVER`, timed; the order
#                    rotates each round so that no server always runs first or last.
rounds() {
    local servers=("$@") n=$# i s
    for r in $(seq "$ROUNDS"); do
        for ((i = 0; i < n; i++)); do
            s=${servers[$(((i + r) % n))]}
            timed "$s read" "$(uri "$s")" null:
            timed "$s write" "$work/plain.bin" "$(uri "$s")"
        done
    done
}
