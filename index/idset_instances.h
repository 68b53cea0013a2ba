/*
 * index/idset_instances.h — compiles the template IDSET_TEMPLATE (a file name the includer
 * defines: idset_lookup.h in idset.c, ranked_lookup.h in ranked.c) once for each instance of
 * the set's lookups: portable, and on x86-64 with POPCNT and BMI2 (_hw) and with AVX-512
 * VPOPCNTQ besides (_avx512). DISPATCH (idset_find.h) calls the one a set's level names.
 * Included once per template, after idset_find.h.
 */
#ifndef RIX_IDSET_FIND_H
#error "include idset_find.h (IDSET_HW, the bit primitives) before idset_instances.h"
#endif

/* The portable instance, and on x86-64 the one with POPCNT and BMI2 (PDEP for select). */
#define IDSET_FN(name) name##_portable
#define IDSET_ATTR
#define IDSET_POPCOUNT(x) popcount64(x)
#define IDSET_SELECT(x, r) select64((x), (r))
#include IDSET_TEMPLATE
#undef IDSET_FN
#undef IDSET_ATTR
#undef IDSET_POPCOUNT
#undef IDSET_SELECT

#if IDSET_HW
#define IDSET_FN(name) name##_hw
#define IDSET_ATTR __attribute__((target("popcnt,bmi,bmi2")))
#define IDSET_POPCOUNT(x) __builtin_popcountll(x)
#define IDSET_SELECT(x, r) __builtin_ctzll(__builtin_ia32_pdep_di(1ull << (r), (x)))
#include IDSET_TEMPLATE
#undef IDSET_FN
#undef IDSET_ATTR
#undef IDSET_POPCOUNT
#undef IDSET_SELECT

#define IDSET_FN(name) name##_avx512
#define IDSET_ATTR __attribute__((target("popcnt,bmi,bmi2,avx512f,avx512vpopcntdq")))
#define IDSET_POPCOUNT(x) __builtin_popcountll(x)
#define IDSET_SELECT(x, r) __builtin_ctzll(__builtin_ia32_pdep_di(1ull << (r), (x)))
#define IDSET_AVX512 1
#include IDSET_TEMPLATE
#undef IDSET_FN
#undef IDSET_ATTR
#undef IDSET_POPCOUNT
#undef IDSET_SELECT
#undef IDSET_AVX512
#endif
