#!/bin/bash
# Runs a command on a slower machine made of this one: the command and every process it starts share CPUS cores' worth
# of CPU time, handed out in 10 ms periods (a CFS quota on a cgroup of their own; cgroup v2 or v1's cpu controller).
# For measuring the suite against its budget at the speed this kind of machine has at its slow hours:
#
#   sudo bash scripts/cpu-quota.sh 0.83 env CI=true npm test
#
# 0.83 is two cores at the slow hours' speed (an agent server start costs 2.25-2.34 CPU-s there against 0.88-0.97 at
# the usual speed: 2 x 0.95 / 2.3). A quota is not a slower CPU in every way: one process alone may still run at full
# speed for part of each period, so a phase that uses one core comes out faster than on the slow machine; where the
# run keeps both cores busy (most of the suite) it is the same throughput. Needs root.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 CPUS COMMAND [ARGS...]   (CPUS: cores' worth of CPU time, e.g. 0.83)" >&2; exit 2; }
cpus=$1
shift
period=10000
quota=$(awk -v c="$cpus" -v p="$period" 'BEGIN { q = int(c * p); if (c <= 0 || q < 1000) exit 1; print q }') || {
  echo "$0: CPUS must be a number of cores of at least 0.1, not '$cpus'" >&2
  exit 2
}
name="agentplane-cpu-quota-$$"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
  group=/sys/fs/cgroup/$name
  mkdir "$group"
  echo "$quota $period" >"$group/cpu.max"
elif [ -d /sys/fs/cgroup/cpu ]; then
  group=/sys/fs/cgroup/cpu/$name
  mkdir "$group"
  echo "$period" >"$group/cpu.cfs_period_us"
  echo "$quota" >"$group/cpu.cfs_quota_us"
else
  echo "$0: no cgroup cpu controller under /sys/fs/cgroup" >&2
  exit 1
fi
# The group goes when the command has ended (once its last process has left it).
cleanup() {
  for _ in $(seq 1 50); do rmdir "$group" 2>/dev/null && return; sleep 0.1; done
  echo "$0: left $group behind (a process of the command still runs in it)" >&2
}
trap cleanup EXIT
echo "cpu-quota: ${cpus} cores' worth of CPU time ($quota us every $period us) for: $*" >&2
# A subshell joins the group, then runs the command; everything it starts inherits the group.
status=0
(echo "$BASHPID" >"$group/cgroup.procs" && exec "$@") || status=$?
exit "$status"
