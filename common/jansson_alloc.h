/*
 * common/jansson_alloc.h — jansson through rix's allocator hook (private to librix).
 *
 * librix uses jansson where it reads or writes JSON loosely (key files, locks, tree and
 * snapshot JSON, the REST server's lists). So that tests can fail allocation N there too, and
 * so that decrypted key JSON leaves no copy behind, jansson is given (json_set_alloc_funcs) a
 * malloc that calls rix_malloc and a free that wipes the block (sodium_memzero) before
 * rix_free. jansson's free gets no size, so each block carries it in a small header in front.
 *
 * The hook is installed once per process (pthread_once) by rix__jansson_begin(), which every
 * rix function calls before it touches jansson. jansson's allocator is process-wide: a program
 * that uses jansson itself must free what jansson hands it (json_dumps) with the free function
 * json_get_alloc_funcs returns, not free(), and must not hold jansson values made before rix's
 * first use of jansson past that point.
 *
 * Allocation failures: jansson cannot take one safely (jansson issue #362: its lexer may then
 * overflow a buffer), so the hook never shows it one while libc can still lend the memory. It
 * records the failure in a per-thread flag instead; the caller checks the flag after the call,
 * even when jansson succeeded, throws the result away and reports RIX_ENOMEM. The same flag
 * tells "out of memory" from "not JSON" (RIX_ECORRUPT) or "not UTF-8" where jansson would not.
 */
#ifndef RIX_JANSSON_ALLOC_H
#define RIX_JANSSON_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Installs the hook (once per process) and clears this thread's allocation-failure flag. */
void rix__jansson_begin(void);

/*
 * Whether an allocation by jansson failed on this thread since the last rix__jansson_begin().
 * Check it even when jansson succeeded (see rix__jansson_load).
 */
bool rix__jansson_out_of_memory(void);

/*
 * json_loadb(buf, len, 0, err) after rix__jansson_begin(). Returns 0 with the value in *out
 * (json_decref it), or RIX_ENOMEM if any allocation failed (even if jansson returned a value),
 * or RIX_ECORRUPT if the text is not JSON (err says why). Sets no error message: the caller
 * words it.
 */
int rix__jansson_load(json_t **out, const char *buf, size_t len, json_error_t *err);
/* The same with json_loadb's flags (JSON_DECODE_INT_AS_REAL: jansson refuses integers past
 * 2^63-1, which Go's uint64 fields hold). */
int rix__jansson_load_flags(json_t **out, const char *buf, size_t len, size_t flags, json_error_t *err);

/* Frees (wiped) what jansson returned to the caller, such as json_dumps's text. NULL is fine. */
void rix__jansson_free(void *p);

#endif
