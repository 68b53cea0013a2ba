/*
 * index/idset_sort.c — the sort of rix_idset's builds: id_sort.h's MSD radix sort compiled for
 * plain IDs (rix__idset_sort, rix__idset_sort_from in index_internal.h).
 */
#include "rix/types.h"
#include "index_internal.h"

#define SORT_REC rix_id
#define SORT_ID(r) ((r).b)
#define SORT_FN(name) rix__idset_##name
#include "id_sort.h"
