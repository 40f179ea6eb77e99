/* env.c — host, build and library facts for the "environment" block of bench JSON. */
#include "env.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>
#include <sodium.h>

#include "trigguard/version.h"

#ifndef TG_BENCH_BUILD_TYPE
#define TG_BENCH_BUILD_TYPE "unknown"
#endif

void tg_bench_utc_now(char *out, size_t n) {
    time_t t = time(NULL);
    struct tm tmv;
    if (n == 0) {
        return;
    }
    out[0] = '\0';
    if (gmtime_r(&t, &tmv) != NULL) {
        strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    }
}

tg_err_t tg_bench_put_str(tg_buf_t *b, const char *s) {
    tg_err_t rc = tg_buf_putc(b, '"');
    /* Host strings are ASCII in practice; anything else becomes '?' so the document is always
     * valid JSON whatever /proc or dpkg print. */
    for (const unsigned char *p = (const unsigned char *)s; rc == TG_OK && *p; p++) {
        if (*p == '"' || *p == '\\') {
            rc = tg_buf_putc(b, '\\');
            rc = rc ? rc : tg_buf_putc(b, (char)*p);
        } else if (*p < 0x20) {
            rc = tg_buf_printf(b, "\\u%04x", *p);
        } else {
            rc = tg_buf_putc(b, *p < 0x80 ? (char)*p : '?');
        }
    }
    return rc ? rc : tg_buf_putc(b, '"');
}

void tg_bench_read_field(char *out, size_t n, const char *path, const char *key) {
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        if (key != NULL && strncmp(line, key, strlen(key)) != 0) {
            continue;
        }
        char *v = line;
        if (key != NULL) {
            v = strpbrk(line + strlen(key), ":=");
            v = v != NULL ? v + 1 : line + strlen(key);
        }
        v += strspn(v, " \t\"");
        v[strcspn(v, "\n")] = '\0';
        size_t len = strlen(v);
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '"')) {
            v[--len] = '\0';
        }
        snprintf(out, n, "%s", v);
        break;
    }
    fclose(f);
}

void tg_bench_compile_command(char *out, size_t n, const char *suffix) {
    snprintf(out, n, "unknown");
    char exe[4096], db[4200];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        return;
    }
    exe[len] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (slash == NULL) {
            return;
        }
        *slash = '\0';
    }
    snprintf(db, sizeof db, "%s/compile_commands.json", exe);
    json_t *cc = json_load_file(db, 0, NULL);
    size_t sl = strlen(suffix);
    for (size_t i = 0; i < json_array_size(cc); i++) {
        const json_t *e = json_array_get(cc, i);
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *cmd = json_string_value(json_object_get(e, "command"));
        size_t fl = file != NULL ? strlen(file) : 0;
        if (cmd != NULL && fl >= sl && strcmp(file + fl - sl, suffix) == 0) {
            snprintf(out, n, "%s", cmd);
            break;
        }
    }
    json_decref(cc);
}

/* The flags of src/pipeline/evaluate.c (the daemon's hot path) from its compile command,
 * without the compiler, include paths, outputs and the file name. */
static void daemon_c_flags(char *out, size_t n) {
    static char cmd[16384];
    tg_bench_compile_command(cmd, sizeof cmd, "/src/pipeline/evaluate.c");
    if (strcmp(cmd, "unknown") == 0) {
        snprintf(out, n, "unknown");
        return;
    }
    size_t used = 0;
    out[0] = '\0';
    const char *p = cmd + strcspn(cmd, " "); /* skip the compiler path */
    int skip_next = 0;
    while (*p != '\0') {
        p += strspn(p, " ");
        size_t tl = strcspn(p, " ");
        if (tl == 0) {
            break;
        }
        int takes_arg = (tl == 2 && (strncmp(p, "-o", 2) == 0 || strncmp(p, "-c", 2) == 0)) ||
                        (tl == 8 && strncmp(p, "-isystem", 8) == 0);
        int drop = skip_next || takes_arg || p[0] != '-' || strncmp(p, "-I", 2) == 0;
        skip_next = takes_arg;
        if (!drop && used + tl + 2 < n) {
            used += (size_t)snprintf(out + used, n - used, "%s%.*s", used ? " " : "", (int)tl, p);
        }
        p += tl;
    }
}

/* "name=version" lines of the three -dev packages the build compiled against. */
static void dpkg_versions(char *mhd, char *jan, char *sod, size_t n) {
    snprintf(mhd, n, "unknown");
    snprintf(jan, n, "unknown");
    snprintf(sod, n, "unknown");
    FILE *p = popen("dpkg-query -W -f='${Package}=${Version}\\n' libmicrohttpd-dev "
                    "libjansson-dev libsodium-dev 2>/dev/null",
                    "r");
    if (p == NULL) {
        return;
    }
    char line[256];
    while (fgets(line, sizeof line, p) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (eq == NULL || eq[1] == '\0') {
            continue;
        }
        char *dst = strncmp(line, "libmicrohttpd", 13) == 0 ? mhd
                    : strncmp(line, "libjansson", 10) == 0  ? jan
                    : strncmp(line, "libsodium", 9) == 0    ? sod
                                                            : NULL;
        if (dst != NULL) {
            snprintf(dst, n, "%s", line);
        }
    }
    pclose(p);
}

static tg_err_t put_member(tg_buf_t *b, const char *key, const char *val) {
    tg_err_t rc = tg_buf_printf(b, "\"%s\":", key);
    return rc ? rc : tg_bench_put_str(b, val[0] ? val : "unknown");
}

static tg_err_t put_library(tg_buf_t *b, const char *name, const char *pkg, const char *rt) {
    tg_err_t rc = tg_buf_printf(b, "\"%s\":{", name);
    rc = rc ? rc : put_member(b, "package", pkg);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_member(b, "runtime", rt != NULL ? rt : "unknown");
    return rc ? rc : tg_buf_putc(b, '}');
}

tg_err_t tg_bench_put_environment(tg_buf_t *b, const char *durability, const char *git_commit) {
    if (b == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    char cpu[256], mem[64], os[256], load[256], flags[4096], date[32], kernel[512];
    char mhd[256], jan[256], sod[256];
    tg_bench_read_field(cpu, sizeof cpu, "/proc/cpuinfo", "model name");
    tg_bench_read_field(mem, sizeof mem, "/proc/meminfo", "MemTotal");
    tg_bench_read_field(os, sizeof os, "/etc/os-release", "PRETTY_NAME");
    tg_bench_read_field(load, sizeof load, "/proc/loadavg", NULL);
    daemon_c_flags(flags, sizeof flags);
    dpkg_versions(mhd, jan, sod, sizeof mhd);
    tg_bench_utc_now(date, sizeof date);
    struct utsname un;
    if (uname(&un) == 0) {
        snprintf(kernel, sizeof kernel, "%s %s %s", un.sysname, un.release, un.machine);
    } else {
        snprintf(kernel, sizeof kernel, "unknown");
    }
    long mem_kib = 0;
    if (sscanf(mem, "%ld", &mem_kib) != 1) {
        mem_kib = 0;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char mhd_rt[64];
    snprintf(mhd_rt, sizeof mhd_rt, "%s", MHD_get_version());

    tg_err_t rc = tg_buf_puts(b, "\"environment\":{");
    rc = rc ? rc : put_member(b, "cpu_model", cpu);
    rc = rc ? rc
            : tg_buf_printf(b, ",\"cpu_cores\":%ld,\"memory_total_mib\":%ld,", cores,
                            mem_kib / 1024);
    rc = rc ? rc : put_member(b, "kernel", kernel);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_member(b, "os", os);
#ifdef __clang__
    rc = rc ? rc : tg_buf_puts(b, ",\"compiler\":\"clang " __VERSION__ "\"");
#else
    rc = rc ? rc : tg_buf_puts(b, ",\"compiler\":\"gcc " __VERSION__ "\"");
#endif
    rc = rc ? rc : tg_buf_puts(b, ",\"build_type\":\"" TG_BENCH_BUILD_TYPE "\",");
    rc = rc ? rc : put_member(b, "c_flags", flags);
    rc = rc ? rc
            : tg_buf_printf(b, ",\"optimized\":%s,\"sanitizers\":%s",
                            strstr(flags, "-O2") || strstr(flags, "-O3") ? "true" : "false",
                            strstr(flags, "-fsanitize") ? "true" : "false");
    rc = rc ? rc : tg_buf_puts(b, ",\"libraries\":{");
    rc = rc ? rc : put_library(b, "libmicrohttpd", mhd, mhd_rt);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_library(b, "jansson", jan, jansson_version_str());
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_library(b, "libsodium", sod, sodium_version_string());
    rc = rc ? rc : tg_buf_puts(b, "},");
    rc = rc ? rc : put_member(b, "git_commit", git_commit != NULL ? git_commit : TG_GIT_COMMIT);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_member(b, "durability", durability != NULL ? durability : "not applicable");
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_member(b, "date", date);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : put_member(b, "loadavg", load);
    return rc ? rc : tg_buf_putc(b, '}');
}

tg_err_t tg_bench_put_header(tg_buf_t *b, const char *benchmark, const char *harness,
                             const char *what, const char *method, const char *not_measured) {
    const char *keys[] = {"benchmark", "harness", "what", "method", "not_measured"};
    const char *vals[] = {benchmark, harness, what, method, not_measured};
    tg_err_t rc = tg_buf_puts(b, "{\"schema\":\"trigguard-bench/1\"");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && rc == TG_OK; i++) {
        rc = tg_buf_printf(b, ",\"%s\":", keys[i]);
        rc = rc ? rc : tg_bench_put_str(b, vals[i]);
    }
    return rc;
}
