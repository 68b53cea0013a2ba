/*
 * common/id.c — hex form of IDs.
 */
#include "rix/error.h"
#include "rix/types.h"

void rix_id_to_hex(char out[65], const rix_id *id)
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < RIX_ID_SIZE; i++) {
		out[2 * i] = digits[id->b[i] >> 4];
		out[2 * i + 1] = digits[id->b[i] & 15];
	}
	out[64] = '\0';
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int rix_id_from_hex(rix_id *id, const char *hex, size_t len)
{
	if (len != 2 * RIX_ID_SIZE)
		return rix_error_set(RIX_EINVAL, "ID has %zu hex digits, want 64", len);
	for (int i = 0; i < RIX_ID_SIZE; i++) {
		int hi = hexval((unsigned char)hex[2 * i]), lo = hexval((unsigned char)hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return rix_error_set(RIX_EINVAL, "bad hex digit in ID at %d", hi < 0 ? 2 * i : 2 * i + 1);
		id->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}
