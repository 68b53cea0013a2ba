/*
 * repo/config_internal.h — private to repo/ (and its tests).
 */
#ifndef RIX_CONFIG_INTERNAL_H
#define RIX_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* Degree of p over GF(2) (index of the highest set bit); -1 for the zero polynomial. */
int rix__poly_deg(uint64_t p);

/* a * b over GF(2) (carry-less), the low 64 bits. */
uint64_t rix__poly_mul(uint64_t a, uint64_t b);

/* Whether p (any degree 1..63) is irreducible over GF(2): Rabin's test. */
bool rix__poly_irreducible(uint64_t p);

#endif
