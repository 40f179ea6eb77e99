/* replay_main.c — drives a libFuzzer target without libFuzzer (gcc builds).
 *
 * Runs the target on every file of the corpus directories given as arguments,
 * then on deterministic mutations of each (byte flips, truncations, splices),
 * so the sanitizer build exercises every fuzz target on every test run. It is
 * not coverage-guided; the clang TG_FUZZ build is the real fuzzer.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TG_REPLAY_MAX_FILE (64 * 1024)
#define TG_REPLAY_MUTATIONS 200

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* xorshift64*: deterministic so a failure reproduces on the next run. */
static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static void run_mutations(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size + 16);
    if (buf == NULL) {
        return;
    }
    for (int i = 0; i < TG_REPLAY_MUTATIONS; i++) {
        memcpy(buf, data, size);
        size_t n = size;
        uint64_t r = rng_next();
        switch (r % 4) {
        case 0: /* flip a byte */
            if (n) {
                buf[rng_next() % n] ^= (uint8_t)(1u << (rng_next() % 8));
            }
            break;
        case 1: /* truncate */
            n = n ? (size_t)(rng_next() % n) : 0;
            break;
        case 2: /* overwrite with an interesting byte */
            if (n) {
                static const uint8_t interesting[] = {'"', '\\', '{', '}',  '[',  ']',  ',',  ':',
                                                      '0', '-',  'e', 0x00, 0x80, 0xc0, 0xed, 0xff};
                buf[rng_next() % n] = interesting[rng_next() % sizeof interesting];
            }
            break;
        default: /* duplicate a chunk at the end */
            if (n) {
                size_t off = (size_t)(rng_next() % n);
                size_t len = (size_t)(rng_next() % 16);
                if (len > n - off) {
                    len = n - off;
                }
                memcpy(buf + n, buf + off, len);
                n += len;
            }
            break;
        }
        (void)LLVMFuzzerTestOneInput(buf, n);
    }
    free(buf);
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return 0;
    }
    uint8_t *buf = malloc(TG_REPLAY_MAX_FILE);
    if (buf == NULL) {
        fclose(f);
        return 1;
    }
    size_t n = fread(buf, 1, TG_REPLAY_MAX_FILE, f);
    fclose(f);
    (void)LLVMFuzzerTestOneInput(buf, n);
    run_mutations(buf, n);
    free(buf);
    return 1;
}

int main(int argc, char **argv) {
    size_t files = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (d == NULL) {
            files += (size_t)run_file(argv[i]);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char path[4096];
            (void)snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            files += (size_t)run_file(path);
        }
        closedir(d);
    }
    if (files == 0) {
        fprintf(stderr, "replay: no corpus files found\n");
        return 1;
    }
    printf("replay: %zu corpus files, %d mutations each, no crash\n", files, TG_REPLAY_MUTATIONS);
    return 0;
}
