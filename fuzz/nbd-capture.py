#!/usr/bin/env python3
"""Records NBD traffic: listens on a Unix socket, forwards every connection to the
server's socket, and writes what one side sent on each connection to OUT_DIR/PREFIX-N.
Used by fuzz/seeds.sh to seed the nbd fuzz target with real client traffic, and the
nbd_client target with real server replies.

    nbd-capture.py LISTEN_SOCKET SERVER_SOCKET OUT_DIR PREFIX [client|replies]

- client (the default): the bytes the client sent (handshake and transmission), as is.
- replies: the bytes the server sent, as the nbd_client target reads them: records of
  `wait` (u32, big-endian: how many bytes the client had sent in all when this piece of
  the server's came), `len` (u32, big-endian), then the piece. Each connection is
  forwarded by one loop that reads either side as its bytes come, so a piece's `wait`
  counts only client bytes that came before it: the server's piece cannot have been
  needed for them.

It runs until killed; each connection's file is complete once the client has closed.
"""
import os
import select
import socket
import struct
import sys
import threading

listen_path, server_path, out_dir, prefix = sys.argv[1:5]
mode = sys.argv[5] if len(sys.argv) > 5 else "client"
if mode not in ("client", "replies"):
    sys.exit(f"unknown mode {mode} (client or replies)")
count = 0
lock = threading.Lock()


def serve(client):
    global count
    with lock:
        count += 1
        n = count
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.connect(server_path)
    from_client = 0
    open_ends = {client: upstream, upstream: client}
    with open(os.path.join(out_dir, f"{prefix}-{n}"), "wb") as record:
        while open_ends:
            ready, _, _ = select.select(list(open_ends), [], [])
            for src in ready:
                dst = open_ends[src]
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    del open_ends[src]
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    continue
                if src is client:
                    from_client += len(data)
                    if mode == "client":
                        record.write(data)
                elif mode == "replies":
                    record.write(struct.pack(">II", from_client, len(data)) + data)
                record.flush()
                try:
                    dst.sendall(data)
                except OSError:
                    pass
    client.close()
    upstream.close()


listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(listen_path)
listener.listen(16)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
