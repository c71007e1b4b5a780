/*
 * The C test of libsectorcrypt, built with cc against include/sectorcrypt.h and run by
 * tests/c_program.rs: `sectorcrypt_test DIR`. DIR holds what the harness made with
 * cryptsetup and OpenSSL:
 *   attached.img   LUKS2, aes-xts-plain64, 512-byte sectors, header inside (data at 16 MiB)
 *   detached.img   the same volume key, header in detached.hdr (data at 0)
 *   plain.img      zeros: no header of any format
 *   pass, key      the passphrase and the 64-byte volume key
 *   expected.bin   the plaintext whose ciphertext (by OpenSSL) lies at PLAIN_AT in both
 *   new.bin        plaintext this program writes at NEW_AT of attached.img
 * It writes, for the harness to check against OpenSSL: xts-512.bin, xts-4096.bin,
 * xts-large-4096.bin, essiv-512.bin (expected.bin through the sector cipher API); and
 * with sectorcrypt_format: made-luks1.img (LUKS1 with the passphrase, for cryptsetup)
 * and made-geli.img (GELI keyed by the key file alone).
 * Every failed check is printed; the exit status is 1 if any failed.
 */
#define _GNU_SOURCE
#include <sectorcrypt.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024u * 1024u)
#define PLAIN_AT 12288u
#define NEW_AT (MIB + 77u)
/* The byte the use claim locks (an OFD lock; crates/volume/src/lock.rs, USE_BYTE). */
#define USE_BYTE ((off_t)1 << 62)

static int checks, failures;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,        \
                    __LINE__, #cond, sectorcrypt_last_error());                            \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* `call` returns `want`; a failure also leaves a detail, a success an empty one. */
#define EXPECT(call, want)                                                                 \
    do {                                                                                   \
        sectorcrypt_status got_ = (call);                                                  \
        const char *detail_ = sectorcrypt_last_error();                                    \
        checks++;                                                                          \
        if (got_ != (want) || (got_ == SECTORCRYPT_OK) != (detail_[0] == '\0')) {          \
            fprintf(stderr, "%s:%d: %s gave %d (%s; detail: \"%s\"), expected %s\n",       \
                    __FILE__, __LINE__, #call, (int)got_, sectorcrypt_strerror(got_),      \
                    detail_, #want);                                                       \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static const char *dir;

static char *in_dir(const char *name) {
    static char paths[16][4096];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static unsigned char *slurp(const char *name, size_t *len) {
    FILE *f = fopen(in_dir(name), "rb");
    if (!f) {
        perror(name);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len ? *len : 1);
    if (!buf || fread(buf, 1, *len, f) != *len) {
        perror(name);
        exit(2);
    }
    fclose(f);
    return buf;
}

static void spill(const char *name, const void *buf, size_t len) {
    FILE *f = fopen(in_dir(name), "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(name);
        exit(2);
    }
}

static unsigned char *pass, *key, *expected, *fresh;
static size_t pass_len, key_len, expected_len, fresh_len;

static sectorcrypt_volume *open_volume(const char *image, const char *header, uint32_t flags) {
    sectorcrypt_volume *v = NULL;
    EXPECT(sectorcrypt_open(in_dir(image), header ? in_dir(header) : NULL, (const char *)pass,
                            pass_len, flags, &v),
           SECTORCRYPT_OK);
    return v;
}

static void messages(void) {
    const char *unknown = sectorcrypt_strerror(-1);
    CHECK(unknown != NULL && strstr(unknown, "unknown") != NULL);
    CHECK(strcmp(sectorcrypt_strerror(SECTORCRYPT_ERR_UNREACHABLE + 1), unknown) == 0);
    for (int code = SECTORCRYPT_OK; code <= SECTORCRYPT_ERR_UNREACHABLE; code++) {
        const char *m = sectorcrypt_strerror(code);
        CHECK(m != NULL && m[0] != '\0' && strcmp(m, unknown) != 0);
        for (int other = SECTORCRYPT_OK; other < code; other++)
            CHECK(strcmp(m, sectorcrypt_strerror(other)) != 0);
    }
    CHECK(strcmp(sectorcrypt_strerror(SECTORCRYPT_ERR_WRONG_PASSPHRASE),
                 "no keyslot opens with this passphrase") == 0);
    CHECK(sectorcrypt_version()[0] != '\0');
}

/* Reads and writes through a read-write handle on the attached volume. */
static void round_trip(void) {
    sectorcrypt_volume *v = open_volume("attached.img", NULL, 0);
    sectorcrypt_volume_info info;
    uint64_t size = 0;
    uint32_t sector = 0;
    EXPECT(sectorcrypt_info(v, &info), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_size(v, &size), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_sector_size(v, &sector), SECTORCRYPT_OK);
    CHECK(size == 4 * MIB && info.size == size);
    CHECK(sector == 512 && info.sector_size == 512);
    CHECK(info.data_offset == 16 * MIB);
    CHECK(strcmp(info.format, "luks2") == 0);
    CHECK(strcmp(info.cipher, "aes-xts-plain64") == 0);
    CHECK(!info.read_only && info.keyslot == 0);

    /* The ciphertext OpenSSL wrote reads back as the plaintext, whole and in odd pieces. */
    unsigned char *buf = malloc(expected_len + 1);
    EXPECT(sectorcrypt_pread(v, buf, expected_len, PLAIN_AT), SECTORCRYPT_OK);
    CHECK(memcmp(buf, expected, expected_len) == 0);
    memset(buf, 0, expected_len + 1);
    EXPECT(sectorcrypt_pread(v, buf + 1, 1001, PLAIN_AT + 333), SECTORCRYPT_OK);
    CHECK(memcmp(buf + 1, expected + 333, 1001) == 0);

    /* A write at an odd offset reads back; the harness checks its ciphertext. */
    EXPECT(sectorcrypt_pwrite(v, fresh, fresh_len, NEW_AT), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, buf, fresh_len, NEW_AT), SECTORCRYPT_OK);
    CHECK(memcmp(buf, fresh, fresh_len) == 0);
    EXPECT(sectorcrypt_flush(v), SECTORCRYPT_OK);

    /* Ranges: up to the end is fine, a byte past it is not; nothing is written. */
    EXPECT(sectorcrypt_pread(v, buf, 10, size - 10), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, buf, 0, size), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, buf, 11, size - 10), SECTORCRYPT_ERR_OUT_OF_RANGE);
    CHECK(strstr(sectorcrypt_last_error(), "beyond the end") != NULL);
    EXPECT(sectorcrypt_pread(v, buf, 1, UINT64_MAX), SECTORCRYPT_ERR_OUT_OF_RANGE);
    EXPECT(sectorcrypt_pread(v, buf, 0, size + 1), SECTORCRYPT_ERR_OUT_OF_RANGE);
    EXPECT(sectorcrypt_pwrite(v, buf, 512, size), SECTORCRYPT_ERR_OUT_OF_RANGE);
    EXPECT(sectorcrypt_pread(v, buf, SIZE_MAX, 0), SECTORCRYPT_ERR_INVALID_ARGUMENT);

    /* NULL arguments. */
    EXPECT(sectorcrypt_pread(v, NULL, 10, 0), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_pwrite(v, NULL, 10, 0), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_pread(v, NULL, 0, 0), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(NULL, buf, 10, 0), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_pwrite(NULL, buf, 10, 0), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_flush(NULL), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_size(v, NULL), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_size(NULL, &size), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_sector_size(v, NULL), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_info(v, NULL), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_info((sectorcrypt_volume *)(uintptr_t)0x5151, &info),
           SECTORCRYPT_ERR_BAD_HANDLE);

    /* Closed handles: an error code, not a crash. */
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_ERR_BAD_HANDLE);
    EXPECT(sectorcrypt_pread(v, buf, 10, 0), SECTORCRYPT_ERR_BAD_HANDLE);
    EXPECT(sectorcrypt_close(NULL), SECTORCRYPT_OK);
    free(buf);
}

/* A read-only handle refuses writes and changes nothing; a detached header opens. */
static void read_only_and_detached(void) {
    sectorcrypt_volume *v = open_volume("attached.img", NULL, SECTORCRYPT_OPEN_READ_ONLY);
    sectorcrypt_volume_info info;
    unsigned char before[4096], after[4096];
    EXPECT(sectorcrypt_info(v, &info), SECTORCRYPT_OK);
    CHECK(info.read_only);
    EXPECT(sectorcrypt_pread(v, before, sizeof before, PLAIN_AT), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pwrite(v, fresh, sizeof before, PLAIN_AT), SECTORCRYPT_ERR_READ_ONLY);
    EXPECT(sectorcrypt_pread(v, after, sizeof after, PLAIN_AT), SECTORCRYPT_OK);
    CHECK(memcmp(before, after, sizeof before) == 0);
    EXPECT(sectorcrypt_flush(v), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);

    v = open_volume("detached.img", "detached.hdr", SECTORCRYPT_OPEN_READ_ONLY);
    EXPECT(sectorcrypt_info(v, &info), SECTORCRYPT_OK);
    CHECK(info.size == 20 * MIB && info.data_offset == 0);
    unsigned char *buf = malloc(expected_len);
    EXPECT(sectorcrypt_pread(v, buf, expected_len, PLAIN_AT), SECTORCRYPT_OK);
    CHECK(memcmp(buf, expected, expected_len) == 0);
    free(buf);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
}

/* One handle, many threads: each writes and reads back its own range, the ranges sharing
 * their edge sectors (read-modify-write of one sector from two threads). */
#define THREADS 4
#define SPAN 70000u
#define SPAN_AT (2 * MIB + 13u)

struct worker {
    sectorcrypt_volume *v;
    unsigned char fill;
    int bad;
};

static void *work(void *arg) {
    struct worker *w = arg;
    unsigned char *out = malloc(SPAN), *in = malloc(SPAN);
    uint64_t at = SPAN_AT + (uint64_t)w->fill * SPAN;
    for (unsigned round = 0; round < 20; round++) {
        for (unsigned i = 0; i < SPAN; i++)
            out[i] = (unsigned char)(i * 7 + round + w->fill * 61);
        if (sectorcrypt_pwrite(w->v, out, SPAN, at) != SECTORCRYPT_OK ||
            sectorcrypt_pread(w->v, in, SPAN, at) != SECTORCRYPT_OK || memcmp(in, out, SPAN))
            w->bad++;
    }
    free(out);
    free(in);
    return NULL;
}

static void threads(void) {
    sectorcrypt_volume *v = open_volume("attached.img", NULL, 0);
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.v = v, .fill = (unsigned char)i};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].bad == 0);
    }
    /* What each thread wrote last is there, edges included. */
    unsigned char *in = malloc(SPAN * THREADS);
    EXPECT(sectorcrypt_pread(v, in, SPAN * THREADS, SPAN_AT), SECTORCRYPT_OK);
    for (unsigned i = 0; i < SPAN * THREADS; i++)
        if (in[i] != (unsigned char)((i % SPAN) * 7 + 19 + (i / SPAN) * 61)) {
            CHECK(!"a thread's last write is intact");
            break;
        }
    free(in);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
}

static void open_errors(void) {
    sectorcrypt_volume *v = (sectorcrypt_volume *)(uintptr_t)1;
    const char *img = in_dir("attached.img");
    const char *p = (const char *)pass;

    char wrong[256];
    memcpy(wrong, pass, pass_len);
    wrong[pass_len - 1] ^= 1;
    EXPECT(sectorcrypt_open(img, NULL, wrong, pass_len, 0, &v), SECTORCRYPT_ERR_WRONG_PASSPHRASE);
    CHECK(v == NULL);
    /* The detail names neither passphrase. */
    char right[256];
    memcpy(right, pass, pass_len);
    right[pass_len] = wrong[pass_len] = '\0';
    CHECK(strstr(sectorcrypt_last_error(), wrong) == NULL);
    CHECK(strstr(sectorcrypt_last_error(), right) == NULL);
    /* A prefix of the right passphrase is a wrong one (the length is what was passed). */
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len - 1, 0, &v), SECTORCRYPT_ERR_WRONG_PASSPHRASE);

    EXPECT(sectorcrypt_open(in_dir("plain.img"), NULL, p, pass_len, 0, &v),
           SECTORCRYPT_ERR_NO_HEADER);
    EXPECT(sectorcrypt_open(in_dir("detached.img"), NULL, p, pass_len, 0, &v),
           SECTORCRYPT_ERR_NO_HEADER);
    EXPECT(sectorcrypt_open(in_dir("missing.img"), NULL, p, pass_len, 0, &v),
           SECTORCRYPT_ERR_NOT_FOUND);
    CHECK(strstr(sectorcrypt_last_error(), "missing.img") != NULL);
    EXPECT(sectorcrypt_open(img, in_dir("missing.hdr"), p, pass_len, 0, &v),
           SECTORCRYPT_ERR_NOT_FOUND);
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len, 0x80, &v), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(v == NULL);

    EXPECT(sectorcrypt_open(NULL, NULL, p, pass_len, 0, &v), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_open(img, NULL, NULL, pass_len, 0, &v), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_open(img, NULL, NULL, 0, 0, &v), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len, 0, NULL), SECTORCRYPT_ERR_NULL);

    /* In use: an exclusive use claim (what erase and header restore hold) is refused at
     * once; released, the volume opens. */
    int fd = open(img, O_RDWR);
    struct flock claim = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = USE_BYTE, .l_len = 1};
    CHECK(fd >= 0 && fcntl(fd, F_OFD_SETLK, &claim) == 0);
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len, SECTORCRYPT_OPEN_READ_ONLY, &v),
           SECTORCRYPT_ERR_IN_USE);
    close(fd);
    v = open_volume("attached.img", NULL, SECTORCRYPT_OPEN_READ_ONLY);
    CHECK(v != NULL);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);

    /* One writer at a time (a second open is claimed as another process's would be); a
     * reader beside it only with SECTORCRYPT_OPEN_SHARED; the refusal names the holder. */
    sectorcrypt_volume *writer = open_volume("attached.img", NULL, 0);
    char me[32];
    snprintf(me, sizeof me, "PID %d (", (int)getpid());
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len, 0, &v), SECTORCRYPT_ERR_IN_USE);
    CHECK(strstr(sectorcrypt_last_error(), me) != NULL);
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len, SECTORCRYPT_OPEN_READ_ONLY, &v),
           SECTORCRYPT_ERR_IN_USE);
    EXPECT(sectorcrypt_open(img, NULL, p, pass_len, SECTORCRYPT_OPEN_SHARED, &v),
           SECTORCRYPT_ERR_INVALID_ARGUMENT);
    v = open_volume("attached.img", NULL, SECTORCRYPT_OPEN_READ_ONLY | SECTORCRYPT_OPEN_SHARED);
    CHECK(v != NULL);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_close(writer), SECTORCRYPT_OK);
}

static sectorcrypt_cipher *new_cipher(const char *spec, size_t len, uint32_t flags) {
    sectorcrypt_cipher *c = NULL;
    EXPECT(sectorcrypt_cipher_new(spec, key, len, flags, &c), SECTORCRYPT_OK);
    return c;
}

/* expected.bin through the sector cipher into `name`, and back. */
static void sectors(sectorcrypt_cipher *c, const char *name, uint64_t first, uint32_t size) {
    unsigned char *buf = malloc(expected_len);
    memcpy(buf, expected, expected_len);
    EXPECT(sectorcrypt_cipher_encrypt(c, buf, expected_len, first, size), SECTORCRYPT_OK);
    CHECK(memcmp(buf, expected, expected_len) != 0);
    spill(name, buf, expected_len);
    EXPECT(sectorcrypt_cipher_decrypt(c, buf, expected_len, first, size), SECTORCRYPT_OK);
    CHECK(memcmp(buf, expected, expected_len) == 0);
    free(buf);
}

static void cipher(void) {
    sectorcrypt_cipher *xts = new_cipher("aes-xts-plain64", 64, 0);
    sectors(xts, "xts-512.bin", 24, 512);
    sectors(xts, "xts-4096.bin", 24, 4096);
    sectorcrypt_cipher *large = new_cipher("aes-xts-plain64", 64, SECTORCRYPT_CIPHER_IV_LARGE_SECTORS);
    sectors(large, "xts-large-4096.bin", 3, 4096);
    sectorcrypt_cipher *essiv = new_cipher("aes-cbc-essiv:sha256", 32, 0);
    sectors(essiv, "essiv-512.bin", 5, 512);

    /* A buffer at an odd address gives the same ciphertext as an aligned one. */
    unsigned char *aligned = malloc(4096), *odd = malloc(4097);
    memcpy(aligned, expected, 4096);
    memcpy(odd + 1, expected, 4096);
    EXPECT(sectorcrypt_cipher_encrypt(xts, aligned, 4096, 9, 512), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_cipher_encrypt(xts, odd + 1, 4096, 9, 512), SECTORCRYPT_OK);
    CHECK(memcmp(aligned, odd + 1, 4096) == 0);

    /* Not whole sectors, or a sector size not accepted: refused, the buffer untouched. */
    memcpy(aligned, expected, 4096);
    EXPECT(sectorcrypt_cipher_encrypt(xts, aligned, 600, 0, 512), SECTORCRYPT_ERR_LENGTH);
    EXPECT(sectorcrypt_cipher_decrypt(xts, aligned, 4000, 0, 4096), SECTORCRYPT_ERR_LENGTH);
    EXPECT(sectorcrypt_cipher_encrypt(xts, aligned, 4000, 0, 1000),
           SECTORCRYPT_ERR_INVALID_ARGUMENT);
    EXPECT(sectorcrypt_cipher_encrypt(xts, aligned, 4096, 0, 0), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(aligned, expected, 4096) == 0);
    EXPECT(sectorcrypt_cipher_encrypt(xts, NULL, 512, 0, 512), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_cipher_encrypt(NULL, aligned, 512, 0, 512), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_cipher_encrypt(xts, NULL, 0, 0, 512), SECTORCRYPT_OK);

    /* Bad cipher strings and keys. */
    sectorcrypt_cipher *c = (sectorcrypt_cipher *)(uintptr_t)1;
    EXPECT(sectorcrypt_cipher_new("aes-xts-plain65", key, 64, 0, &c),
           SECTORCRYPT_ERR_UNKNOWN_CIPHER);
    CHECK(c == NULL);
    CHECK(strstr(sectorcrypt_last_error(), "aes-xts-plain65") != NULL);
    EXPECT(sectorcrypt_cipher_new("blowfish-xts-plain64", key, 64, 0, &c),
           SECTORCRYPT_ERR_UNKNOWN_CIPHER);
    EXPECT(sectorcrypt_cipher_new("serpent-xts-plain64", key, 40, 0, &c), SECTORCRYPT_ERR_BAD_KEY);
    EXPECT(sectorcrypt_cipher_new("", key, 64, 0, &c), SECTORCRYPT_ERR_UNKNOWN_CIPHER);
    EXPECT(sectorcrypt_cipher_new("aes-xts-plain64", key, 33, 0, &c), SECTORCRYPT_ERR_BAD_KEY);
    EXPECT(sectorcrypt_cipher_new("aes-cbc-essiv:sha256", key, 64, 0, &c),
           SECTORCRYPT_ERR_BAD_KEY);
    unsigned char halves[64];
    memcpy(halves, key, 32);
    memcpy(halves + 32, key, 32);
    EXPECT(sectorcrypt_cipher_new("aes-xts-plain64", halves, 64, 0, &c), SECTORCRYPT_ERR_BAD_KEY);
    EXPECT(sectorcrypt_cipher_new("aes-xts-plain64", key, 64, 2, &c),
           SECTORCRYPT_ERR_INVALID_ARGUMENT);
    EXPECT(sectorcrypt_cipher_new(NULL, key, 64, 0, &c), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_cipher_new("aes-xts-plain64", NULL, 64, 0, &c), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_cipher_new("aes-xts-plain64", key, 64, 0, NULL), SECTORCRYPT_ERR_NULL);
    CHECK(c == NULL);

    /* Freed handles: an error code, not a crash. */
    EXPECT(sectorcrypt_cipher_free(xts), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_cipher_free(xts), SECTORCRYPT_ERR_BAD_HANDLE);
    EXPECT(sectorcrypt_cipher_encrypt(xts, aligned, 512, 0, 512), SECTORCRYPT_ERR_BAD_HANDLE);
    EXPECT(sectorcrypt_cipher_free(NULL), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_cipher_free(large), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_cipher_free(essiv), SECTORCRYPT_OK);
    free(aligned);
    free(odd);
}

/* A volume of `kind` made by sectorcrypt_format opens, and what is written reads back. */
static void made_round_trip(const char *image, const sectorcrypt_open_options *o) {
    sectorcrypt_volume *v = NULL;
    const char *p = o->flags & SECTORCRYPT_OPEN_NO_PASSPHRASE ? NULL : (const char *)pass;
    EXPECT(sectorcrypt_open_with(in_dir(image), p, p ? pass_len : 0, o, &v), SECTORCRYPT_OK);
    unsigned char back[4096];
    EXPECT(sectorcrypt_pwrite(v, fresh, sizeof back, 777), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, back, sizeof back, 777), SECTORCRYPT_OK);
    CHECK(memcmp(back, fresh, sizeof back) == 0);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
}

static void formats(void) {
    const char *p = (const char *)pass;
    sectorcrypt_format_options f;
    memset(&f, 0, sizeof f);
    f.size = sizeof f;
    f.kind = SECTORCRYPT_FORMAT_LUKS1;
    f.pbkdf = "pbkdf2";
    f.iterations = 1000;
    f.image_size = 4 * MIB;
    EXPECT(sectorcrypt_format(in_dir("made-luks1.img"), p, pass_len, &f), SECTORCRYPT_OK);
    sectorcrypt_open_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    made_round_trip("made-luks1.img", &o);

    /* GELI keyed by a keyfile alone (geli init -P -K key). */
    const char *keyfiles[] = {in_dir("key")};
    memset(&f, 0, sizeof f);
    f.size = sizeof f;
    f.kind = SECTORCRYPT_FORMAT_GELI;
    f.flags = SECTORCRYPT_FORMAT_NO_PASSPHRASE;
    f.keyfiles = keyfiles;
    f.keyfile_count = 1;
    f.iterations = 1000;
    f.image_size = 2 * MIB;
    EXPECT(sectorcrypt_format(in_dir("made-geli.img"), NULL, 0, &f), SECTORCRYPT_OK);
    o.flags = SECTORCRYPT_OPEN_NO_PASSPHRASE;
    o.keyfiles = keyfiles;
    o.keyfile_count = 1;
    made_round_trip("made-geli.img", &o);

    /* Refusals come before anything is made, classed as the library classes them. */
    const char *none = in_dir("never.img");
    memset(&f, 0, sizeof f);
    f.size = sizeof f;
    f.image_size = 20 * MIB;
    f.key_bits = 255;
    EXPECT(sectorcrypt_format(none, p, pass_len, &f), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(sectorcrypt_last_error(), "multiple of 8") != NULL);
    f.key_bits = 0;
    f.cipher = "rot13";
    EXPECT(sectorcrypt_format(none, p, pass_len, &f), SECTORCRYPT_ERR_UNSUPPORTED);
    f.cipher = NULL;
    f.kind = SECTORCRYPT_FORMAT_GELI;
    f.header = in_dir("never.hdr");
    EXPECT(sectorcrypt_format(none, p, pass_len, &f), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(sectorcrypt_last_error(), "options->header does not apply") != NULL);
    f.header = NULL;
    f.kind = 7;
    EXPECT(sectorcrypt_format(none, p, pass_len, &f), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    /* Without a size, a missing file is not made. */
    EXPECT(sectorcrypt_format(none, p, pass_len, NULL), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(access(none, F_OK) != 0 && access(in_dir("never.hdr"), F_OK) != 0);
    f.kind = 0;
    f.size = 4;
    EXPECT(sectorcrypt_format(none, p, pass_len, &f), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    EXPECT(sectorcrypt_format(NULL, p, pass_len, NULL), SECTORCRYPT_ERR_NULL);
    EXPECT(sectorcrypt_format(none, NULL, pass_len, NULL), SECTORCRYPT_ERR_NULL);

    /* A volume in use is refused, and left as it was. */
    sectorcrypt_volume *v = open_volume("made-luks1.img", NULL, 0);
    EXPECT(sectorcrypt_format(in_dir("made-luks1.img"), p, pass_len, NULL),
           SECTORCRYPT_ERR_IN_USE);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
}

/* The serial of a FAT boot sector (FAT12/16 at byte 39, FAT32 at 67) that is one of the
 * fixture's (0xDEADBABE outer, 0xCAFEBABE hidden), or 0. */
static uint32_t fat_serial(const unsigned char *b) {
    for (int at = 39; at <= 67; at += 28) {
        uint32_t s = (uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 |
                     (uint32_t)b[at + 3] << 24;
        if (s == 0xDEADBABEu || s == 0xCAFEBABEu)
            return s;
    }
    return 0;
}

/* VeraCrypt volumes by name: cryptsetup's fixture with a hidden volume. */
static void veracrypt(void) {
    const char *image = in_dir("vc-hidden.img");
    sectorcrypt_open_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.format = "veracrypt";
    o.tcrypt_hash = "sha512";
    sectorcrypt_volume *v = NULL;
    sectorcrypt_volume_info outer, hidden;
    unsigned char boot[512];
    EXPECT(sectorcrypt_open_with(image, "aaaaaaaaaaaa", 12, &o, &v), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_info(v, &outer), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, boot, sizeof boot, 0), SECTORCRYPT_OK);
    CHECK(fat_serial(boot) == 0xDEADBABEu);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    o.flags = SECTORCRYPT_OPEN_TCRYPT_HIDDEN | SECTORCRYPT_OPEN_READ_ONLY;
    EXPECT(sectorcrypt_open_with(image, "bbbbbbbbbbbb", 12, &o, &v), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_info(v, &hidden), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, boot, sizeof boot, 0), SECTORCRYPT_OK);
    CHECK(fat_serial(boot) == 0xCAFEBABEu);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    CHECK(hidden.data_offset > outer.data_offset);

    /* The outer volume written with its hidden volume protected: a write reaching into
     * the hidden data fails whole; one before it lands. */
    uint64_t at = hidden.data_offset - outer.data_offset - 512;
    o.flags = 0;
    o.protect_hidden = "bbbbbbbbbbbb";
    o.protect_hidden_len = 12;
    EXPECT(sectorcrypt_open_with(image, "aaaaaaaaaaaa", 12, &o, &v), SECTORCRYPT_OK);
    unsigned char block[4096];
    memset(block, 0x5a, sizeof block);
    EXPECT(sectorcrypt_pwrite(v, block, sizeof block, at), SECTORCRYPT_ERR_IO);
    CHECK(strstr(sectorcrypt_last_error(), "protected hidden volume") != NULL);
    EXPECT(sectorcrypt_pwrite(v, block, 512, at), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    o.flags = SECTORCRYPT_OPEN_TCRYPT_HIDDEN | SECTORCRYPT_OPEN_READ_ONLY;
    o.protect_hidden = NULL;
    o.protect_hidden_len = 0;
    EXPECT(sectorcrypt_open_with(image, "bbbbbbbbbbbb", 12, &o, &v), SECTORCRYPT_OK);
    EXPECT(sectorcrypt_pread(v, boot, sizeof boot, 0), SECTORCRYPT_OK);
    CHECK(fat_serial(boot) == 0xCAFEBABEu);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);

    /* The VeraCrypt options need the format named; unknown formats are refused. */
    o.format = NULL;
    EXPECT(sectorcrypt_open_with(image, "bbbbbbbbbbbb", 12, &o, &v),
           SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(sectorcrypt_last_error(), "need format") != NULL);
    o.format = "luks2";
    o.flags = 0;
    o.tcrypt_hash = NULL;
    EXPECT(sectorcrypt_open_with(image, "bbbbbbbbbbbb", 12, &o, &v),
           SECTORCRYPT_ERR_INVALID_ARGUMENT);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    pass = slurp("pass", &pass_len);
    key = slurp("key", &key_len);
    expected = slurp("expected.bin", &expected_len);
    fresh = slurp("new.bin", &fresh_len);
    if (pass_len < 2 || pass_len > 255 || key_len != 64 || expected_len < 8192 ||
        fresh_len < 4096) {
        fprintf(stderr, "%s: unexpected input sizes\n", dir);
        return 2;
    }
    messages();
    round_trip();
    read_only_and_detached();
    threads();
    open_errors();
    formats();
    cipher();
    veracrypt();
    printf("sectorcrypt C test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
