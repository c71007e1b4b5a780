"""One soak client (bench/soak.sh starts several): random reads and writes of 4 KiB to
1 MiB over its own region of an NBD export, every read checked against a model of the
region, FLUSHes and FUA writes now and then; across a SIGKILL of the server, the recovery
check.

Run with the system python3 (libnbd's bindings, the ones nbdsh uses):
    python3 soak_client.py URI ID CLIENTS DURATION STATE_DIR

The region is the export divided in CLIENTS equal parts (whole MiB), so each client knows
exactly what its region holds. The model is what every acknowledged write made of it;
`durable` is what the last completed FLUSH made durable (and FUA writes since). Writes
since that FLUSH (acknowledged or in flight) are remembered per 4 KiB sector by the hash
of each version written.

When the server is killed (soak.sh writes STATE_DIR/kills before each SIGKILL, so a
dropped connection after it is the kill, not an error) the client reconnects to the
restarted server and reads its whole region back:
- the FLUSH rule (must hold): a sector not written since the last completed FLUSH reads
  back as it was then; a sector written since reads back as it was then or as one of the
  versions written to it since;
- the acknowledgement rule (reported): a sector whose last version was acknowledged reads
  back as that version (a killed process loses no write it completed; only the write in
  flight may be either).
Then it flushes, takes what it read as its model and goes on. At the end it flushes and
reads the whole region back, which must equal the model. It prints one JSON line.
"""

import hashlib
import json
import os
import random
import sys
import time

import nbd

SECTOR = 4096
MAX_IO = 1 << 20
CHUNK = 1 << 20

uri, ident, clients, duration, state = sys.argv[1:6]
ident, clients, duration = int(ident), int(clients), float(duration)
rng = random.Random(ident * 7919 + int(time.time()))
stats = {
    "client": ident,
    "reads": 0,
    "writes": 0,
    "fua_writes": 0,
    "flushes": 0,
    "bytes_read": 0,
    "bytes_written": 0,
    "errors": 0,
    "error_messages": [],
    "kills_survived": 0,
    "recovery": [],
}


def kills():
    try:
        with open(os.path.join(state, "kills")) as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return 0


def error(msg):
    stats["errors"] += 1
    if len(stats["error_messages"]) < 10:
        stats["error_messages"].append(msg)


def connect(deadline):
    while True:
        h = nbd.NBD()
        try:
            h.connect_uri(uri)
            return h
        except nbd.Error:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def digest(b):
    return hashlib.blake2b(b, digest_size=16).digest()


def read_region(h, base, size):
    out = bytearray()
    for at in range(0, size, CHUNK):
        out += h.pread(min(CHUNK, size - at), base + at)
    return out


h = connect(time.time() + 30)
region = (h.get_size() // clients) // CHUNK * CHUNK
base = ident * region
model = read_region(h, base, region)
durable = bytearray(model)
# sector -> hashes of the versions written since the last completed FLUSH
since_flush = {}
# sector -> whether its last version was acknowledged
acked = {}
seen_kills = kills()
end = time.time() + duration


def recovery_check(h, killed_in):
    """The region after a restart against the FLUSH rule and the acknowledgement rule."""
    got = read_region(h, base, region)
    flush_bad = ack_bad = 0
    for s in range(region // SECTOR):
        lo, hi = s * SECTOR, (s + 1) * SECTOR
        now = bytes(got[lo:hi])
        if now == durable[lo:hi]:
            ok_flush = True
        else:
            ok_flush = digest(now) in since_flush.get(s, ())
        if not ok_flush:
            flush_bad += 1
        if acked.get(s, True) and now != model[lo:hi]:
            ack_bad += 1
    stats["recovery"].append(
        {
            "kill": killed_in,
            "sectors": region // SECTOR,
            "written_since_flush": len(since_flush),
            "flush_rule_violations": flush_bad,
            "acknowledged_lost": ack_bad,
        }
    )
    if flush_bad:
        error(f"kill {killed_in}: {flush_bad} sectors break the FLUSH rule")
    return got


while time.time() < end:
    op = rng.random()
    try:
        if op < 0.45:
            n = rng.randint(1, MAX_IO // SECTOR) * SECTOR
            at = rng.randrange(0, region - n + 1, SECTOR)
            data = os.urandom(n)
            fua = rng.random() < 0.1
            for i in range(n // SECTOR):
                s = at // SECTOR + i
                since_flush.setdefault(s, set()).add(digest(data[i * SECTOR : (i + 1) * SECTOR]))
                acked[s] = False
            h.pwrite(data, base + at, nbd.CMD_FLAG_FUA if fua else 0)
            model[at : at + n] = data
            for i in range(n // SECTOR):
                acked[at // SECTOR + i] = True
            if fua:
                durable[at : at + n] = data
                for i in range(n // SECTOR):
                    since_flush.pop(at // SECTOR + i, None)
                stats["fua_writes"] += 1
            stats["writes"] += 1
            stats["bytes_written"] += n
        elif op < 0.97:
            n = rng.randint(1, MAX_IO // SECTOR) * SECTOR
            at = rng.randrange(0, region - n + 1, SECTOR)
            got = h.pread(n, base + at)
            if got != model[at : at + n]:
                error(f"read of {n} bytes at {base + at} differs from what was written")
            stats["reads"] += 1
            stats["bytes_read"] += n
        else:
            # What is acknowledged now is durable once this FLUSH completes.
            snapshot = bytearray(model)
            h.flush()
            durable = snapshot
            since_flush.clear()
            stats["flushes"] += 1
    except nbd.Error as e:
        killed = kills()
        if killed == seen_kills:
            error(f"{e}")
            time.sleep(0.05)
            continue
        # The server was killed: reconnect to the new one and check what survived.
        seen_kills = killed
        h = connect(time.time() + 60)
        model = recovery_check(h, killed)
        h.flush()
        durable = bytearray(model)
        since_flush.clear()
        acked.clear()
        stats["kills_survived"] += 1

h.flush()
final = read_region(h, base, region)
if final != model:
    bad = sum(
        final[s : s + SECTOR] != model[s : s + SECTOR] for s in range(0, region, SECTOR)
    )
    error(f"final read-back: {bad} sectors differ from what was written")
stats["final_verified_bytes"] = region
h.shutdown()
print(json.dumps(stats))
