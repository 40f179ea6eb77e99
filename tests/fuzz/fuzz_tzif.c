/* fuzz_tzif.c — tg_tzif_parse (and tg_tzif_parse_rule) on arbitrary bytes: an error leaves
 * nothing allocated; an accepted zone has strictly ascending transitions and answers every
 * instant (before, between, after its transitions, through its footer rule) with an offset
 * within +-25 hours and a civil time within its ranges. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/kernel_tables.h"
#include "trigguard/tzif.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void probe(const tg_zone_t *z, int64_t t) {
    int32_t off = tg_zone_offset(z, t);
    if (off < -25 * 3600 || off > 25 * 3600) {
        abort();
    }
    tg_civil_t c;
    tg_civil_time(&c, z, t);
    if (c.hour > 23 || c.weekday > 6 || c.month < 1 || c.month > 12 || c.day < 1 || c.day > 31) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_tzif_t tz;
    if (tg_tzif_parse(&tz, data, size, NULL) == TG_OK) {
        const tg_zone_t *z = &tz.zone;
        for (uint32_t i = 0; i < z->n; i++) {
            if (i > 0 && z->at[i] <= z->at[i - 1]) {
                abort();
            }
            /* instants of year 1..9999 only: what a frame can carry */
            if (z->at[i] > -62135596800 && z->at[i] < 253402300799) {
                probe(z, z->at[i] - 1);
                probe(z, z->at[i]);
            }
        }
        static const int64_t fixed[] = {-62135596800, -1,         0,           1700000000,
                                        1800000000,   4102444800, 253402300799};
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
            probe(z, fixed[i]);
        }
        tg_tzif_free(&tz);
    } else if (tz.at != NULL || tz.off != NULL || tz.zone.n != 0) {
        abort(); /* an error leaves *out zeroed */
    }
    if (size <= TG_TZIF_MAX_FOOTER) {
        tg_zone_t z;
        memset(&z, 0, sizeof z);
        if (tg_tzif_parse_rule(&z, (const char *)data, size, NULL) == TG_OK) {
            for (int64_t t = 0; t < 4102444800; t += 86400 * 37 + 3599) {
                probe(&z, t);
            }
        }
    }
    return 0;
}
