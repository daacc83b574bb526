#!/bin/sh
# incgroup.sh NAME CMD...: runs CMD in memory cgroup NAME (created by
# compare.sh; cgroup v2 or v1), so its page cache counts against the limit;
# with BLKCG (a cgroup v1 blkio directory, compare.sh -w) in that one too.
cg=$1; shift
[ -z "${BLKCG:-}" ] || echo $$ > "$BLKCG/cgroup.procs"
if [ -d "/sys/fs/cgroup/$cg" ] && [ -f "/sys/fs/cgroup/$cg/memory.max" ]; then
  echo $$ > "/sys/fs/cgroup/$cg/cgroup.procs"
elif [ -d "/sys/fs/cgroup/memory/$cg" ]; then
  echo $$ > "/sys/fs/cgroup/memory/$cg/cgroup.procs"
else
  echo "incgroup.sh: no cgroup $cg" >&2; exit 1
fi
exec "$@"
