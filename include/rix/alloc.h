/*
 * rix/alloc.h — the one allocator hook.
 *
 * All memory rix allocates goes through these functions, so that tests can fail allocation
 * number N and benchmarks can count allocations and bytes. The hook is process-wide: set it
 * before creating any rix object and don't change it while objects made under another hook
 * are alive.
 *
 * jansson: librix gives jansson (process-wide, json_set_alloc_funcs) an allocator built on this
 * hook the first time it uses jansson. A program that uses jansson too must free what jansson
 * returns (json_dumps) with the free function json_get_alloc_funcs gives, not free(), and must
 * not keep jansson values made before that first use past it.
 */
#ifndef RIX_ALLOC_H
#define RIX_ALLOC_H

#include "rix/common.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rix_allocator {
	void *(*malloc_fn)(size_t size, void *ctx);
	void *(*calloc_fn)(size_t nmemb, size_t size, void *ctx);
	void *(*realloc_fn)(void *ptr, size_t size, void *ctx);
	void (*free_fn)(void *ptr, void *ctx);
	void *ctx;
} rix_allocator;

/* Installs a (copied) allocator; NULL restores libc's. */
RIX_EXPORT void rix_allocator_set(const rix_allocator *a);

/* Allocation entry points used throughout rix. Same contracts as libc's. */
RIX_EXPORT void *rix_malloc(size_t size);
RIX_EXPORT void *rix_calloc(size_t nmemb, size_t size);
RIX_EXPORT void *rix_realloc(void *ptr, size_t size);
RIX_EXPORT void rix_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
