#!/bin/bash
# Stop a cluster started by scripts/slurm-start.sh, strictly by the PIDs recorded in
# $SLURM_DIR/run/*.pid (never by process name).
#
# 1. mark the cluster as stopping (a simulated boot that wakes up now does not start a slurmd);
# 2. cancel every job, so each slurmstepd (not a child of slurmd) exits on its own;
# 3. SIGTERM every daemon (munged too) at once: each needs 1-2 s to exit, so in parallel the
#    whole stop takes about 2.5 s instead of 8; SIGKILL whatever is left after 10 s.
# Every daemon was started with setsid, so its PID is also its process group: the group is
# signalled, which also ends a simulated boot's `sleep`. With REMOVE=1 the directory is deleted.
set -u
BASE=${SLURM_DIR:-/tmp/scoctl-slurm}
T0=$EPOCHREALTIME
[ -d "$BASE/run" ] || { echo "slurm-stop: nothing to stop ($BASE/run missing)"; exit 0; }
export SLURM_CONF=$BASE/etc/slurm.conf
touch "$BASE/run/STOPPING"

alive() { kill -0 "$1" 2>/dev/null; }
signal() {  # signal PID's process group, or the PID alone when it leads none
  kill "-$1" -- "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null
}
stop_pids() {  # stop_pids FILE...: TERM all at once, wait up to 10 s, KILL the rest
  local -A name=()
  local f pid
  for f in "$@"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    rm -f "$f"
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    if alive "$pid"; then signal TERM "$pid"; name[$pid]=$(basename "$f" .pid); fi
  done
  for _ in $(seq 200); do
    local any=0
    for pid in "${!name[@]}"; do alive "$pid" && any=1; done
    [ "$any" = 0 ] && break
    sleep 0.05
  done
  for pid in "${!name[@]}"; do
    if alive "$pid"; then echo "slurm-stop: ${name[$pid]} ($pid) still alive, KILL"; signal KILL "$pid"; fi
    echo "slurm-stop: stopped ${name[$pid]} (pid $pid)"
  done
}

ctld=$BASE/run/slurmctld.pid
if [ -f "$ctld" ] && alive "$(cat "$ctld")"; then
  jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null
    for _ in $(seq 100); do
      [ -z "$(squeue -h -t R,CG,CF -o %A 2>/dev/null)" ] && break
      sleep 0.05
    done
  fi
fi

stop_pids "$BASE"/run/*.pid

if [ "${REMOVE:-0}" = 1 ]; then
  case "$BASE" in ""|/|/tmp|/tmp/|/etc|/var|/usr|/root|/home) ;; *) rm -rf "$BASE" ;; esac
fi
now=$EPOCHREALTIME
echo "slurm-stop: done in $(( (${now%.*} * 1000000 + 10#${now#*.} - ${T0%.*} * 1000000 - 10#${T0#*.}) / 1000 )) ms"
exit 0
