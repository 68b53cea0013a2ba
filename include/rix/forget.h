/*
 * rix/forget.h — which snapshots a `forget` keeps: restic 0.14's policy (ExpirePolicy,
 * ApplyPolicy), applied to one group of snapshots at a time (rix_snapshot_list_group), with the
 * reasons restic gives for each snapshot it keeps.
 *
 *   rix_snapshot_list_load ─> _filter ─> rix_snapshot_list_group ─> rix_forget_apply (each group)
 *                                                                  └─> keep (+ reasons), remove
 *
 * The rules, as restic 0.14's: the group's snapshots newest first; each is kept when
 *   - it has every tag of one of the keep-tag lists                        "has tags [a, b]"
 *   - it is newer than the latest snapshot's time minus within            "within 1y2m"
 *   - for last / hourly / daily / weekly / monthly / yearly with a count left: it is the
 *     first (newest) of its hour, day, ISO week, month or year (last: every snapshot), which
 *     uses one of the count                                  "last snapshot", "daily snapshot"
 *   - for within_hourly ... within_yearly: it is newer than the latest minus that duration and
 *     the first of its hour ... year                                        "daily within 3d"
 * The hour, day, week, month and year are those of the snapshot's own time as written (its UTC
 * offset), as restic reads them. "The latest" is the newest snapshot of the group that is not
 * in the future (restic's findLatestTimestamp); a duration is taken from it in the calendar
 * (years, months, days: Go's AddDate in the latest snapshot's zone) and then in hours.
 *
 * Where rix differs: a count may be RIX_KEEP_UNLIMITED (restic 0.16's "unlimited": every
 * snapshot of its kind, the count not used up). restic 0.14 has no such value; given -1 it keeps
 * nothing for that rule. Snapshots of the same instant are taken by ID (restic's order is the
 * order it listed them in).
 */
#ifndef RIX_FORGET_H
#define RIX_FORGET_H

#include "rix/common.h"

#include <stdbool.h>
#include <stddef.h>

#include "rix/snapshot.h"
#include "rix/tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* restic's Duration: a calendar span, "1y2m3d4h" (each part may be negative or missing). */
typedef struct rix_duration {
	int years, months, days, hours;
} rix_duration;

/*
 * s as restic's ParseDuration reads it: white space around it dropped, then numbers (an optional
 * '-', decimal digits) each followed by its unit y, m (months), d or h; a unit given twice takes
 * the last; "" is the zero duration. *d is set only on success.
 * @return 0; RIX_EINVAL ("no number found", "no unit found after number 3", "invalid unit 'x'
 * found after number 3", a number too large for an int).
 */
RIX_EXPORT RIX_NODISCARD int rix_duration_parse(rix_duration *d, const char *s);

/* d as restic prints it ("1y2m3d4h", its non-zero parts; "" for zero), NUL-terminated. @return its length. */
#define RIX_DURATION_MAX 64
RIX_EXPORT size_t rix_duration_format(char out[RIX_DURATION_MAX], const rix_duration *d);

/* Whether every part of d is zero (no rule). */
RIX_EXPORT bool rix_duration_zero(const rix_duration *d);

/* A count that keeps every snapshot of its kind (restic 0.16's "unlimited"). */
#define RIX_KEEP_UNLIMITED (-1)

/*
 * A policy (restic's --keep-* flags). Counts: 0 no rule, N > 0, or RIX_KEEP_UNLIMITED; other
 * negative counts are refused. Durations: zero is no rule. tags: restic's --keep-tag lists,
 * each "a,b" (split at commas, spaces around each trimmed; "" matches a snapshot without tags),
 * borrowed. Start from RIX_FORGET_POLICY_INIT.
 */
#define RIX_FORGET_POLICY_VERSION 1u
typedef struct rix_forget_policy {
	unsigned version; /* RIX_FORGET_POLICY_VERSION */
	int last, hourly, daily, weekly, monthly, yearly;
	rix_duration within, within_hourly, within_daily, within_weekly, within_monthly, within_yearly;
	const char *const *tags;
	size_t ntags;
} rix_forget_policy;
#define RIX_FORGET_POLICY_INIT { .version = RIX_FORGET_POLICY_VERSION }

/* Whether p has no rule (restic's ExpirePolicy.Empty): then forget removes nothing. */
RIX_EXPORT bool rix_forget_policy_empty(const rix_forget_policy *p);

/*
 * p as restic says it ("keep 2 latest snapshots, 7 daily snapshots, daily snapshots within 1m
 * and all snapshots with tags [[a, b]] and all snapshots within 2d of the newest"; counts of
 * RIX_KEEP_UNLIMITED as "all daily"). *out, the caller's (rix_free).
 * @return 0; RIX_EINVAL (p of another version); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_forget_policy_describe(char **out, const rix_forget_policy *p);

/* The counters of a reason, restic's KeepReason.Counters order. */
enum { RIX_KEEP_COUNTER_LAST, RIX_KEEP_COUNTER_HOURLY, RIX_KEEP_COUNTER_DAILY, RIX_KEEP_COUNTER_WEEKLY,
       RIX_KEEP_COUNTER_MONTHLY, RIX_KEEP_COUNTER_YEARLY, RIX_KEEP_COUNTERS };

/* Why a snapshot is kept: restic's KeepReason. */
typedef struct rix_forget_reason {
	const char **matches;            /* nmatches strings: "last snapshot", "has tags [a]", ... */
	size_t nmatches;
	int counters[RIX_KEEP_COUNTERS]; /* each count left after this snapshot (RIX_KEEP_UNLIMITED stays) */
} rix_forget_reason;

/* What a policy does to one group. The snapshots are borrowed from the list it was applied to. */
typedef struct rix_forget_result {
	rix_snapshot **keep;        /* nkeep snapshots, newest first */
	rix_forget_reason *reasons; /* nkeep: keep[i]'s reasons */
	size_t nkeep;
	rix_snapshot **remove;      /* nremove snapshots, newest first */
	size_t nremove;
} rix_forget_result;

/*
 * Applies p to the snapshots of l (one group; l is not changed), as restic 0.14's ApplyPolicy:
 * an empty policy keeps every snapshot ("policy is empty"). now (NULL: the clock) is the time
 * after which a snapshot is in the future. *out, the caller's (rix_forget_result_free); valid
 * while l's snapshots are.
 * @return 0; RIX_EINVAL (p of another version, a negative count other than RIX_KEEP_UNLIMITED);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_forget_apply(rix_forget_result **out, const rix_snapshot_list *l,
					      const rix_forget_policy *p, const rix_time *now);

/* Frees r (not the snapshots). NULL-safe. */
RIX_EXPORT void rix_forget_result_free(rix_forget_result *r);

#ifdef __cplusplus
}
#endif
#endif
