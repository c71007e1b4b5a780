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
#
# Usage: scripts/gost-ct-disasm.sh   (builds `cargo build --release -p sectorcrypt`)
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p sectorcrypt >/dev/null 2>&1
bin=target/release/sectorcrypt
dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
objdump -d --no-show-raw-insn -C "$bin" >"$dis"
for f in 'sectorcrypt_crypto::gost::soft::Schedule::encrypt' 'sectorcrypt_crypto::gost::avx2::ecb_groups'; do
    echo "== $f"
    awk -v f="<$f>:" '$2 == f {p=1; next} p && /^$/ {exit} p {print}' "$dis" >"$dis.fn"
    echo "instructions: $(wc -l <"$dis.fn")"
    echo "memory operands, by addressing form (registers only, offsets dropped):"
    grep -o '[-0-9a-fx]*(%[a-z0-9]*\(,%[a-z0-9]*,[0-9]\)\?)' "$dis.fn" | sed 's/^[-0-9a-fx]*//' | sort | uniq -c
    echo "variable-count shifts:"
    grep -cE 'sh[lr]x? +%cl|shrx|shlx' "$dis.fn" || true
    echo "conditional branches:"
    grep -E '\sj(n?[a-z]+)\s' "$dis.fn" | grep -v jmp | awk '{print $2}' | sort | uniq -c
    rm -f "$dis.fn"
done
