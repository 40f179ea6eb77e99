/* fuzz_ledger.c — arbitrary bytes as ledger segment files: verify and open never crash.
 *
 * Input byte 0 selects the layout: bit 0 set = split the rest into two segments at the
 * offset in bytes 1..2 (so chaining across segments is exercised), else one segment.
 * Each input is verified as a directory and as a file, then opened (replay, torn-tail
 * truncation), given one more record when the open succeeds, closed, and verified again:
 * whatever open accepted must verify afterwards.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trigguard/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64];

static void put_file(const char *name, const uint8_t *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        abort();
    }
    if (n && fwrite(p, 1, n, f) != n) {
        abort();
    }
    fclose(f);
}

static void clear_dir(void) {
    DIR *d = opendir(g_dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[384];
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* The temporary directory goes away with the process (libFuzzer exits through exit()). */
static void remove_dir(void) {
    clear_dir();
    rmdir(g_dir);
}

static tg_err_t replay(void *ud, const tg_ledger_record_t *rec) {
    uint64_t *sum = ud;
    /* touch every byte the callback is given, so ASan sees out-of-bounds pointers */
    for (size_t i = 0; i < rec->meta_len; i++) {
        *sum += rec->meta[i];
    }
    for (size_t i = 0; i < rec->payload_len; i++) {
        *sum += rec->payload[i];
    }
    return TG_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (g_dir[0] == '\0') {
        /* tmpfs when there is one: fsync is free there */
        snprintf(g_dir, sizeof g_dir, "%s/tg_fuzz_ledger_XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (mkdtemp(g_dir) == NULL) {
            abort();
        }
        atexit(remove_dir);
    }
    clear_dir();
    bool split = size >= 3 && (data[0] & 1);
    if (split) {
        size_t cut = ((size_t)data[1] | ((size_t)data[2] << 8));
        const uint8_t *rest = data + 3;
        size_t n = size - 3;
        if (cut > n) {
            cut = n;
        }
        put_file("ledger-000001.tgl", rest, cut);
        put_file("ledger-000002.tgl", rest + cut, n - cut);
    } else {
        put_file("ledger-000001.tgl", size ? data + 1 : data, size ? size - 1 : 0);
    }
    tg_ledger_verify_report_t rep;
    tg_err_t vrc = tg_ledger_verify_path(&rep, g_dir, NULL, NULL);
    char file[128];
    snprintf(file, sizeof file, "%s/ledger-000001.tgl", g_dir);
    tg_err_t frc = tg_ledger_verify_path(&rep, file, NULL, NULL);
    if (!split && frc != vrc) {
        abort(); /* segment 1 alone is the whole ledger: same verdict either way */
    }

    tg_ledger_opts_t o = TG_LEDGER_OPTS_INIT;
    o.dir = g_dir;
    o.durability = TG_DURABILITY_NONE;
    o.retry_ms = TG_LEDGER_RETRY_NEVER;
    tg_ledger_t *l = NULL;
    uint64_t sum = 0;
    tg_ledger_recovery_t rec;
    tg_err_t orc = tg_ledger_open(&l, &o, replay, &sum, &rec, NULL);
    /* verify and open agree: clean or torn verifies means open succeeds, and vice versa */
    if ((vrc == TG_OK || vrc == TG_ERR_LEDGER_TORN || vrc == TG_ERR_NOT_FOUND) != (orc == TG_OK)) {
        abort();
    }
    if (orc == TG_OK) {
        tg_ledger_pos_t pos;
        if (tg_ledger_append_sync(l, TG_LEDGER_TYPE_SILENCE, "m", 1, "{}", 2, &pos) != TG_OK ||
            pos.seq != rec.last_seq + 1) {
            abort();
        }
        tg_ledger_close(l);
        if (tg_ledger_verify_path(&rep, g_dir, NULL, NULL) != TG_OK || rep.last_seq != pos.seq) {
            abort();
        }
    }
    return 0;
}
