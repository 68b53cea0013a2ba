/*
 * backup/forget.c — restic 0.14's forget policy (rix/forget.h): durations, the policy's words,
 * and ApplyPolicy over one group of snapshots.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/forget.h"
#include "../common/buf.h"
#include "snapshot_internal.h"

/* ==== durations ============================================================================= */

int rix_duration_parse(rix_duration *out, const char *s)
{
	rix_duration d = { 0 };
	while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
		s++;
	size_t end = strlen(s);
	while (end > 0 && (s[end - 1] == ' ' || (s[end - 1] >= '\t' && s[end - 1] <= '\r')))
		end--;
	for (size_t i = 0; i < end;) {
		bool negative = s[i] == '-';
		i += negative;
		size_t start = i;
		long long num = 0;
		for (; i < end && s[i] >= '0' && s[i] <= '9'; i++) {
			num = num * 10 + (s[i] - '0');
			if (num > INT_MAX)
				return rix_error_set(RIX_EINVAL, "number %.*s is too large", (int)(i + 1 - start), s + start);
		}
		if (i == start)
			return rix_error_set(RIX_EINVAL, "no number found");
		int n = negative ? -(int)num : (int)num;
		if (i == end)
			return rix_error_set(RIX_EINVAL, "no unit found after number %d", n);
		switch (s[i]) {
		case 'y':
			d.years = n;
			break;
		case 'm':
			d.months = n;
			break;
		case 'd':
			d.days = n;
			break;
		case 'h':
			d.hours = n;
			break;
		default:
			return rix_error_set(RIX_EINVAL, "invalid unit '%c' found after number %d", s[i], n);
		}
		i++;
	}
	*out = d;
	return 0;
}

size_t rix_duration_format(char out[RIX_DURATION_MAX], const rix_duration *d)
{
	const int v[4] = { d->years, d->months, d->days, d->hours };
	const char unit[4] = { 'y', 'm', 'd', 'h' };
	size_t n = 0;
	out[0] = '\0';
	for (int i = 0; i < 4; i++)
		if (v[i] != 0)
			n += (size_t)snprintf(out + n, RIX_DURATION_MAX - n, "%d%c", v[i], unit[i]);
	return n;
}

bool rix_duration_zero(const rix_duration *d)
{
	return d->years == 0 && d->months == 0 && d->days == 0 && d->hours == 0;
}

/* ==== the policy ============================================================================= */

static const rix_duration *withins(const rix_forget_policy *p, int i)
{
	const rix_duration *w[5] = { &p->within_hourly, &p->within_daily, &p->within_weekly, &p->within_monthly,
				     &p->within_yearly };
	return w[i];
}

static int count(const rix_forget_policy *p, int i)
{
	const int c[RIX_KEEP_COUNTERS] = { p->last, p->hourly, p->daily, p->weekly, p->monthly, p->yearly };
	return c[i];
}

bool rix_forget_policy_empty(const rix_forget_policy *p)
{
	if (p->ntags > 0 || !rix_duration_zero(&p->within))
		return false;
	for (int i = 0; i < RIX_KEEP_COUNTERS; i++)
		if (count(p, i) != 0)
			return false;
	for (int i = 0; i < 5; i++)
		if (!rix_duration_zero(withins(p, i)))
			return false;
	return true;
}

/* One tag list "a, b" as Go's %v of restic's TagList prints it: "[a, b]". */
static void put_tag_list(rix__buf *b, const char *list)
{
	const char *t;
	size_t n;
	rix__buf_puts(b, "[");
	for (bool more = true, first = true; more; first = false) {
		more = rix__snapshot_next_tag(&list, &t, &n);
		if (!first)
			rix__buf_puts(b, ", ");
		rix__buf_put(b, t, n);
	}
	rix__buf_puts(b, "]");
}

int rix_forget_policy_describe(char **out, const rix_forget_policy *p)
{
	static const char *const what[RIX_KEEP_COUNTERS] = { "latest", "hourly", "daily", "weekly", "monthly", "yearly" };
	*out = NULL;
	if (p == NULL || p->version != RIX_FORGET_POLICY_VERSION)
		return rix_error_set(RIX_EINVAL, "forget: a policy of another version");
	rix__buf b = { 0 };
	char tmp[RIX_DURATION_MAX + 64];
	bool any = false;
	for (int i = 0; i < RIX_KEEP_COUNTERS; i++) {
		int c = count(p, i);
		if (c > 0)
			snprintf(tmp, sizeof(tmp), "%s%d %s", any ? ", " : "", c, what[i]);
		else if (c == RIX_KEEP_UNLIMITED)
			snprintf(tmp, sizeof(tmp), "%sall %s", any ? ", " : "", what[i]);
		else
			continue;
		rix__buf_puts(&b, tmp);
		any = true;
	}
	if (any)
		rix__buf_puts(&b, " snapshots");
	bool anyw = false;
	for (int i = 0; i < 5; i++) {
		if (rix_duration_zero(withins(p, i)))
			continue;
		char d[RIX_DURATION_MAX];
		rix_duration_format(d, withins(p, i));
		snprintf(tmp, sizeof(tmp), "%s%s snapshots within %s", any || anyw ? ", " : "", what[i + 1], d);
		rix__buf_puts(&b, tmp);
		anyw = true;
	}
	any |= anyw;
	if (p->ntags > 0) {
		rix__buf_puts(&b, any ? " and all snapshots with tags [" : "all snapshots with tags [");
		for (size_t i = 0; i < p->ntags; i++) {
			if (i > 0)
				rix__buf_puts(&b, " ");
			put_tag_list(&b, p->tags[i]);
		}
		rix__buf_puts(&b, "]");
		any = true;
	}
	if (!rix_duration_zero(&p->within)) {
		char d[RIX_DURATION_MAX];
		rix_duration_format(d, &p->within);
		snprintf(tmp, sizeof(tmp), "%sall snapshots within %s of the newest", any ? " and " : "", d);
		rix__buf_puts(&b, tmp);
	}
	char *s = rix_malloc(b.len + 6);
	if (s == NULL || b.failed) {
		rix_free(s);
		rix__buf_free(&b);
		return rix_error_set(RIX_ENOMEM, "forget: out of memory");
	}
	memcpy(s, "keep ", 5);
	if (b.len > 0)
		memcpy(s + 5, b.p, b.len);
	s[5 + b.len] = '\0';
	rix__buf_free(&b);
	*out = s;
	return 0;
}

/* ==== the calendar ============================================================================ */

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* Days since 1970-01-01 of y-m-d (proleptic Gregorian; m 1..12). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = floor_div(y, 400), yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	z += 719468;
	int64_t era = floor_div(z, 146097), doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = era * 400 + yoe + (*m <= 2);
}

/* A time's wall clock in its own zone, as Go's Year(), Month(), Day(), Hour(), ISOWeek() read it. */
struct wall {
	int64_t year;
	int month, day, hour;
	int64_t iso_year;
	int iso_week;
};

static struct wall wall_of(const rix_time *t)
{
	struct wall w;
	int64_t local = t->sec + t->utc_offset, days = floor_div(local, 86400);
	w.hour = (int)((local - days * 86400) / 3600);
	civil_from_days(days, &w.year, &w.month, &w.day);
	/* ISO 8601: the week's Thursday decides its year; the week is that Thursday's day of year / 7. */
	int weekday = (int)((days + 3) - floor_div(days + 3, 7) * 7); /* 0 Monday: 1970-01-01 was a Thursday */
	int64_t thursday = days - weekday + 3;
	int m, d;
	civil_from_days(thursday, &w.iso_year, &m, &d);
	w.iso_week = (int)((thursday - days_from_civil(w.iso_year, 1, 1)) / 7 + 1);
	return w;
}

/* The bucket of kind k (1 hourly .. 5 yearly) of w: restic's ymdh, ymd, yw, ym, y. */
static int64_t bucket(const struct wall *w, int k)
{
	switch (k) {
	case 1:
		return w->year * 1000000 + w->month * 10000 + w->day * 100 + w->hour;
	case 2:
		return w->year * 10000 + w->month * 100 + w->day;
	case 3:
		return w->iso_year * 100 + w->iso_week;
	case 4:
		return w->year * 100 + w->month;
	default:
		return w->year;
	}
}

/*
 * latest - d as restic computes it: latest.AddDate(-y, -m, -d) in latest's zone (Go's Date
 * normalizing, in the local zone when latest's offset is the local one then, as Go's time.Parse
 * gives a time the Local location so), then minus d's hours.
 */
static rix_time cutoff(const rix_time *latest, bool local, const rix_duration *dur)
{
	int64_t wall = latest->sec + latest->utc_offset, days = floor_div(wall, 86400), y;
	int64_t secs = wall - days * 86400;
	int m, d;
	civil_from_days(days, &y, &m, &d);
	int64_t mon = (int64_t)m - 1 - dur->months;
	y -= dur->years;
	y += floor_div(mon, 12);
	mon -= floor_div(mon, 12) * 12;
	int64_t unix_wall = (days_from_civil(y, mon + 1, 1) + d - 1 - dur->days) * 86400 + secs;
	int64_t off = latest->utc_offset;
	if (local) { /* Go's Date in Local: the offset at the wall time read as UTC, then checked */
		off = rix_time_local(unix_wall, 0).utc_offset;
		if (off != 0)
			off = rix_time_local(unix_wall - off, 0).utc_offset;
	}
	rix_time t = { .sec = unix_wall - off - (int64_t)dur->hours * 3600, .nsec = latest->nsec, .utc_offset = 0 };
	return t;
}

/* ==== ApplyPolicy ============================================================================= */

void rix_forget_result_free(rix_forget_result *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->nkeep; i++) {
		for (size_t k = 0; k < r->reasons[i].nmatches; k++)
			rix_free((void *)r->reasons[i].matches[k]);
		rix_free(r->reasons[i].matches);
	}
	rix_free(r->keep);
	rix_free(r->reasons);
	rix_free(r->remove);
	rix_free(r);
}

/* Newest first; the same instant by ID. */
static int newest_first(const void *a, const void *b)
{
	const rix_snapshot *x = *(rix_snapshot *const *)a, *y = *(rix_snapshot *const *)b;
	int c = rix_time_cmp(&y->time, &x->time);
	return c != 0 ? c : memcmp(x->id.b, y->id.b, sizeof(x->id.b));
}

/* Appends a copy of s to reason r (room for every rule's match was made). false: out of memory. */
static bool add_match(rix_forget_reason *r, const char *s)
{
	char *c = rix_malloc(strlen(s) + 1);
	if (c == NULL)
		return false;
	strcpy(c, s);
	r->matches[r->nmatches++] = c;
	return true;
}

#define MATCHES_MAX(p) ((p)->ntags + 12)

int rix_forget_apply(rix_forget_result **out, const rix_snapshot_list *l, const rix_forget_policy *p,
		     const rix_time *now)
{
	static const char *const reason[RIX_KEEP_COUNTERS] = { "last snapshot",    "hourly snapshot",
							       "daily snapshot",   "weekly snapshot",
							       "monthly snapshot", "yearly snapshot" };
	static const char *const reason_within[5] = { "hourly within", "daily within", "weekly within",
						      "monthly within", "yearly within" };
	*out = NULL;
	if (p == NULL || p->version != RIX_FORGET_POLICY_VERSION)
		return rix_error_set(RIX_EINVAL, "forget: a policy of another version");
	for (int i = 0; i < RIX_KEEP_COUNTERS; i++)
		if (count(p, i) < RIX_KEEP_UNLIMITED)
			return rix_error_set(RIX_EINVAL, "forget: negative values not allowed, use 'unlimited' instead");
	const size_t n = l->count;
	rix_forget_result *r = rix_calloc(1, sizeof(*r));
	rix_snapshot **sorted = rix_calloc(n + 1, sizeof(*sorted));
	if (r == NULL || sorted == NULL || (r->keep = rix_calloc(n + 1, sizeof(*r->keep))) == NULL ||
	    (r->reasons = rix_calloc(n + 1, sizeof(*r->reasons))) == NULL ||
	    (r->remove = rix_calloc(n + 1, sizeof(*r->remove))) == NULL) {
		rix_free(sorted);
		rix_forget_result_free(r);
		return rix_error_set(RIX_ENOMEM, "forget: out of memory");
	}
	if (n > 0)
		memcpy(sorted, l->items, n * sizeof(*sorted));
	if (n > 1)
		qsort(sorted, n, sizeof(*sorted), newest_first);
	int rc = 0;
	const bool empty = rix_forget_policy_empty(p);
	/* The latest snapshot not in the future; none: Go's zero time (year 1, UTC). */
	rix_time clock = now != NULL ? *now : rix_time_now(), latest = { .sec = -62135596800 };
	bool latest_local = false;
	for (size_t i = 0; i < n; i++) {
		const rix_time *t = &sorted[i]->time;
		if (rix_time_cmp(t, &latest) > 0 && rix_time_cmp(t, &clock) < 0) {
			latest = *t;
			latest_local = rix_time_local(t->sec, 0).utc_offset == t->utc_offset;
		}
	}
	rix_time within_cut = cutoff(&latest, latest_local, &p->within), wcut[5];
	for (int k = 0; k < 5; k++)
		wcut[k] = cutoff(&latest, latest_local, withins(p, k));
	int left[RIX_KEEP_COUNTERS];
	int64_t last[RIX_KEEP_COUNTERS], wlast[5];
	for (int k = 0; k < RIX_KEEP_COUNTERS; k++) {
		left[k] = count(p, k);
		last[k] = -1;
	}
	for (int k = 0; k < 5; k++)
		wlast[k] = -1;
	for (size_t nr = 0; nr < n && rc == 0; nr++) {
		rix_snapshot *cur = sorted[nr];
		rix_forget_reason *why = &r->reasons[r->nkeep];
		why->matches = rix_calloc(MATCHES_MAX(p), sizeof(*why->matches));
		if (why->matches == NULL) {
			rc = rix_error_set(RIX_ENOMEM, "forget: out of memory");
			break;
		}
		bool ok = true;
		if (empty) {
			ok = add_match(why, "policy is empty");
		} else {
			struct wall w = wall_of(&cur->time);
			for (size_t t = 0; t < p->ntags && ok; t++) {
				rix_snapshot_filter f = RIX_SNAPSHOT_FILTER_INIT;
				f.tags = &p->tags[t];
				f.ntags = 1;
				if (rix_snapshot_matches(cur, &f)) {
					rix__buf b = { 0 };
					rix__buf_puts(&b, "has tags ");
					put_tag_list(&b, p->tags[t]);
					ok = !b.failed && (b.p[b.len] = '\0', add_match(why, (char *)b.p));
					rix__buf_free(&b);
				}
			}
			char d[RIX_DURATION_MAX], s[RIX_DURATION_MAX + 32];
			if (ok && !rix_duration_zero(&p->within) && rix_time_cmp(&cur->time, &within_cut) > 0) {
				rix_duration_format(d, &p->within);
				snprintf(s, sizeof(s), "within %s", d);
				ok = add_match(why, s);
			}
			for (int k = 0; k < RIX_KEEP_COUNTERS && ok; k++) {
				if (left[k] > 0 || left[k] == RIX_KEEP_UNLIMITED) {
					int64_t val = k == 0 ? (int64_t)nr : bucket(&w, k);
					if (val != last[k]) {
						last[k] = val;
						if (left[k] > 0)
							left[k]--;
						ok = add_match(why, reason[k]);
					}
				}
			}
			for (int k = 0; k < 5 && ok; k++) {
				if (!rix_duration_zero(withins(p, k)) && rix_time_cmp(&cur->time, &wcut[k]) > 0) {
					int64_t val = bucket(&w, k + 1);
					if (val != wlast[k]) {
						wlast[k] = val;
						rix_duration_format(d, withins(p, k));
						snprintf(s, sizeof(s), "%s %s", reason_within[k], d);
						ok = add_match(why, s);
					}
				}
			}
		}
		if (!ok) {
			rc = rix_error_set(RIX_ENOMEM, "forget: out of memory");
			r->nkeep++; /* freed with the others */
			break;
		}
		if (why->nmatches > 0) {
			for (int k = 0; k < RIX_KEEP_COUNTERS; k++)
				why->counters[k] = left[k];
			r->keep[r->nkeep++] = cur;
		} else {
			rix_free(why->matches);
			why->matches = NULL;
			r->remove[r->nremove++] = cur;
		}
	}
	rix_free(sorted);
	if (rc != 0) {
		rix_forget_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}
