/* cmd_serve.c — `trigguard serve`: load, listen, handle signals, drain, exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/prctl.h>
#include <sys/resource.h>

#include <sodium.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/config.h"
#include "trigguard/db.h"
#include "trigguard/http.h"
#include "trigguard/ledger.h"
#include "trigguard/log.h"
#include "trigguard/pipeline.h"
#include "trigguard/tls.h"
#include "trigguard/version.h"

/* Housekeeping cadence. Each tick sweeps the expired idempotency, nonce and receipt-index
 * entries; at a steady 20k requests/s that is ~2k frees a tick instead of ~20k once a
 * second, a burst that competed with requests for the CPU and for malloc's arena locks and
 * showed in the p99.9 (docs/PERFORMANCE.md, "Tail at 50 connections"). */
#define TG_SERVE_TICK_MS 100L
_Static_assert(TG_SERVE_TICK_MS > 0 && TG_SERVE_TICK_MS < 1000, "the tick is a tv_nsec");
#define TG_SERVE_LOG_BUFFER ((size_t)256 * 1024) /* request lines waiting for the log writer */

/* With --store postgres a request's claim waits for the database (a group statement,
 * answered within --db-timeout) on its event thread, so threads mostly wait, and the more
 * requests wait at once the larger the claimer's groups: measured on 2 cores at 50
 * connections, 2 threads gave 3.5k decisions/s, 16 gave 6.4k, 32 and 64 no more. */
#define TG_SERVE_PG_THREADS 16u

static unsigned default_threads(const tg_config_t *cfg) {
    if (cfg->store_postgres) {
        return TG_SERVE_PG_THREADS;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* glibc gives freed memory back to the kernel as soon as an arena's top exceeds 128 KiB,
 * and the next request faults the same pages in again: with every request allocating
 * and freeing a few KiB, that churn cost about a fifth of the daemon's CPU under load
 * (docs/PERFORMANCE.md). The daemon's footprint is bounded by its own caps, so keep what
 * it has grown to and serve allocations from it. */
static void tune_allocator(void) {
#ifdef __GLIBC__
    (void)mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
    (void)mallopt(M_TOP_PAD, 16 * 1024 * 1024);
    (void)mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
#endif
}

/* The stop's watchdog. Every acknowledged record is durable before its response leaves,
 * so a stop that cannot finish (the ledger's final sync does not return, a libmicrohttpd
 * thread does not end) loses nothing by exiting without it; hanging would keep a
 * supervisor from restarting the service. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int64_t limit_ms;
} stop_watch_t;

static void *stop_watch_main(void *arg) {
    stop_watch_t *w = arg;
    (void)prctl(PR_SET_NAME, "tg-stop-watch", 0, 0, 0);
    struct timespec until;
    (void)clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(w->limit_ms / 1000);
    pthread_mutex_lock(&w->mu);
    int r = 0;
    while (!w->done && r != ETIMEDOUT) {
        r = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    }
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (!done) {
        TG_LOG(TG_LOG_ERROR, "shutdown_stuck",
               "the stop did not finish within %lld ms (a ledger write or sync has not "
               "returned); exiting without it: every acknowledged record is already durable",
               (long long)w->limit_ms);
        _exit(TG_EXIT_FAIL);
    }
    return NULL;
}

/* ---- descriptors ------------------------------------------------------------------------
 * Every idle connection holds a socket, and with the usual limit of 1,024 descriptors about
 * that many idle connections used to leave none for the ledger: the next segment rotation
 * failed with EMFILE and every tenant got 503. So connections are capped below what the
 * process may open, leaving in reserve what the daemon itself opens (docs/OPERATIONS.md,
 * "Descriptors", has the arithmetic). */

/* Kept spare beyond what is counted: what libraries open now and then (glibc, GnuTLS's random
 * device on a kernel without getrandom(), the sanitizer runtimes of test builds), and a
 * cushion for a count that is off by a few. */
#define TG_SERVE_FDS_SPARE 16u
/* Connections the --admin-listen listener takes at once: scrapers and an operator, not traffic. */
#define TG_SERVE_ADMIN_CONNECTIONS 64u

/* Descriptors open now: stdio, and whatever the parent left open, which take slots below the
 * limit like any other. /proc/self/fd is readable by the process itself even once it is not
 * dumpable; without /proc, every slot below the limit is probed. */
static unsigned count_open_fds(rlim_t limit) {
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        unsigned n = 0;
        const struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            n += e->d_name[0] != '.';
        }
        (void)closedir(d);
        return n > 0 ? n - 1 : 0; /* not the directory's own descriptor */
    }
    unsigned n = 0;
    for (rlim_t fd = 0; fd < limit && fd < (rlim_t)1 << 20; fd++) {
        n += fcntl((int)fd, F_GETFD) != -1;
    }
    return n;
}

/* Raises the soft RLIMIT_NOFILE toward the hard one (as far as the connections asked for
 * need) and fits --max-connections under it: a value the operator gave that does not fit is
 * refused with the numbers, the default is lowered (logged). threads: event threads per
 * listener. TG_ERR_CONFIG with diag when nothing fits or an explicit value does not. */
static tg_err_t fit_descriptors(tg_config_t *cfg, unsigned threads, tg_diag_t *diag) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    }
    unsigned listeners = cfg->decide_port != 0 ? 2 : 1;
    uint64_t reserve = count_open_fds(rl.rlim_cur);
    reserve += TG_LEDGER_FDS_HELD + TG_LEDGER_FDS_TRANSIENT;
    /* pg: the pool, the writer and the upkeep, and one more while a connection is replaced */
    reserve += cfg->store_postgres ? (uint64_t)cfg->db_pool + 3 : 0;
    if (cfg->log_key[0] != '\0') { /* the transparency log's files (file) or connection (pg) */
        reserve += cfg->store_postgres ? TG_DB_LOG_FDS_PG : TG_DB_LOG_FDS_FILE;
    }
    reserve += (uint64_t)threads * TG_LEDGER_FDS_PER_READ; /* receipts, replays: main listener */
    reserve += TG_PIPELINE_RELOAD_FDS;
    reserve += cfg->port_file[0] != '\0' ? 1 : 0;
    reserve += (uint64_t)listeners * tg_http_fds_per_listener(threads);
    if (cfg->admin_listen[0] != '\0') { /* one thread, its own small connection limit */
        reserve += tg_http_fds_per_listener(1) + TG_SERVE_ADMIN_CONNECTIONS;
    }
    reserve += TG_SERVE_FDS_SPARE;
    uint64_t conns = (uint64_t)cfg->max_connections;
    uint64_t want = reserve + listeners * conns;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want && rl.rlim_cur < rl.rlim_max) {
        struct rlimit raised = rl;
        raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            rl = raised;
        }
    }
    uint64_t limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    uint64_t fit = limit > reserve ? (limit - reserve) / listeners : 0;
    char hard[24];
    if (rl.rlim_max == RLIM_INFINITY) {
        (void)snprintf(hard, sizeof hard, "unlimited");
    } else {
        (void)snprintf(hard, sizeof hard, "%llu", (unsigned long long)rl.rlim_max);
    }
    if (conns > fit) {
        bool given = tg_config_given(cfg, "max-connections");
        if (given || fit == 0) {
            /* diag holds TG_DIAG_MAX bytes: the numbers first, the advice short. */
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "--max-connections %llu does not fit the open-files limit %llu "
                               "(hard %s): %u x %llu connections + %llu kept for the daemon = "
                               "%llu; at most %llu fit. Lower it or raise the limit (ulimit "
                               "-n, LimitNOFILE=)",
                               (unsigned long long)conns, (unsigned long long)limit, hard,
                               listeners, (unsigned long long)conns, (unsigned long long)reserve,
                               (unsigned long long)want, (unsigned long long)fit);
        }
        TG_LOG(TG_LOG_WARN, "max_connections_lowered",
               "--max-connections lowered from its default %llu to %llu per listener: the "
               "open-files limit is %llu (hard limit %s), and the daemon keeps %llu of them "
               "for itself (%u listener%s); raise the limit to allow more",
               (unsigned long long)conns, (unsigned long long)fit, (unsigned long long)limit, hard,
               (unsigned long long)reserve, listeners, listeners > 1 ? "s" : "");
        cfg->max_connections = (int64_t)fit;
    }
    TG_LOG(TG_LOG_INFO, "descriptors",
           "open-files limit %llu (hard limit %s): %llu kept for the daemon, %u listener%s of "
           "%lld connections",
           (unsigned long long)limit, hard, (unsigned long long)reserve, listeners,
           listeners > 1 ? "s" : "", (long long)cfg->max_connections);
    return TG_OK;
}

static int write_port_file(const char *path, unsigned port) {
    char tmp[TG_CONFIG_STR_MAX + 8];
    (void)snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0) {
        return -1;
    }
    return rename(tmp, path); /* readers never see a half-written file */
}

int tg_cmd_serve(int argc, char **argv) {
    tg_config_t cfg;
    tg_config_action_t action;
    tg_diag_t diag = {{0}};
    if (tg_config_parse(&cfg, &action, argc, argv, &diag) != TG_OK) {
        fprintf(stderr, "trigguard serve: %s\n", diag.msg);
        return TG_EXIT_USAGE;
    }
    if (action == TG_CONFIG_HELP) {
        tg_config_usage(stdout);
        return TG_EXIT_OK;
    }
    if (action == TG_CONFIG_PRINT) {
        tg_config_print(stdout, &cfg);
        sodium_memzero(&cfg, sizeof cfg);
        return TG_EXIT_OK;
    }
    tg_log_level_t level;
    tg_log_format_t format;
    if (tg_log_level_parse(&level, cfg.log_level) != TG_OK ||
        tg_log_format_parse(&format, cfg.log_format) != TG_OK) {
        fprintf(stderr, "trigguard serve: bad --log-level or --log-format\n");
        return TG_EXIT_USAGE;
    }
    tg_log_setup(level, format, STDERR_FILENO);
    /* The signing key, token digests and TLS key live in this process's memory: no core
     * dump (an abort, a crash) may write them to disk, and other processes of the same
     * user may not ptrace it or read its /proc memory. Before any secret is loaded. */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    tune_allocator();
    tg_json_alloc_install(); /* request-scoped arenas for jansson: see canon.h */
    unsigned threads = cfg.threads ? (unsigned)cfg.threads : default_threads(&cfg);
    /* Before anything is opened, so that what the parent left open is what is counted. */
    if (fit_descriptors(&cfg, threads, &diag) != TG_OK) {
        TG_LOG(TG_LOG_ERROR, "startup_failed", "%s", diag.msg);
        sodium_memzero(&cfg, sizeof cfg);
        return TG_EXIT_USAGE;
    }

    /* Signals go to this thread only (sigtimedwait below): block them before any
     * other thread exists so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    /* SIGUSR1/2 mean nothing here, but log tools send them ("reopen your logs"), and by
     * default they would end the daemon: an authorization service must not die of a
     * stray signal. Taken and logged instead. */
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A ledger write past a file-size limit (RLIMIT_FSIZE) must fail like a full disk,
     * with EFBIG, so the ledger turns unhealthy and requests get 503; by default the
     * signal would kill the daemon instead. */
    signal(SIGXFSZ, SIG_IGN);

    /* The certificate and key are loaded (and checked to belong together) before anything
     * else starts; the store then serves them to every handshake and takes a reload's. */
    tg_tls_t *tls = NULL;
    if (cfg.tls_cert[0]) {
        tg_diag_t td = {{0}};
        if (tg_tls_create(&tls, cfg.tls_cert, cfg.tls_key, &td) != TG_OK) {
            TG_LOG(TG_LOG_ERROR, "startup_failed", "%s", td.msg);
            return TG_EXIT_USAGE;
        }
    }

    tg_pipeline_t *p = NULL;
    char summary[1024];
    tg_err_t rc = action == TG_CONFIG_CHECK
                      ? tg_pipeline_check(summary, sizeof summary, &cfg, &diag)
                      : tg_pipeline_create(&p, &cfg, &diag);
    sodium_memzero(cfg.api_keys, sizeof cfg.api_keys);
    sodium_memzero(cfg.signing_key, sizeof cfg.signing_key);
    if (rc != TG_OK) {
        TG_LOG(TG_LOG_ERROR, "startup_failed", "%s", diag.msg[0] ? diag.msg : tg_strerror(rc));
        tg_tls_destroy(tls);
        return TG_EXIT_USAGE;
    }
    if (action == TG_CONFIG_CHECK) {
        printf("configuration OK: %s\n", summary);
        tg_tls_destroy(tls);
        return TG_EXIT_OK;
    }
    tg_pipeline_describe(p, summary, sizeof summary);
    tg_pipeline_set_tls(p, tls);

    tg_http_opts_t ho = {
        .listen = cfg.listen,
        .port = (uint16_t)cfg.port,
        .listener = 0,
        .threads = threads,
        .max_connections = (unsigned)cfg.max_connections,
        .per_ip_connections = (unsigned)cfg.per_ip_connections,
        .connection_timeout_s = (unsigned)cfg.connection_timeout_s,
        .connection_memory = (size_t)cfg.connection_memory,
        .max_body = (size_t)cfg.max_body,
        .max_url = (size_t)cfg.max_url,
        .max_header_bytes = (size_t)cfg.max_header_bytes,
        .tls = tls,
        .early = tg_pipeline_early,
        .abandon = tg_pipeline_abandon,
    };
    tg_http_server_t *main_srv = NULL, *decide_srv = NULL, *admin_srv = NULL;
    /* Request lines go out in batches from here on (see log.h); without the thread they
     * are written one by one, which is slower but loses nothing. */
    tg_err_t lrc = tg_log_async_start(TG_SERVE_LOG_BUFFER);
    if (lrc != TG_OK) {
        TG_LOG(TG_LOG_WARN, "log_buffer", "writing request lines one by one: %s", tg_strerror(lrc));
    }
    rc = tg_http_start(&main_srv, &ho, tg_pipeline_handle, p, &diag);
    if (rc == TG_OK && cfg.decide_port != 0) {
        tg_http_opts_t dopts = ho;
        dopts.port = (uint16_t)cfg.decide_port;
        dopts.listener = 1;
        rc = tg_http_start(&decide_srv, &dopts, tg_pipeline_handle, p, &diag);
    }
    if (rc == TG_OK && cfg.admin_listen[0] != '\0') {
        /* The operator's port: plain HTTP (keep it on loopback or a private network; the
         * reload still needs an admin token), one thread, few connections. */
        tg_http_opts_t aopts = ho;
        aopts.listen = cfg.admin_host;
        aopts.port = (uint16_t)cfg.admin_port;
        aopts.listener = 2;
        aopts.threads = 1;
        aopts.max_connections = TG_SERVE_ADMIN_CONNECTIONS;
        aopts.tls = NULL;
        rc = tg_http_start(&admin_srv, &aopts, tg_pipeline_handle, p, &diag);
    }
    if (rc != TG_OK) {
        TG_LOG(TG_LOG_ERROR, "startup_failed", "%s", diag.msg);
        tg_http_stop(decide_srv, 0);
        tg_http_stop(main_srv, 0);
        tg_pipeline_destroy(p);
        tg_tls_destroy(tls);
        tg_log_async_stop();
        return TG_EXIT_USAGE;
    }
    unsigned port = tg_http_port(main_srv);
    if (cfg.port_file[0] && write_port_file(cfg.port_file, port) != 0) {
        TG_LOG(TG_LOG_WARN, "port_file", "cannot write %s: %s", cfg.port_file, strerror(errno));
    }
    tg_pipeline_set_serving(p, true);
    /* An IPv6 literal goes in brackets before ":port" (RFC 3986), so the line can be
     * pasted into a URL. */
    bool v6 = strchr(cfg.listen, ':') != NULL;
    TG_LOG(TG_LOG_INFO, "listening", "trigguard %s on %s%s%s:%u%s (%u threads); %s", TG_VERSION,
           v6 ? "[" : "", cfg.listen, v6 ? "]" : "", port, cfg.tls_cert[0] ? " (TLS)" : "",
           ho.threads, summary);
    if (decide_srv) {
        TG_LOG(TG_LOG_INFO, "listening_decide", "/decide-only listener on %s%s%s:%u", v6 ? "[" : "",
               cfg.listen, v6 ? "]" : "", (unsigned)tg_http_port(decide_srv));
    }
    if (admin_srv) {
        bool a6 = strchr(cfg.admin_host, ':') != NULL;
        unsigned aport = tg_http_port(admin_srv);
        TG_LOG(TG_LOG_INFO, "listening_admin",
               "admin listener (/metrics, /v1/admin/reload, health) on %s%s%s:%u", a6 ? "[" : "",
               cfg.admin_host, a6 ? "]" : "", aport);
        if (cfg.port_file[0] != '\0') {
            char apf[TG_CONFIG_STR_MAX + 8];
            (void)snprintf(apf, sizeof apf, "%s.admin", cfg.port_file);
            if (write_port_file(apf, aport) != 0) {
                TG_LOG(TG_LOG_WARN, "port_file", "cannot write %s: %s", apf, strerror(errno));
            }
        }
    }

    int exit_code = TG_EXIT_OK;
    for (;;) {
        struct timespec tick = {0, TG_SERVE_TICK_MS * 1000000L};
        int sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig < 0) {
            tg_pipeline_tick(p);
            tg_pipeline_admin_poll(p); /* a POST /v1/admin/reload waits for this thread */
            continue;
        }
        if (sig == SIGUSR1 || sig == SIGUSR2) {
            TG_LOG(TG_LOG_WARN, "signal_ignored",
                   "signal %d has no meaning for trigguard serve; still serving (logs go to "
                   "stderr, there is nothing to reopen)",
                   sig);
            continue;
        }
        if (sig == SIGHUP) {
            /* Each part is logged on its own (policy_reloaded, reload_failed, ...). */
            rc = tg_pipeline_reload_all(p, "signal");
            tg_pipeline_describe(p, summary, sizeof summary);
            TG_LOG(rc == TG_OK ? TG_LOG_INFO : TG_LOG_WARN, "reload_done", "%s%s",
                   rc == TG_OK ? "" : "some parts kept their old state; now: ", summary);
            continue;
        }
        TG_LOG(TG_LOG_INFO, "shutdown", "signal %d: draining in-flight requests", sig);
        break;
    }
    tg_pipeline_set_serving(p, false);
    tg_pipeline_admin_close(p); /* no reload runs while stopping */
    /* --drain-timeout for the requests in flight, as long again for closing the ledger
     * (its writer's last write and sync): a disk that stopped answering would hold that
     * forever, so past it the stop gives up (shutdown_stuck, exit 1). */
    int64_t drain_ms = cfg.drain_timeout_s * 1000;
    stop_watch_t watch = {.limit_ms = 2 * drain_ms};
    pthread_t watcher;
    (void)pthread_mutex_init(&watch.mu, NULL);
    (void)pthread_cond_init(&watch.cv, NULL);
    bool watching = pthread_create(&watcher, NULL, stop_watch_main, &watch) == 0;
    /* Stop accepting, let every accepted request finish (the ledger keeps completing
     * deferred ones; those it cannot complete by the deadline get 503 through the abandon
     * hook), then close the ledger and wipe keys. */
    tg_http_quiesce(main_srv);
    tg_http_quiesce(decide_srv);
    tg_http_quiesce(admin_srv);
    /* One drain for both listeners: what the /decide one took, the main one has less. */
    int64_t drain_start = tg_clock_mono_ns();
    tg_http_stop(admin_srv, drain_ms);
    tg_http_stop(decide_srv, drain_ms);
    int64_t spent_ms = (tg_clock_mono_ns() - drain_start) / 1000000;
    tg_http_stop(main_srv, spent_ms < drain_ms ? drain_ms - spent_ms : 0);
    tg_pipeline_destroy(p);
    tg_tls_destroy(tls); /* after the listeners: no handshake can ask for it any more */
    if (watching) {
        pthread_mutex_lock(&watch.mu);
        watch.done = true;
        pthread_cond_signal(&watch.cv);
        pthread_mutex_unlock(&watch.mu);
        (void)pthread_join(watcher, NULL);
    }
    tg_log_async_stop();
    TG_LOG(TG_LOG_INFO, "stopped", "clean shutdown");
    return exit_code;
}
