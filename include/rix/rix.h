/*
 * rix/rix.h — everything public.
 *
 * Families: error.h (codes, last message), alloc.h (allocator hook), types.h (IDs, blob
 * locations), indexmap.h (the hash table), idset.h (a compact exact set of IDs), index.h (one
 * index file, JSON codec), master_index.h (all indexes, merged), crypto.h (keys, seal/open, SHA-256), pack.h (pack
 * headers and blobs, unpacked files), config.h (the repository config file, chunker polynomial),
 * chunker.h (restic's content-defined chunker), tree.h (tree blobs in restic's bytes),
 * archiver.h (backup), snapshot.h (snapshots: codec, list, filters, find, rewrite),
 * pattern.h (restic's include/exclude patterns), restorer.h (restore), walker.h (loading trees,
 * walking them depth first), repair.h (a new index built from the packs: repair index).
 */
#ifndef RIX_RIX_H
#define RIX_RIX_H

#include "rix/common.h"
#include "rix/error.h"
#include "rix/alloc.h"
#include "rix/types.h"
#include "rix/indexmap.h"
#include "rix/idset.h"
#include "rix/index.h"
#include "rix/master_index.h"
#include "rix/backend.h"
#include "rix/crypto.h"
#include "rix/pack.h"
#include "rix/repo.h"
#include "rix/config.h"
#include "rix/chunker.h"
#include "rix/tree.h"
#include "rix/archiver.h"
#include "rix/snapshot.h"
#include "rix/pattern.h"
#include "rix/restorer.h"
#include "rix/forget.h"
#include "rix/pruner.h"
#include "rix/walker.h"
#include "rix/repair.h"
#endif
