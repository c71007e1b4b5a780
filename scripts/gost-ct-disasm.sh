#!/bin/sh
# Constant-time review aid for the GOST backends: disassembles the release build's hot
# loops and prints every memory operand and every shift by a register count, so a reader
# can confirm that no address depends on the key, the data or the S-box.
#
#   soft (Schedule::encrypt): memory operands are the round-key order table (indexed by
#   the round counter), the key words (indexed by that public order) and fixed stack slots
#   holding the packed S-box rows; the S-box is evaluated by `shr %cl` on those rows.
#   avx2 (ecb_groups): memory operands are stack slots (%rsp + constant), the source and destination
#   pointers, the key rows at constant offsets from a row chosen by the public round
#   order, and the tables at constant offsets; lookups are `vpshufb` between registers.
#   avx512 (ecb_groups, ctr_groups): memory operands are stack slots, the source and
#   destination pointers plus the byte offset (masked moves, masks from the length), the
#   round keys at the round counter's offset, and the tables and permutations at constant
#   offsets; lookups are `vpermb` between registers. The script fails when an avx512
#   kernel has a `vpgather`/`vpscatter` or an S-box lookup with a memory operand.
#
# Usage: scripts/gost-ct-disasm.sh   (builds `cargo build --release -p sectorcrypt`)
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p sectorcrypt >/dev/null 2>&1
bin=$(bash scripts/target-dir.sh)/release/sectorcrypt
dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
objdump -d --no-show-raw-insn -C "$bin" >"$dis"
status=0
for f in 'sectorcrypt_crypto::gost::soft::Schedule::encrypt' 'sectorcrypt_crypto::gost::avx2::ecb_groups' \
    'sectorcrypt_crypto::gost::avx512::ecb_groups' 'sectorcrypt_crypto::gost::avx512::ctr_groups'; do
    echo "== $f"
    awk -v f="<$f>:" '$2 == f {p=1; next} p && /^$/ {exit} p {print}' "$dis" >"$dis.fn"
    echo "instructions: $(wc -l <"$dis.fn")"
    echo "memory operands, by addressing form (registers only, offsets dropped):"
    grep -o '[-0-9a-fx]*(%[a-z0-9]*\(,%[a-z0-9]*,[0-9]\)\?)' "$dis.fn" | sed 's/^[-0-9a-fx]*//' | sort | uniq -c
    echo "variable-count shifts:"
    grep -cE 'sh[lr]x? +%cl|shrx|shlx' "$dis.fn" || true
    echo "conditional branches:"
    grep -E '\sj(n?[a-z]+)\s' "$dis.fn" | grep -v jmp | awk '{print $2}' | sort | uniq -c
    case $f in *avx512*)
        if [ ! -s "$dis.fn" ]; then
            echo "MISSING: $f is not in the build" >&2
            status=1
        fi
        echo "vpermb / vpermt2b / vpermi2b (lookups and layout), by operand kind:"
        grep -E 'vperm(b|t2b|i2b) ' "$dis.fn" | sed 's/.*vperm[a-z0-9]* *//; s/[-0-9a-fx]*(%[a-z0-9,]*)/MEM/; s/%zmm[0-9]*/zmm/g' | sort | uniq -c
        if grep -qE 'vpgather|vpscatter|vpermb +[-0-9a-fx]*\(' "$dis.fn"; then
            echo "SECRET-INDEXED MEMORY in $f: a gather, scatter or S-box lookup from memory" >&2
            status=1
        fi
        ;;
    esac
    rm -f "$dis.fn"
done
exit $status
