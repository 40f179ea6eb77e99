#!/usr/bin/env bash
# kernel_purity.sh — the kernel library may not reference allocation, I/O, clocks,
# randomness or threads: checks libtg_kernel.a's undefined symbols with nm -u.
set -euo pipefail

: "${TG_BUILD:?TG_BUILD must point at the build directory}"

lib="$TG_BUILD/src/kernel/libtg_kernel.a"
policy_lib="$TG_BUILD/src/policy/libtg_policy.a"
[ -f "$lib" ] || { echo "FAIL: $lib not built" >&2; exit 1; }

# Forbidden outright (SPEC §8: no allocation, no locks, no I/O, no clock, no randomness).
forbidden='^(malloc|calloc|realloc|free|reallocarray|aligned_alloc|posix_memalign|memalign|valloc|pvalloc|strdup|strndup|asprintf|vasprintf|(__)?[a-z]*printf(_chk)?|__[a-z]*printf_chk|puts|fputs|putchar|fputc|putc|fwrite|fread|fopen|fclose|fflush|perror|write|read|open|close|syslog|time|clock|clock_gettime|gettimeofday|timespec_get|ftime|localtime(_r)?|gmtime(_r)?|rand|rand_r|random|srand|srandom|drand48|lrand48|arc4random|getrandom|randombytes.*|pthread_.*|sem_.*|mtx_.*|cnd_.*|thrd_.*|atomic_.*|__atomic_.*|getenv|secure_getenv|abort|exit|_exit|syscall|sleep|usleep|nanosleep)$'
# Everything else must be on this list: memory primitives plus sanitizer/coverage hooks.
allowed='^(memcmp|bcmp|memcpy|memmove|memset|strlen|strnlen|__memcpy_chk|__memmove_chk|__memset_chk|__stack_chk_fail|__asan_.*|__ubsan_.*|__tsan_.*|__msan_.*|__sanitizer_.*|__sancov_.*|_GLOBAL_OFFSET_TABLE_)$'

undefined_of() { nm -u "$1" | awk 'NF >= 2 && $1 == "U" { print $2 }' | sed 's/@.*//' | sort -u; }

# A symbol one member of the library references and another defines (kernel.o calls
# glob.o's tg_glob_match) stays inside the kernel: only the rest is external.
syms=$(comm -23 <(undefined_of "$lib") <(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u))
fails=0
bad=$(printf '%s\n' "$syms" | grep -E "$forbidden" || true)
if [ -n "$bad" ]; then
    echo "FAIL: libtg_kernel.a references forbidden symbols:" >&2
    printf '  %s\n' $bad >&2
    fails=$((fails + 1))
fi
other=$(printf '%s\n' "$syms" | grep -v '^$' | grep -Ev "$allowed" || true)
if [ -n "$other" ]; then
    echo "FAIL: libtg_kernel.a references symbols outside the allowed set:" >&2
    printf '  %s\n' $other >&2
    fails=$((fails + 1))
fi
# The kernel must not carry tg_policy's code either (it only reads its tables).
defined=$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }')
if printf '%s\n' "$defined" | grep -q '^tg_policy_'; then
    echo "FAIL: libtg_kernel.a defines tg_policy_ functions" >&2
    fails=$((fails + 1))
fi
printf '%s\n' "$defined" | grep -qx 'tg_kernel_decide' || {
    echo "FAIL: libtg_kernel.a does not define tg_kernel_decide" >&2
    fails=$((fails + 1))
}

# The kernel owns its input format (kernel.h, kernel_tables.h): nothing of it reaches back
# into the policy module, by include or by CMake (the arrow is policy -> kernel only).
if [ -n "${TG_SRC:-}" ]; then
    back=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<][^">]*policy' \
        "$TG_SRC"/src/kernel/*.[ch] "$TG_SRC"/include/trigguard/kernel*.h || true)
    back=$back$(grep -nE 'tg_policy|src/policy' "$TG_SRC/src/kernel/CMakeLists.txt" |
        grep -vE '^[0-9]+:[[:space:]]*#' || true)
    if [ -n "$back" ]; then
        echo "FAIL: the kernel depends on the policy module:" >&2
        printf '  %s\n' "$back" >&2
        fails=$((fails + 1))
    fi
fi

# The check is not vacuous: the same filter finds malloc in the policy compiler.
if [ -f "$policy_lib" ]; then
    undefined_of "$policy_lib" | grep -Eq "$forbidden" || {
        echo "FAIL: self-test: the filter finds nothing forbidden in libtg_policy.a" >&2
        fails=$((fails + 1))
    }
fi

echo "kernel_purity: undefined symbols of libtg_kernel.a: $(printf '%s ' $(printf '%s\n' "$syms" | grep -Ev '^__(asan|ubsan|tsan|msan|sanitizer|sancov)_'))"
[ "$fails" -eq 0 ]
