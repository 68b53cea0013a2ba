/*
 * common/alloc.c — the allocator hook. libc's functions unless a hook is installed.
 */
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"

static void *libc_malloc(size_t n, void *ctx) { (void)ctx; return malloc(n); }
static void *libc_calloc(size_t n, size_t s, void *ctx) { (void)ctx; return calloc(n, s); }
static void *libc_realloc(void *p, size_t n, void *ctx) { (void)ctx; return realloc(p, n); }
static void libc_free(void *p, void *ctx) { (void)ctx; free(p); }

static rix_allocator current = { libc_malloc, libc_calloc, libc_realloc, libc_free, NULL };

void rix_allocator_set(const rix_allocator *a)
{
	if (a == NULL) {
		current = (rix_allocator){ libc_malloc, libc_calloc, libc_realloc, libc_free, NULL };
		return;
	}
	current = *a;
}

void *rix_malloc(size_t size)
{
	return current.malloc_fn(size, current.ctx);
}

void *rix_calloc(size_t nmemb, size_t size)
{
	return current.calloc_fn(nmemb, size, current.ctx);
}

void *rix_realloc(void *ptr, size_t size)
{
	return current.realloc_fn(ptr, size, current.ctx);
}

void rix_free(void *ptr)
{
	if (ptr != NULL)
		current.free_fn(ptr, current.ctx);
}
