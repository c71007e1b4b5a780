#!/usr/bin/env bash
# A throw-away single-node Ceph cluster for the RBD tests and bench/ceph.sh: one mon, one
# memstore OSD, no mgr, on 127.0.0.1 only, every file under one state directory, every
# daemon stopped by its PID (docs: /work/shared/CEPH.md's verified steps).
#
#   scripts/ceph.sh start DIR [--until-exit PID]   # prints "ready DIR" or why it cannot start
#   scripts/ceph.sh env DIR                        # `export CEPH_CONF=...` for a shell
#   scripts/ceph.sh stop DIR                       # stops the daemons, removes DIR
#   scripts/ceph.sh qemu                           # prints a directory whose bin/ has a
#                                                  # qemu-img/qemu-nbd with the rbd driver
#
# start fails (exit 3) with one line "cannot start: WHY" when Ceph is not installed and
# cannot be, or the daemons do not come up; the tests skip with that line. With
# --until-exit, a watcher stops the cluster once process PID has gone (a test binary's
# shared cluster). Ports: a free mon port and an OSD port range are chosen per cluster,
# so several clusters (test binaries, engineers) can run at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

die() {
    echo "cannot start: $*"
    exit 3
}

need_ceph() {
    local tools=(ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd uuidgen)
    local t
    for t in "${tools[@]}"; do
        command -v "$t" >/dev/null && continue
        bash "$here/deps.sh" ceph >&2 || true
        break
    done
    for t in "${tools[@]}"; do
        command -v "$t" >/dev/null || die "$t is not installed (scripts/deps.sh ceph)"
    done
}

# A TCP port on 127.0.0.1 nobody listens on, from a range of `count` free ports.
free_port() {
    local count=$1 base p ok
    for _ in $(seq 50); do
        base=$((20000 + RANDOM % 20000))
        ok=1
        for p in $(seq "$base" $((base + count - 1))); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then ok=0; break; fi
        done
        [ $ok = 1 ] && { echo "$base"; return; }
    done
    die "no free port range"
}

start() {
    local dir=$1 owner=${2:-}
    need_ceph
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ -e "$dir/ceph.conf" ] && die "$dir already holds a cluster"
    mkdir -p "$dir"/{run,log,mon,osd}
    local fsid mon osdlo
    fsid=$(uuidgen)
    mon=$(free_port 2)
    osdlo=$(free_port 40)
    # `mon data avail crit = -1`: the mon's data is a few MiB in a throw-away directory, but
    # ceph-mon refuses to start when the file system holding it has under that percentage
    # free, however many GiB that is (a large shared disk at 99% still has gigabytes).
    cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon,v1:127.0.0.1:$((mon + 1))]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $dir/run
admin socket = $dir/run/\$cluster-\$name.asok
log file = $dir/log/\$cluster-\$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = -1
[mon]
mon data = $dir/mon/\$cluster-\$id
pid file = $dir/run/\$cluster-\$name.pid
[osd]
osd data = $dir/osd/\$cluster-\$id
pid file = $dir/run/\$cluster-\$name.pid
osd objectstore = memstore
memstore device bytes = ${CEPH_MEMSTORE_BYTES:-3221225472}
ms bind port min = $osdlo
ms bind port max = $((osdlo + 39))
[client]
keyring = $dir/\$cluster.\$name.keyring
EOF
    export CEPH_CONF=$dir/ceph.conf
    local log=$dir/log/start.log
    {
        ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *'
        ceph-authtool --create-keyring "$dir/ceph.client.admin.keyring" --gen-key \
            -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' \
            --cap mgr 'allow *'
        ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/ceph.client.admin.keyring"
        monmaptool --create --fsid "$fsid" \
            --addv a "[v2:127.0.0.1:$mon,v1:127.0.0.1:$((mon + 1))]" "$dir/monmap"
        ceph-mon --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring"
    } >"$log" 2>&1 || die "the mon could not be created (see $log)"
    ceph-mon -i a >>"$log" 2>&1 || die "ceph-mon did not start (see $log)"
    [ -n "$owner" ] && watch_owner "$dir" "$owner"
    local secret uuid id
    secret=$(ceph-authtool --gen-print-key)
    uuid=$(uuidgen)
    printf '{"cephx_secret": "%s"}\n' "$secret" >"$dir/osd-secret.json"
    id=$(timeout 60 ceph --connect-timeout 30 osd new "$uuid" -i "$dir/osd-secret.json" \
        2>>"$log") || { stop "$dir" >/dev/null; die "the mon does not answer (see $log)"; }
    mkdir -p "$dir/osd/ceph-$id"
    {
        ceph-authtool --create-keyring "$dir/osd/ceph-$id/keyring" --name "osd.$id" \
            --add-key "$secret"
        ceph-osd -i "$id" --mkfs --osd-uuid "$uuid"
        # Debian's ceph-osd runs on glibc's malloc, not tcmalloc as upstream builds do:
        # glibc gives the freed buffers of written objects back to the kernel and then
        # faults fresh pages in for the next ones, so some benchmark legs ran the OSD at
        # two to five times its usual CPU (page faults 14% of its profile). Keeping freed
        # memory, as tcmalloc does, makes the store's cost the same from leg to leg.
        MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=4294967296 ceph-osd -i "$id"
    } >>"$log" 2>&1 || { stop "$dir" >/dev/null; die "the OSD did not start (see $log)"; }
    local up=0
    for _ in $(seq 120); do
        up=$(ceph osd stat -f json 2>/dev/null |
            sed -n 's/.*"num_up_osds":\([0-9]*\).*/\1/p')
        [ "${up:-0}" = 1 ] && break
        sleep 0.5
    done
    [ "${up:-0}" = 1 ] || { stop "$dir" >/dev/null; die "the OSD is not up after 60 s"; }
    { ceph osd pool create rbd 8 8 replicated && rbd pool init rbd; } >>"$log" 2>&1 ||
        { stop "$dir" >/dev/null; die "the rbd pool could not be created (see $log)"; }
    echo "ready $dir"
}

# Stops the cluster in `dir` once process `owner` is gone; detached from the caller's
# session and output so that it never holds a pipe open.
watch_owner() {
    local dir=$1 owner=$2
    setsid bash -c '
        while kill -0 "$1" 2>/dev/null && [ -e "$2/ceph.conf" ]; do sleep 1; done
        [ -e "$2/ceph.conf" ] && bash "$3" stop "$2"' _ "$owner" "$dir" "$0" \
        </dev/null >/dev/null 2>&1 &
}

stop() {
    local dir=$1 f pid
    [ -d "$dir/run" ] || { rm -rf "$dir"; return; }
    # qemu-nbd (the tests' and the bench's, which keep their pid files here) first, then
    # the OSD, then the mon.
    for f in "$dir"/run/qemu-*.pid "$dir"/run/ceph-osd.*.pid "$dir"/run/ceph-mon.*.pid; do
        [ -e "$f" ] || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$dir"
    echo "stopped $dir"
}

# qemu's rbd driver is a module (qemu-block-extra) that loads only into the qemu build it
# came with. Bookworm has qemu-block-extra 7.2 only: where qemu-utils is 7.2, the system
# one serves; otherwise both 7.2 packages are unpacked into a private directory.
qemu() {
    local v
    v=$(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true)
    if [ -n "$v" ] && [ "$v" = "$(dpkg-query -W -f='${Version}' qemu-block-extra 2>/dev/null)" ]; then
        mkdir -p "$here/../target/qemu-rbd/bin"
        ln -sf /usr/bin/qemu-img /usr/bin/qemu-nbd /usr/bin/qemu-io "$here/../target/qemu-rbd/bin/"
        cd "$here/../target/qemu-rbd" && pwd
        return
    fi
    local dir
    dir=$(mkdir -p "$here/../target/qemu-rbd" && cd "$here/../target/qemu-rbd" && pwd)
    if [ ! -x "$dir/bin/qemu-nbd" ]; then
        v=$(apt-cache policy qemu-block-extra | sed -n 's/^ *Candidate: //p')
        [ -n "$v" ] && [ "$v" != "(none)" ] || die "no qemu-block-extra in the apt sources"
        (cd "$dir" && rm -f ./*.deb && apt-get download -q "qemu-utils=$v" \
            "qemu-block-extra=$v" >/dev/null 2>&1) || die "apt-get download of qemu $v failed"
        for d in "$dir"/*.deb; do dpkg -x "$d" "$dir/root"; done
        rm -f "$dir"/*.deb
        mkdir -p "$dir/bin"
        local t
        for t in qemu-img qemu-nbd qemu-io; do
            printf '#!/bin/sh\nQEMU_MODULE_DIR=%s exec %s "$@"\n' \
                "$dir/root/usr/lib/x86_64-linux-gnu/qemu" "$dir/root/usr/bin/$t" >"$dir/bin/$t"
            chmod +x "$dir/bin/$t"
        done
    fi
    echo "$dir"
}

case "${1:-}" in
start)
    [ $# -ge 2 ] || { echo "usage: $0 start DIR [--until-exit PID]" >&2; exit 2; }
    owner=""
    [ "${3:-}" = --until-exit ] && owner=${4:?--until-exit needs a PID}
    start "$2" "$owner"
    ;;
stop)
    [ $# -ge 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
    stop "$2"
    ;;
env)
    [ $# -ge 2 ] || { echo "usage: $0 env DIR" >&2; exit 2; }
    echo "export CEPH_CONF=$(cd "$2" && pwd)/ceph.conf"
    ;;
qemu) qemu ;;
*)
    echo "usage: $0 start|stop|env DIR, or $0 qemu" >&2
    exit 2
    ;;
esac
