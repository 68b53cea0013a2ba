/*
 * backup/chunker.c — restic's content-defined chunker (rix/chunker.h), table-driven.
 *
 * The fingerprint of the 64-byte window w_0..w_63 is the polynomial sum w_i * x^(8(63-i))
 * reduced mod P (degree 53) over GF(2). Two tables of 256 words make one byte's step a few
 * shifts, XORs and two loads from L1:
 *
 *   out[b] = b * x^(8*63) mod P        XOR it to take the byte leaving the window out
 *   mod[t] = (t * x^53 mod P) | t << 53  the 8 bits that rise above degree 53 index it: one XOR
 *                                       both clears them and adds their remainder
 *
 *   step(b):  d ^= out[w[pos]]; w[pos] = b; pos = (pos + 1) % 64
 *             d = (d << 8 | b) ^ mod[d >> 45]
 *
 * A chunk's first RIX_CHUNK_MIN - 64 bytes are counted, not hashed; the next 63 are hashed
 * with no cut test (no cut can come before the minimum), and then each byte is tested, in a
 * loop bounded by the bytes given and by RIX_CHUNK_MAX, so the cut test is its only branch.
 * At a reset the window holds one byte 1 (restic starts every chunk so), giving digest 1.
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/chunker.h"
#include "rix/config.h"
#include "rix/error.h"

struct rix_chunker {
	uint64_t out[256];
	uint64_t mod[256];
	unsigned shift;      /* deg(P) - 8 */
	uint8_t win[RIX_CHUNK_WINDOW];
	unsigned wpos;
	uint64_t digest;
	size_t count;        /* bytes of the current chunk seen */
	size_t pre;          /* bytes still to skip unhashed */
};

static int deg(uint64_t x)
{
	return x == 0 ? -1 : 63 - __builtin_clzll(x);
}

static uint64_t pol_mod(uint64_t x, uint64_t p)
{
	int dp = deg(p);
	for (int dx = deg(x); dx >= dp; dx = deg(x))
		x ^= p << (dx - dp);
	return x;
}

void rix_chunker_reset(rix_chunker *c)
{
	memset(c->win, 0, sizeof(c->win));
	c->win[0] = 1;
	c->wpos = 1;
	c->digest = ((c->out[0] << 8) | 1) ^ c->mod[c->out[0] >> c->shift]; /* = 1 */
	c->count = 0;
	c->pre = RIX_CHUNK_MIN - RIX_CHUNK_WINDOW;
}

int rix_chunker_new(rix_chunker **out, uint64_t pol)
{
	*out = NULL;
	if (rix_chunker_polynomial_check(pol) != 0)
		return rix_error_set(RIX_EINVAL, "chunker: %llx is not a polynomial restic's chunker can use",
				     (unsigned long long)pol);
	rix_chunker *c = rix_calloc(1, sizeof(*c));
	if (c == NULL)
		return rix_error_set(RIX_ENOMEM, "chunker: out of memory");
	int k = deg(pol);
	c->shift = (unsigned)(k - 8);
	for (unsigned b = 0; b < 256; b++) {
		uint64_t h = pol_mod(b, pol);
		for (unsigned i = 0; i < RIX_CHUNK_WINDOW - 1; i++)
			h = pol_mod(h << 8, pol);
		c->out[b] = h;
		c->mod[b] = pol_mod((uint64_t)b << k, pol) | ((uint64_t)b << k);
	}
	rix_chunker_reset(c);
	*out = c;
	return 0;
}

void rix_chunker_free(rix_chunker *c)
{
	rix_free(c);
}

size_t rix_chunker_chunk_len(const rix_chunker *c)
{
	return c->count;
}

size_t rix_chunker_scan(bool *cut, rix_chunker *c, const uint8_t *buf, size_t n)
{
	*cut = false;
	size_t i = 0;
	if (c->pre > 0) {
		if (c->pre >= n) {
			c->pre -= n;
			c->count += n;
			return n;
		}
		i = c->pre;
		c->count += c->pre;
		c->pre = 0;
	}
	const size_t base = c->count - i; /* the chunk's length is base + i, whatever i */
	const uint64_t *restrict out = c->out, *restrict mod = c->mod;
	const unsigned shift = c->shift;
	uint8_t *restrict win = c->win;
	unsigned wpos = c->wpos;
	uint64_t d = c->digest;
#define STEP(b)                                                                                  \
	do {                                                                                     \
		uint8_t b_ = (b);                                                                \
		d ^= out[win[wpos]];                                                             \
		win[wpos] = b_;                                                                  \
		wpos = (wpos + 1) & (RIX_CHUNK_WINDOW - 1);                                      \
		d = ((d << 8) | b_) ^ mod[d >> shift];                                           \
	} while (0)
	/* Hashed before the minimum: no cut can come there. */
	if (base + i < RIX_CHUNK_MIN - 1) {
		size_t stop = i + (RIX_CHUNK_MIN - 1 - (base + i));
		if (stop > n)
			stop = n;
		for (; i < stop; i++)
			STEP(buf[i]);
	}
	if (base + i >= RIX_CHUNK_MIN - 1) {
		/* Each byte may end the chunk, up to the maximum. */
		size_t stop = i + (RIX_CHUNK_MAX - (base + i));
		if (stop > n)
			stop = n;
		for (; i < stop; i++) {
			STEP(buf[i]);
			if ((d & RIX_CHUNK_SPLIT_MASK) == 0) {
				i++;
				goto cut;
			}
		}
		if (base + i >= RIX_CHUNK_MAX)
			goto cut;
	}
#undef STEP
	c->wpos = wpos;
	c->digest = d;
	c->count = base + i;
	return i;
cut:
	*cut = true;
	rix_chunker_reset(c);
	return i;
}
