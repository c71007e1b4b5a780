#!/usr/bin/env python3
"""Records what NBD clients send: listens on a Unix socket, forwards every connection to
the server's socket, and writes the bytes each client sent (handshake and transmission)
to OUT_DIR/PREFIX-N. Used by fuzz/seeds.sh to seed the nbd fuzz target with real client
traffic.

    nbd-capture.py LISTEN_SOCKET SERVER_SOCKET OUT_DIR PREFIX
It runs until killed; each connection's file is complete once the client has closed.
"""
import os
import socket
import sys
import threading

listen_path, server_path, out_dir, prefix = sys.argv[1:5]
count = 0
lock = threading.Lock()


def pump(src, dst, record):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if record is not None:
                record.write(data)
                record.flush()
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client):
    global count
    with lock:
        count += 1
        n = count
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.connect(server_path)
    with open(os.path.join(out_dir, f"{prefix}-{n}"), "wb") as record:
        back = threading.Thread(target=pump, args=(upstream, client, None))
        back.start()
        pump(client, upstream, record)
        back.join()
    client.close()
    upstream.close()


listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(listen_path)
listener.listen(16)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
