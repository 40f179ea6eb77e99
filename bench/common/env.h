/* env.h — the "environment" block every benchmark JSON document carries (docs/BENCHMARKS.md).
 *
 * Thread safety: none needed (called once per harness run, from main). The functions read
 * /proc, /etc/os-release, the build's compile_commands.json and `dpkg-query` output; any of
 * these missing yields "unknown" for that field, never an error.
 */
#ifndef TRIGGUARD_BENCH_ENV_H
#define TRIGGUARD_BENCH_ENV_H

#include <stddef.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"

/* Writes the current UTC time as "YYYY-MM-DDTHH:MM:SSZ" into out (n >= 21 bytes). */
void tg_bench_utc_now(char *out, size_t n);

/* Appends a JSON string literal of the NUL-terminated s (borrowed): quotes and backslashes
 * escaped, control bytes as \u00xx, bytes >= 0x80 as '?' (host strings are ASCII; this
 * keeps the document valid whatever /proc prints).
 * Errors: TG_ERR_LIMIT, TG_ERR_NOMEM from the buffer. */
tg_err_t tg_bench_put_str(tg_buf_t *b, const char *s) TG_MUST_USE;

/* Value after "key<spaces>:" (or "=") on the first line of path that starts with key (key
 * NULL: the first line), trimmed of blanks and quotes; "" when absent. out gets n bytes. */
void tg_bench_read_field(char *out, size_t n, const char *path, const char *key);

/* The compile command of the source file whose path ends in `suffix` (e.g.
 * "/src/kernel/kernel.c") from compile_commands.json of the build this executable belongs to
 * (<build>/bench/<exe>); "unknown" when it cannot be found. out gets n bytes. */
void tg_bench_compile_command(char *out, size_t n, const char *suffix);

/* Opens a benchmark document: {"schema":"trigguard-bench/1","benchmark":...,"harness":...,
 * "what":...,"method":...,"not_measured":...  (the object stays open for the caller's next
 * member, which starts with a comma). The six leading members every harness writes, in one
 * place. Errors: those of the buffer. */
tg_err_t tg_bench_put_header(tg_buf_t *b, const char *benchmark, const char *harness,
                             const char *what, const char *method,
                             const char *not_measured) TG_MUST_USE;

/* Appends the member "environment":{cpu_model, cpu_cores, memory_total_mib, kernel, os,
 * compiler, build_type, c_flags, optimized, sanitizers, libraries{libmicrohttpd, jansson,
 * libsodium: {package, runtime}}, git_commit, durability, date, loadavg}.
 * loadavg is /proc/loadavg when the document is written (the end of a run: its 1-minute
 * figure covers the run).
 * `durability` (borrowed; NULL -> "not applicable") is the daemon's mode as reported by it;
 * `git_commit` (borrowed; NULL -> this binary's build commit) is the commit of the code
 * measured. c_flags are those the build used for the daemon's request path
 * (src/pipeline/evaluate.c in compile_commands.json two directories above this executable).
 * Errors: TG_ERR_INVALID_ARG for a NULL buffer, else those of the buffer. */
tg_err_t tg_bench_put_environment(tg_buf_t *b, const char *durability,
                                  const char *git_commit) TG_MUST_USE;

#endif /* TRIGGUARD_BENCH_ENV_H */
