/*
 * Reads a whole volume through libsectorcrypt with sectorcrypt_pread, in requests of a
 * given size into one buffer, and prints the rate (crates/capi/bench/pread.sh runs it
 * beside `sectorcrypt read`), and the cost of a call that does no I/O. Usage: pread IMAGE PASSFILE REQUEST_BYTES
 */
#define _POSIX_C_SOURCE 200809L
#include <sectorcrypt.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IMAGE PASSFILE REQUEST_BYTES\n", argv[0]);
        return 2;
    }
    char pass[256];
    FILE *f = fopen(argv[2], "rb");
    size_t pass_len = f ? fread(pass, 1, sizeof pass, f) : 0;
    if (f)
        fclose(f);
    size_t request = strtoull(argv[3], NULL, 10);
    unsigned char *buf = malloc(request);
    if (!buf || request == 0)
        return 2;
    double start = now();
    sectorcrypt_volume *v;
    sectorcrypt_status st =
        sectorcrypt_open(argv[1], NULL, pass, pass_len, SECTORCRYPT_OPEN_READ_ONLY, &v);
    uint64_t size = 0;
    if (st == SECTORCRYPT_OK)
        st = sectorcrypt_size(v, &size);
    double opened = now();
    for (uint64_t at = 0; st == SECTORCRYPT_OK && at + request <= size; at += request)
        st = sectorcrypt_pread(v, buf, request, at);
    double done = now();
    if (st != SECTORCRYPT_OK) {
        fprintf(stderr, "%s: %s\n", sectorcrypt_strerror(st), sectorcrypt_last_error());
        return 1;
    }
    /* The binding's own cost per call: a handle lookup, the panic guard, the last-error
     * record, with no I/O. */
    double calls = now();
    for (int i = 0; i < 1000000; i++)
        sectorcrypt_size(v, &size);
    double per_call = (now() - calls) / 1e6;
    sectorcrypt_close(v);
    double total = now() - start, reading = done - opened;
    printf("sectorcrypt_pread %zu-byte requests: %.2f GB/s reading (%.3f s), %.3f s with open "
           "and close; %.0f ns per call without I/O\n",
           request, (double)(size / request * request) / reading / 1e9, reading, total,
           per_call * 1e9);
    free(buf);
    return 0;
}
