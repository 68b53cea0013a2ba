/*
 * common/jansson_alloc.c — jansson's allocations through rix_malloc, wiped when freed.
 *
 * Block layout (jansson sees only the part after the header):
 *
 *   | size_t size | size_t from_libc | padding to HEADER | size bytes for jansson ... |
 *   ^ allocated                                          ^ returned to jansson
 *
 * HEADER is alignof(max_align_t) (at least two size_t), so jansson's pointer keeps malloc's
 * alignment.
 *
 * jansson must never see a failed allocation: up to 2.14 (and in its current sources) its lexer
 * ignores a failure to grow the buffer of the token being read (lex_save, jansson issue #362),
 * and then drops bytes of a string, asserts, or copies a string past its end (a heap overflow;
 * the allocation-failure test here crashed on it). So when rix_malloc fails, the hook records
 * the failure for this thread and lends jansson the block from libc's malloc instead
 * (from_libc = 1); the caller sees the flag, throws the result away and reports RIX_ENOMEM
 * (rix__jansson_load, rix__jansson_out_of_memory). Only when libc fails too does jansson get
 * NULL, which is where it stood without the hook.
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>
#include <sodium.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "jansson_alloc.h"

#define HEADER alignof(max_align_t)
_Static_assert(HEADER >= 2 * sizeof(size_t), "the header holds the size and the origin");

static _Thread_local bool alloc_failed;

static void *hook_malloc(size_t size)
{
	if (size > SIZE_MAX - HEADER) {
		alloc_failed = true;
		return NULL;
	}
	size_t *b = rix_malloc(HEADER + size), from_libc = 0;
	if (b == NULL) {
		alloc_failed = true;
		b = malloc(HEADER + size);
		if (b == NULL)
			return NULL;
		from_libc = 1;
	}
	b[0] = size;
	b[1] = from_libc;
	return (unsigned char *)b + HEADER;
}

static void hook_free(void *p)
{
	if (p == NULL)
		return;
	size_t *b = (size_t *)(void *)((unsigned char *)p - HEADER);
	size_t from_libc = b[1];
	sodium_memzero(b, HEADER + b[0]);
	if (from_libc)
		free(b);
	else
		rix_free(b);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
	json_set_alloc_funcs(hook_malloc, hook_free);
}

void rix__jansson_begin(void)
{
	pthread_once(&once, install);
	alloc_failed = false;
}

bool rix__jansson_out_of_memory(void)
{
	return alloc_failed;
}

int rix__jansson_load(json_t **out, const char *buf, size_t len, json_error_t *err)
{
	return rix__jansson_load_flags(out, buf, len, 0, err);
}

int rix__jansson_load_flags(json_t **out, const char *buf, size_t len, size_t flags, json_error_t *err)
{
	rix__jansson_begin();
	*out = json_loadb(buf, len, flags, err);
	/* The flag, not the result, is the test (the value may hold lent blocks; see the top). */
	if (alloc_failed) {
		json_decref(*out);
		*out = NULL;
		return RIX_ENOMEM;
	}
	return *out != NULL ? 0 : RIX_ECORRUPT;
}

void rix__jansson_free(void *p)
{
	hook_free(p);
}
