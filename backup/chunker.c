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
 *
 * The window lives in win only across calls: once a call has hashed 64 bytes, the byte leaving
 * is read from buf itself, and large spans are scanned in blocks of independent lanes (below),
 * about 3.6 times the speed of one chain (bench/RESULTS.md, "The chunker alone").
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

/*
 * Lanes. Once its 64 bytes are all in buf, the digest at a byte is a function of those 64
 * bytes alone (the reset's byte has left the window by the first cut test). So a block of
 * LANES * LANE bytes is scanned as LANES independent runs, each started from the 64 bytes
 * before its first byte (from zero: a window of zeros has digest 0 and out[0] = 0); their
 * chains overlap in the core where one chain waits on each byte's table load. The first cut
 * is the earliest: on a hit, lanes before it finish their runs first.
 */
#define LANES 8
#define LANE ((size_t)4096)
#define BLOCK (LANES * LANE)
#define SHIFT (53 - 8) /* every polynomial the chunker takes has degree 53 */

/* The digest after buf[i], given the one after buf[i - 1] (buf[i - 64] leaves the window). */
#define STEP_AT(d, i) ((((d) ^ out[buf[(i) - RIX_CHUNK_WINDOW]]) << 8 | buf[i]) ^ mod[((d) ^ out[buf[(i) - RIX_CHUNK_WINDOW]]) >> SHIFT])

/* The first i in [from, to) whose digest (d: the one before from) is a cut, or to; *dp: the
 * digest at the last byte scanned. */
static size_t run(uint64_t *dp, const uint64_t *restrict out, const uint64_t *restrict mod, const uint8_t *restrict buf,
		  size_t from, size_t to)
{
	uint64_t d = *dp;
	size_t i = from;
	for (; i < to; i++) {
		d = STEP_AT(d, i);
		if ((d & RIX_CHUNK_SPLIT_MASK) == 0)
			break;
	}
	*dp = d;
	return i;
}

/* Scans buf[at, at + BLOCK) (at >= 64), d the digest before it. @return the first cut's
 * index, or at + BLOCK (then *dp is the digest at its last byte). */
static size_t block(uint64_t *dp, const uint64_t *restrict out, const uint64_t *restrict mod, const uint8_t *restrict buf,
		    size_t at)
{
	uint64_t d[LANES];
	d[0] = *dp;
	for (int l = 1; l < LANES; l++)
		d[l] = 0;
	/* Lanes 1.. start from the 64 bytes before their first byte. */
	for (size_t k = 0; k < RIX_CHUNK_WINDOW; k++)
		for (int l = 1; l < LANES; l++) {
			uint8_t b = buf[at + (size_t)l * LANE - RIX_CHUNK_WINDOW + k];
			d[l] = (d[l] << 8 | b) ^ mod[d[l] >> SHIFT];
		}
	size_t t = 0;
	for (; t < LANE; t++) {
		uint64_t hit = 0;
		for (int l = 0; l < LANES; l++) {
			size_t i = at + (size_t)l * LANE + t;
			d[l] = STEP_AT(d[l], i);
			hit |= (d[l] & RIX_CHUNK_SPLIT_MASK) == 0;
		}
		if (hit)
			break;
	}
	if (t == LANE) {
		*dp = d[LANES - 1];
		return at + BLOCK;
	}
	/* Some lane cut at t, none before: the first lane that cuts at t or later in its run. */
	for (int l = 0; l < LANES; l++) {
		size_t base = at + (size_t)l * LANE;
		if ((d[l] & RIX_CHUNK_SPLIT_MASK) == 0)
			return base + t;
		size_t i = run(&d[l], out, mod, buf, base + t + 1, base + LANE);
		if (i < base + LANE)
			return i;
	}
	return at + BLOCK; /* not reached: a lane cut */
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
	/* Bytes are hashed up to end (the chunk's maximum or buf's end); tested from test on. */
	size_t end = i + (RIX_CHUNK_MAX - (base + i));
	if (end > n)
		end = n;
	const size_t test = base + i < RIX_CHUNK_MIN - 1 ? i + (RIX_CHUNK_MIN - 1 - (base + i)) : i;
	uint64_t d = c->digest;

	/* While the window still holds bytes from before this call (or the reset's): through win. */
	const size_t h0 = i;
	size_t ring_end = h0 + RIX_CHUNK_WINDOW < end ? h0 + RIX_CHUNK_WINDOW : end;
	uint8_t *restrict win = c->win;
	unsigned wpos = c->wpos;
	for (; i < ring_end; i++) {
		uint8_t b = buf[i];
		d ^= out[win[wpos]];
		win[wpos] = b;
		wpos = (wpos + 1) & (RIX_CHUNK_WINDOW - 1);
		d = ((d << 8) | b) ^ mod[d >> SHIFT];
		if (i >= test && (d & RIX_CHUNK_SPLIT_MASK) == 0) {
			i++;
			goto cut;
		}
	}
	c->wpos = wpos;
	if (i - h0 < RIX_CHUNK_WINDOW)
		goto out; /* end reached with the window in win */

	/* The window is buf[i - 64, i): straight from buf. */
	for (size_t stop = test < end ? test : end; i < stop; i++)
		d = STEP_AT(d, i);
	while (end - i >= BLOCK) {
		size_t at = i;
		i = block(&d, out, mod, buf, at);
		if (i < at + BLOCK) {
			i++;
			goto cut;
		}
	}
	i = run(&d, out, mod, buf, i, end);
	if (i < end) {
		i++;
		goto cut;
	}
	memcpy(c->win, buf + i - RIX_CHUNK_WINDOW, RIX_CHUNK_WINDOW);
	c->wpos = 0;
out:
	c->count = base + i;
	c->digest = d;
	if (c->count >= RIX_CHUNK_MAX)
		goto cut;
	return i;
cut:
	*cut = true;
	rix_chunker_reset(c);
	return i;
}
