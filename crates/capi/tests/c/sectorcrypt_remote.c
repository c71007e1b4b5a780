/*
 * The C test of libsectorcrypt on remote stores, built with cc against
 * include/sectorcrypt.h and run by tests/c_remote.rs:
 *   sectorcrypt_remote LOCATOR DIR
 * LOCATOR is an NBD URI of an export of a LUKS2 volume (the same string `sectorcrypt
 * read` takes); DIR holds `pass`, `expected.bin` (the plaintext at PLAIN_AT) and
 * `new.bin` (plaintext this program writes at NEW_AT, which the harness then checks
 * against dm-crypt's formula). Every failed check is printed; the exit status is 1 if
 * any failed.
 */
#define _GNU_SOURCE
#include <sectorcrypt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024u)
#define PLAIN_AT 12288u
#define NEW_AT (MIB + 77u)

static int checks, failures;

#define EXPECT(call, want)                                                                 \
    do {                                                                                   \
        sectorcrypt_status got_ = (call);                                                  \
        checks++;                                                                          \
        if (got_ != (want)) {                                                              \
            fprintf(stderr, "%s:%d: %s gave %d (%s; detail: \"%s\"), expected %s\n",       \
                    __FILE__, __LINE__, #call, (int)got_, sectorcrypt_strerror(got_),      \
                    sectorcrypt_last_error(), #want);                                      \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static unsigned char *slurp(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len ? *len : 1);
    if (!buf || fread(buf, 1, *len, f) != *len) {
        perror(path);
        exit(2);
    }
    fclose(f);
    return buf;
}

/* `sectorcrypt_remote LOCATOR DIR geli`: LOCATOR is a GELI provider whose key is the
 * keyfile DIR/keyfile alone (geli init -P); its data starts with expected.bin. */
static int geli(const char *locator, const char *dir) {
    size_t expected_len;
    unsigned char *expected = slurp(dir, "expected.bin", &expected_len);
    unsigned char *buf = malloc(expected_len);
    char keyfile[4200];
    snprintf(keyfile, sizeof keyfile, "%s/keyfile", dir);
    const char *keyfiles[] = {keyfile};
    sectorcrypt_open_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.flags = SECTORCRYPT_OPEN_READ_ONLY | SECTORCRYPT_OPEN_NO_PASSPHRASE | SECTORCRYPT_OPEN_KEYSLOT;
    o.keyslot = 0;
    o.keyfiles = keyfiles;
    o.keyfile_count = 1;
    o.threads = 1;
    sectorcrypt_volume *v = NULL;
    EXPECT(sectorcrypt_open_with(locator, NULL, 0, &o, &v), SECTORCRYPT_OK);
    if (v) {
        sectorcrypt_volume_info info;
        EXPECT(sectorcrypt_info(v, &info), SECTORCRYPT_OK);
        CHECK(strcmp(info.format, "geli") == 0 && info.read_only);
        EXPECT(sectorcrypt_pread(v, buf, expected_len, 0), SECTORCRYPT_OK);
        CHECK(memcmp(buf, expected, expected_len) == 0);
        EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    }
    /* Another keyfile is another key: no keyslot opens. No keyfile at all is no key. */
    char other[4200];
    snprintf(other, sizeof other, "%s/expected.bin", dir);
    const char *others[] = {other};
    o.keyfiles = others;
    EXPECT(sectorcrypt_open_with(locator, NULL, 0, &o, &v), SECTORCRYPT_ERR_WRONG_PASSPHRASE);
    o.keyfile_count = 0;
    o.keyfiles = NULL;
    EXPECT(sectorcrypt_open_with(locator, NULL, 0, &o, &v), SECTORCRYPT_ERR_INVALID_ARGUMENT);
    /* GELI has one key: keyslot 1 is no keyslot of it. */
    o.keyfiles = keyfiles;
    o.keyfile_count = 1;
    o.keyslot = 1;
    EXPECT(sectorcrypt_open_with(locator, NULL, 0, &o, &v), SECTORCRYPT_ERR_KEYSLOT);
    printf("sectorcrypt GELI C test (%s): %d checks, %d failed\n", locator, checks, failures);
    free(buf);
    free(expected);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[3], "geli") == 0)
        return geli(argv[1], argv[2]);
    if (argc != 3) {
        fprintf(stderr, "usage: %s LOCATOR DIR [geli]\n", argv[0]);
        return 2;
    }
    const char *locator = argv[1], *dir = argv[2];
    size_t pass_len, expected_len, fresh_len;
    unsigned char *pass = slurp(dir, "pass", &pass_len);
    unsigned char *expected = slurp(dir, "expected.bin", &expected_len);
    unsigned char *fresh = slurp(dir, "new.bin", &fresh_len);
    unsigned char *buf = malloc(expected_len);

    /* Read-write with options: two connections, two threads, a 10 s timeout. */
    sectorcrypt_open_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.connections = 2;
    o.threads = 2;
    o.timeout_secs = 10;
    sectorcrypt_volume *v = NULL;
    EXPECT(sectorcrypt_open_with(locator, (const char *)pass, pass_len, &o, &v), SECTORCRYPT_OK);
    if (v) {
        sectorcrypt_volume_info info;
        EXPECT(sectorcrypt_info(v, &info), SECTORCRYPT_OK);
        CHECK(strcmp(info.format, "luks2") == 0 && !info.read_only);
        EXPECT(sectorcrypt_pread(v, buf, expected_len, PLAIN_AT), SECTORCRYPT_OK);
        CHECK(memcmp(buf, expected, expected_len) == 0);
        EXPECT(sectorcrypt_pwrite(v, fresh, fresh_len, NEW_AT), SECTORCRYPT_OK);
        EXPECT(sectorcrypt_flush(v), SECTORCRYPT_OK);
        /* One writer per export in this process: a second read-write open is refused. */
        sectorcrypt_volume *second = NULL;
        EXPECT(sectorcrypt_open(locator, NULL, (const char *)pass, pass_len, 0, &second),
               SECTORCRYPT_ERR_IN_USE);
        EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    }

    /* The plain call takes the locator too; read back what was written. */
    v = NULL;
    EXPECT(sectorcrypt_open(locator, NULL, (const char *)pass, pass_len,
                            SECTORCRYPT_OPEN_READ_ONLY, &v),
           SECTORCRYPT_OK);
    if (v) {
        EXPECT(sectorcrypt_pread(v, buf, fresh_len, NEW_AT), SECTORCRYPT_OK);
        CHECK(memcmp(buf, fresh, fresh_len) == 0);
        EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    }

    /* Options from a newer header: zeros past this library's struct are accepted,
     * anything else is an option it does not know. */
    unsigned char bigger[sizeof o + 8];
    memset(bigger, 0, sizeof bigger);
    o.flags = SECTORCRYPT_OPEN_READ_ONLY;
    o.size = sizeof bigger;
    memcpy(bigger, &o, sizeof o);
    v = NULL;
    EXPECT(sectorcrypt_open_with(locator, (const char *)pass, pass_len,
                                 (const sectorcrypt_open_options *)(void *)bigger, &v),
           SECTORCRYPT_OK);
    EXPECT(sectorcrypt_close(v), SECTORCRYPT_OK);
    bigger[sizeof o + 3] = 1;
    v = NULL;
    EXPECT(sectorcrypt_open_with(locator, (const char *)pass, pass_len,
                                 (const sectorcrypt_open_options *)(void *)bigger, &v),
           SECTORCRYPT_ERR_INVALID_ARGUMENT);
    CHECK(v == NULL);

    /* A wrong passphrase over the network is the same code as on a file. */
    EXPECT(sectorcrypt_open(locator, NULL, "wrong", 5, SECTORCRYPT_OPEN_READ_ONLY, &v),
           SECTORCRYPT_ERR_WRONG_PASSPHRASE);

    /* An export nobody serves cannot be reached. */
    char gone[4200];
    snprintf(gone, sizeof gone, "nbd+unix:///?socket=%s/nobody.sock", dir);
    EXPECT(sectorcrypt_open(gone, NULL, (const char *)pass, pass_len,
                            SECTORCRYPT_OPEN_READ_ONLY, &v),
           SECTORCRYPT_ERR_UNREACHABLE);

    printf("sectorcrypt remote C test (%s): %d checks, %d failed\n", locator, checks, failures);
    free(buf);
    free(pass);
    free(expected);
    free(fresh);
    return failures ? 1 : 0;
}
