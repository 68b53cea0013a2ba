/*
 * index/rcu.h — private to index/: read-copy-update for read-mostly published state.
 *
 * Readers bracket their use of published pointers with rix__rcu_read_lock/unlock, which cost
 * two plain stores to a per-thread slot (no atomic read-modify-write, no fence). A writer
 * publishes new state, then calls rix__rcu_synchronize(), which returns once every reader that
 * might still hold an old pointer has left its read section; the old state may then be freed.
 *
 * How the missing reader-side fence is made up for: the writer issues membarrier(2)
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full memory barrier on every CPU executing
 * a thread of this process. After it, a reader that entered before the barrier is visible to
 * the writer's scan (its slot shows an odd sequence) and is waited for; one that enters after
 * it sees the new pointer. Where membarrier is unavailable (old kernel, seccomp) or under
 * ThreadSanitizer, readers use sequentially consistent stores and loads instead (correct,
 * slower).
 *
 * Read sections nest, are short, and must not call rix__rcu_synchronize (that would wait for
 * itself). Slots come from a static pool; threads beyond it share one counted slot.
 */
#ifndef RIX_INDEX_RCU_H
#define RIX_INDEX_RCU_H

void rix__rcu_read_lock(void);
void rix__rcu_read_unlock(void);
void rix__rcu_synchronize(void);

/* Whether the membarrier fast path is in use (for tests and benchmarks to report). */
int rix__rcu_fast(void);

#endif
