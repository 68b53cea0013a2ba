#!/usr/bin/env bash
# The shared library exports exactly what the public headers declare: every dynamic symbol
# librix.so defines must be a function named in include/rix/*.h (stable or advanced section),
# and every function a header declares must be exported. Usage: check_exports.sh LIB INCLUDE_DIR
set -euo pipefail
lib=$1 inc=$2
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
declared=$(cat "$inc"/rix/*.h | tr -d '\n' | grep -oE 'RIX_EXPORT[^;{]*\brix_[a-z0-9_]+ *\(' |
	grep -oE 'rix_[a-z0-9_]+ *\($' | tr -d ' (' | sort -u)
[ -n "$exported" ] || { echo "no symbols exported by $lib"; exit 1; }
[ -n "$declared" ] || { echo "no declarations found in $inc/rix"; exit 1; }
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
status=0
if [ -n "$extra" ]; then
	echo "exported but declared in no public header:"; echo "$extra" | sed 's/^/  /'; status=1
fi
if [ -n "$missing" ]; then
	echo "declared RIX_EXPORT in a public header but not exported:"; echo "$missing" | sed 's/^/  /'; status=1
fi
[ $status = 0 ] && echo "exports: $(echo "$exported" | wc -l) symbols, all declared in include/rix"
exit $status
