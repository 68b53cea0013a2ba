/*
 * backup/timestamp.c — restic's timestamps (rix/tree.h's rix_time): the instant, its
 * nanoseconds and the zone's offset, written and read as Go's time.Time marshals them (RFC 3339
 * with nanoseconds, trailing zeros dropped), for tree nodes and snapshots alike.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "rix/tree.h"

static int is_leap(long y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

rix_time rix_time_local(int64_t sec, uint32_t nsec)
{
	struct tm tm;
	time_t s = (time_t)sec;
	long off = localtime_r(&s, &tm) != NULL ? tm.tm_gmtoff : 0;
	return (rix_time){ sec, nsec, (int32_t)off };
}

rix_time rix_time_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return rix_time_local(t.tv_sec, (uint32_t)t.tv_nsec);
}

size_t rix_time_format(char out[RIX_TIME_MAX], const rix_time *t)
{
	time_t local = (time_t)(t->sec + t->utc_offset);
	struct tm tm;
	if (gmtime_r(&local, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	long year = (long)tm.tm_year + 1900;
	if (year < 0 || year > 9999) {
		year = year < 0 ? 0 : 9999;
		if (tm.tm_mon == 1 && tm.tm_mday == 29 && !is_leap(year)) { /* AddDate normalizes */
			tm.tm_mon = 2;
			tm.tm_mday = 1;
		}
	}
	char b[64];
	int k = snprintf(b, sizeof(b), "%04ld-%02d-%02dT%02d:%02d:%02d", year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			 tm.tm_min, tm.tm_sec);
	if (t->nsec != 0) {
		char f[16];
		snprintf(f, sizeof(f), ".%09u", t->nsec);
		size_t fl = strlen(f);
		while (fl > 1 && f[fl - 1] == '0')
			f[--fl] = '\0';
		k += snprintf(b + k, sizeof(b) - (size_t)k, "%s", f);
	}
	if (t->utc_offset == 0) {
		snprintf(b + k, sizeof(b) - (size_t)k, "Z");
	} else {
		int32_t off = t->utc_offset < 0 ? -t->utc_offset : t->utc_offset;
		snprintf(b + k, sizeof(b) - (size_t)k, "%c%02d:%02d", t->utc_offset < 0 ? '-' : '+', off / 3600,
			 off / 60 % 60);
	}
	snprintf(out, RIX_TIME_MAX, "%s", b);
	return strlen(out);
}

/* s[0..n) as decimal digits into *v: 0, or -1 at the first byte that is not one (a NUL too). */
static int dec_digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

static int days_in(int month, int year)
{
	static const int d[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	return month == 2 && is_leap(year) ? 29 : d[month - 1];
}

/*
 * As Go's time.Parse(time.RFC3339, s) reads it: exactly four and two digits, a real date and
 * time of day, a fraction of one digit or more (past nine ignored), then Z or +hh:mm / -hh:mm
 * (hh < 24, mm < 60: what rix_time_format writes back unchanged), and nothing after.
 */
int rix_time_parse(rix_time *t, const char *s)
{
	int Y, M, D, h, m, sec;
	if (s == NULL || dec_digits(s, 4, &Y) != 0 || s[4] != '-' || dec_digits(s + 5, 2, &M) != 0 || s[7] != '-' ||
	    dec_digits(s + 8, 2, &D) != 0 || s[10] != 'T' || dec_digits(s + 11, 2, &h) != 0 || s[13] != ':' ||
	    dec_digits(s + 14, 2, &m) != 0 || s[16] != ':' || dec_digits(s + 17, 2, &sec) != 0)
		return -1;
	if (M < 1 || M > 12 || D < 1 || D > days_in(M, Y) || h > 23 || m > 59 || sec > 59)
		return -1;
	const char *p = s + 19;
	uint32_t nsec = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				nsec = nsec * 10 + (uint32_t)(*p - '0');
		if (digits == 0)
			return -1;
		for (; digits < 9; digits++)
			nsec *= 10;
	}
	int32_t off = 0;
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;
		if (dec_digits(p + 1, 2, &oh) != 0 || p[3] != ':' || dec_digits(p + 4, 2, &om) != 0 || oh > 23 || om > 59)
			return -1;
		off = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	struct tm tm = { .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec };
	int64_t local = (int64_t)timegm(&tm);
	*t = (rix_time){ local - off, nsec, off };
	return 0;
}
