#!/bin/bash
# Start a real single-machine Slurm cluster (Debian 12, slurm-wlm 22.05) on loopback, for tests
# and rehearsals. No systemd: every daemon runs in the foreground of its own session, its PID is
# written under $SLURM_DIR/run/, and scripts/slurm-stop.sh stops exactly those PIDs.
#
# Layout (one real node, the rest are power-saving CLOUD nodes that only exist on paper until
# Slurm resumes them):
#
#   node            CPUs  RealMemory  GRES        partitions   state
#   local1          4     4000        gpu:fake:2  cpu*, ml     idle (a real slurmd; runs jobs)
#   big-cpu-1       64    256000      -           cpu*         idle~ (CLOUD, powered down)
#   gpu-a100-[1-2]  32    512000      gpu:a100:4  ml           idle~
#   gpu-h100-1      96    1024000     gpu:h100:8  ml           idle~
#   gpu-any-1       16    128000      gpu:2       ml           idle~ (untyped GPUs)
#   test-cloud-[1-N] 2    1000        -           cloud        idle~ (small, for hook tests;
#                                                                 N = CLOUD_NODES)
#
# When Slurm resumes a CLOUD node it runs $SLURM_DIR/bin/resume.sh with a hostlist. That wrapper
# logs to log/power.log, runs $RESUME_PROGRAM (if set) with the same arguments and environment,
# and with SIMULATE_BOOT=1 "boots" each node: after BOOT_DELAY seconds a `slurmd -D -b -N <node>`
# starts on this machine and registers under the node's name, so the job really runs.
# suspend.sh runs $SUSPEND_PROGRAM, then stops that slurmd by PID; resume-fail.sh runs
# $RESUME_FAIL_PROGRAM. The generated bin/boot-node.sh and bin/halt-node.sh can also be called
# by any other program to boot or halt a node by hand.
#
# Settings (environment):
#   SLURM_DIR           cluster directory, wiped on start        (/tmp/scoctl-slurm)
#   PORT_BASE           first of the ports below                 (6817)
#   CTLD_PORT           slurmctld                                (PORT_BASE)
#   SLURMD_PORT         slurmd of the real node                  (PORT_BASE+1)
#   RESTD_PORT          slurmrestd on 127.0.0.1, JWT auth        (PORT_BASE+3)
#   NODE_PORT_BASE      CLOUD nodes get NODE_PORT_BASE+0..8      (PORT_BASE+10)
#   RESTD               1 = start slurmrestd                     (1)
#   RESTD_PLUGINS       its OpenAPI plugins            (every installed openapi/v0.0.NN)
#   LOCAL_NODE LOCAL_CPUS LOCAL_MEM LOCAL_GPUS                   (local1 4 4000 2)
#   SIMULATE_BOOT       1 = resumed CLOUD nodes really boot      (1)
#   BOOT_DELAY          seconds a simulated boot takes           (1)
#   CLOUD_NODES         test-cloud-1..N in partition cloud, 2-4  (2)
#   CRED_EXPIRE         AuthInfo cred_expire: how long a requeued job waits to start again
#                       (Slurm's 120)
#   RESUME_TIMEOUT SUSPEND_TIME                                  (60 600)
#   MIN_JOB_AGE         seconds a finished job stays in squeue  (300; below 60 slurmctld
#                       purges every max(10, MIN_JOB_AGE) s)
#   RESUME_PROGRAM SUSPEND_PROGRAM RESUME_FAIL_PROGRAM   programs chained by the wrappers
#   PROLOG_SLURMCTLD EPILOG_SLURMCTLD                    PrologSlurmctld / EpilogSlurmctld
#
# munged is private too (own key, socket and PID in $SLURM_DIR/munge; slurm.conf names the
# socket in AuthInfo), so the cluster neither needs nor disturbs a munged of the host.
# Afterwards: `. $SLURM_DIR/env.sh` exports SLURM_CONF (every Slurm client needs it).
# On failure the log tails are printed, whatever was started is stopped, and the exit code is 1.
set -euo pipefail

T0=$EPOCHREALTIME
HERE=$(cd "$(dirname "$0")" && pwd)
cd /   # daemons inherit the working directory; never leave them in one that gets deleted

BASE=${SLURM_DIR:-/tmp/scoctl-slurm}
ETC=$BASE/etc
PORT_BASE=${PORT_BASE:-6817}
CTLD_PORT=${CTLD_PORT:-$PORT_BASE}
SLURMD_PORT=${SLURMD_PORT:-$((PORT_BASE + 1))}
RESTD_PORT=${RESTD_PORT:-$((PORT_BASE + 3))}
NODE_PORT_BASE=${NODE_PORT_BASE:-$((PORT_BASE + 10))}
RESTD=${RESTD:-1}
LOCAL_NODE=${LOCAL_NODE:-local1}
LOCAL_CPUS=${LOCAL_CPUS:-4}     # may exceed the real cores: SlurmdParameters=config_overrides
LOCAL_MEM=${LOCAL_MEM:-4000}    # MB; may exceed the real RAM for the same reason
LOCAL_GPUS=${LOCAL_GPUS:-2}
SIMULATE_BOOT=${SIMULATE_BOOT:-1}
BOOT_DELAY=${BOOT_DELAY:-1}
CLOUD_NODES=${CLOUD_NODES:-2}
CRED_EXPIRE=${CRED_EXPIRE:-120}
RESUME_TIMEOUT=${RESUME_TIMEOUT:-60}
SUSPEND_TIME=${SUSPEND_TIME:-600}
MIN_JOB_AGE=${MIN_JOB_AGE:-300}
HOST_SHORT=$(hostname -s)

log() { printf '[slurm-start %6.2fs] %s\n' "$(elapsed)" "$*"; }
elapsed() {
  local now=$EPOCHREALTIME
  local a=$(( ${now%.*} * 1000000 + 10#${now#*.} )) b=$(( ${T0%.*} * 1000000 + 10#${T0#*.} ))
  printf '%d.%02d' $(( (a - b) / 1000000 )) $(( (a - b) % 1000000 / 10000 ))
}
fail() {
  echo "slurm-start: FAILED: $*" >&2
  for f in "$BASE"/log/slurmctld.log "$BASE"/log/slurmd.*.log "$BASE"/log/*.stdout \
           "$BASE"/log/munged.log "$BASE"/log/slurmrestd.log; do
    if [ -s "$f" ]; then echo "--- $f" >&2; tail -25 "$f" >&2; fi
  done
  SLURM_DIR=$BASE "$HERE/slurm-stop.sh" >&2 || true
  exit 1
}

[ "$(id -u)" = 0 ] || { echo "slurm-start: must run as root" >&2; exit 1; }
for bin in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sinfo; do
  [ -x "$bin" ] || { echo "slurm-start: $bin missing (run scripts/setup-slurm.sh)" >&2; exit 1; }
done
case "$BASE" in
  ""|/|/tmp|/tmp/|/etc|/var|/usr|/root|/home) echo "slurm-start: refusing SLURM_DIR=$BASE" >&2; exit 1 ;;
esac
if [ -d "$BASE/run" ]; then
  for p in "$BASE"/run/*.pid; do
    if [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null; then
      echo "slurm-start: already running ($p); run scripts/slurm-stop.sh first" >&2; exit 1
    fi
  done
fi
rm -rf "$BASE"
mkdir -p "$ETC" "$BASE"/{state,spool,log,run,bin,jobcomp,jobs,dev}
chmod 755 "$BASE" "$ETC"   # slurmrestd runs as nobody and reads slurm.conf

##################################################################### munge (private)
MUNGE=$BASE/munge
install -d -o munge -g munge -m 0711 "$MUNGE"
install -d -o munge -g munge -m 0755 "$MUNGE/sock"   # clients of every uid reach the socket
dd if=/dev/urandom of="$MUNGE/munge.key" bs=1024 count=1 2>/dev/null
chown munge:munge "$MUNGE/munge.key"; chmod 0400 "$MUNGE/munge.key"
MUNGE_SOCKET=$MUNGE/sock/munge.socket
setsid setpriv --reuid=munge --regid=munge --clear-groups /usr/sbin/munged --foreground \
  --socket="$MUNGE_SOCKET" --key-file="$MUNGE/munge.key" --pid-file="$MUNGE/munged.pid" \
  --seed-file="$MUNGE/munged.seed" --log-file="$BASE/log/munged.log" \
  >"$BASE/log/munged.stdout" 2>&1 </dev/null &
echo $! >"$BASE/run/munged.pid"
for _ in $(seq 100); do
  munge -S "$MUNGE_SOCKET" -n </dev/null 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1 \
    && break
  kill -0 "$(cat "$BASE/run/munged.pid")" 2>/dev/null || fail "munged exited"
  sleep 0.05
done
munge -S "$MUNGE_SOCKET" -n </dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null \
  || fail "munged does not answer"
log "munged up (pid $(cat "$BASE/run/munged.pid"))"

############################################################# power-saving programs
cat >"$BASE/power.env" <<EOF
BASE='$BASE'
SLURM_CONF='$ETC/slurm.conf'
SIMULATE_BOOT='$SIMULATE_BOOT'
BOOT_DELAY='$BOOT_DELAY'
RESUME_PROGRAM='${RESUME_PROGRAM:-}'
SUSPEND_PROGRAM='${SUSPEND_PROGRAM:-}'
RESUME_FAIL_PROGRAM='${RESUME_FAIL_PROGRAM:-}'
EOF

# boot-node.sh NODE: started in its own session; its PID file names it while it "boots", and
# exec keeps the same PID for the slurmd, so slurm-stop.sh always finds what runs.
# -b reports "rebooted now": without it slurmctld ignores the registration of a POWERING_UP node.
cat >"$BASE/bin/boot-node.sh" <<'EOF'
#!/bin/sh
. "$(dirname "$0")/../power.env"
node=$1
echo $$ >"$BASE/run/slurmd.$node.pid"  # whoever starts it, halt-node.sh finds it
sleep "$BOOT_DELAY"
[ -e "$BASE/run/STOPPING" ] && exit 0
mkdir -p "$BASE/spool/$node"
echo "$(date +%FT%T) BOOTED $node (slurmd pid $$)" >>"$BASE/log/power.log"
exec /usr/sbin/slurmd -D -b -N "$node" -f "$SLURM_CONF" >>"$BASE/log/slurmd.$node.stdout" 2>&1
EOF
cat >"$BASE/bin/halt-node.sh" <<'EOF'
#!/bin/sh
. "$(dirname "$0")/../power.env"
for node in $(SLURM_CONF=$SLURM_CONF /usr/bin/scontrol show hostnames "$1"); do
  f=$BASE/run/slurmd.$node.pid
  if [ -f "$f" ]; then
    pid=$(cat "$f"); rm -f "$f"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    echo "$(date +%FT%T) HALTED $node (pid $pid)" >>"$BASE/log/power.log"
  fi
done
EOF
cat >"$BASE/bin/resume.sh" <<'EOF'
#!/bin/sh
# ResumeProgram: runs as SlurmUser with only SLURM_CONF and SLURM_RESUME_FILE set; $1 = hostlist
. "$(dirname "$0")/../power.env"
echo "$(date +%FT%T) RESUME [$*]" >>"$BASE/log/power.log"
rc=0
if [ -n "$RESUME_PROGRAM" ]; then
  "$RESUME_PROGRAM" "$@" >>"$BASE/log/power-hooks.log" 2>&1 || rc=$?
  echo "$(date +%FT%T) RESUME_PROGRAM $RESUME_PROGRAM rc=$rc" >>"$BASE/log/power.log"
fi
if [ "$SIMULATE_BOOT" = 1 ]; then
  for node in $(SLURM_CONF=$SLURM_CONF /usr/bin/scontrol show hostnames "$1"); do
    setsid "$BASE/bin/boot-node.sh" "$node" </dev/null >/dev/null 2>&1 &
    echo $! >"$BASE/run/slurmd.$node.pid"
  done
fi
exit "$rc"
EOF
cat >"$BASE/bin/suspend.sh" <<'EOF'
#!/bin/sh
# SuspendProgram: $1 = hostlist of nodes idle for SuspendTime
. "$(dirname "$0")/../power.env"
echo "$(date +%FT%T) SUSPEND [$*]" >>"$BASE/log/power.log"
rc=0
if [ -n "$SUSPEND_PROGRAM" ]; then
  "$SUSPEND_PROGRAM" "$@" >>"$BASE/log/power-hooks.log" 2>&1 || rc=$?
  echo "$(date +%FT%T) SUSPEND_PROGRAM $SUSPEND_PROGRAM rc=$rc" >>"$BASE/log/power.log"
fi
"$BASE/bin/halt-node.sh" "$1"
exit "$rc"
EOF
cat >"$BASE/bin/resume-fail.sh" <<'EOF'
#!/bin/sh
# ResumeFailProgram: $1 = hostlist of nodes that missed ResumeTimeout
. "$(dirname "$0")/../power.env"
echo "$(date +%FT%T) RESUMEFAIL [$*]" >>"$BASE/log/power.log"
rc=0
if [ -n "$RESUME_FAIL_PROGRAM" ]; then
  "$RESUME_FAIL_PROGRAM" "$@" >>"$BASE/log/power-hooks.log" 2>&1 || rc=$?
  echo "$(date +%FT%T) RESUME_FAIL_PROGRAM $RESUME_FAIL_PROGRAM rc=$rc" >>"$BASE/log/power.log"
fi
"$BASE/bin/halt-node.sh" "$1"
exit "$rc"
EOF
chmod 755 "$BASE"/bin/*.sh
touch "$BASE/log/power.log"

HOOKS=""
[ -n "${PROLOG_SLURMCTLD:-}" ] && HOOKS="PrologSlurmctld=$PROLOG_SLURMCTLD"
[ -n "${EPILOG_SLURMCTLD:-}" ] && HOOKS="$HOOKS
EpilogSlurmctld=$EPILOG_SLURMCTLD"

######################################################################## slurm.conf
JWT_CONF="# auth_jwt.so missing (package slurm-wlm-jwt-plugin): no JWT, no slurmrestd"
if ls /usr/lib/*/slurm-wlm/auth_jwt.so >/dev/null 2>&1; then
  JWT_CONF="AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$ETC/jwt_hs256.key"
  dd if=/dev/urandom of="$ETC/jwt_hs256.key" bs=32 count=1 2>/dev/null
  chmod 0600 "$ETC/jwt_hs256.key"
elif [ "$RESTD" = 1 ]; then
  log "WARNING: auth_jwt.so missing - not starting slurmrestd"
  RESTD=0
fi
LOCAL_GRES=""
[ "$LOCAL_GPUS" -gt 0 ] && LOCAL_GRES="Gres=gpu:fake:$LOCAL_GPUS"
P=$NODE_PORT_BASE
case $CLOUD_NODES in 2|3|4) ;; *) fail "CLOUD_NODES must be 2, 3 or 4, not $CLOUD_NODES" ;; esac
CLOUD_EXTRA=""  # test-cloud-3 and -4 on ports P+7, P+8 (P+6 is gpu-any-1's)
for i in $(seq 3 "$CLOUD_NODES"); do
  CLOUD_EXTRA="$CLOUD_EXTRA
NodeName=test-cloud-$i NodeAddr=127.0.0.1 Port=$((P + i + 4)) CPUs=2 RealMemory=1000 Feature=test"
done

cat >"$ETC/slurm.conf" <<EOF
# generated by scoctl scripts/slurm-start.sh
ClusterName=scoctl
SlurmctldHost=$HOST_SHORT(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=$CRED_EXPIRE
$JWT_CONF
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$BASE/run/slurmctld.daemon-pid
SlurmdPidFile=$BASE/run/slurmd.%n.daemon-pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups, no systemd (22.05 always loads a cgroup plugin; v1 is a no-op here)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without a default a job takes all of a node's memory and every other job pends
DefMemPerCPU=250
SchedulerParameters=bf_interval=1,sched_min_interval=100000
# trust the CPUs/RealMemory/Gres written here over the probed hardware
SlurmdParameters=config_overrides
ReturnToService=2
MessageTimeout=10
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=$MIN_JOB_AGE
KillWait=5
Waittime=0
# no slurmdbd: no accounting, but a job-completion log (sacct -c)
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$BASE/jobcomp/jobcomp.log
GresTypes=gpu
# power saving: CLOUD nodes are resumed on demand and suspended after SuspendTime idle
ResumeProgram=$BASE/bin/resume.sh
SuspendProgram=$BASE/bin/suspend.sh
ResumeFailProgram=$BASE/bin/resume-fail.sh
SuspendTime=$SUSPEND_TIME
SuspendTimeout=30
ResumeTimeout=$RESUME_TIMEOUT
ResumeRate=0
SuspendRate=0
SuspendExcNodes=$LOCAL_NODE
SlurmctldParameters=idle_on_node_suspend
# powered-down CLOUD nodes are hidden from sinfo/scontrol without this
PrivateData=cloud
$HOOKS

# CLOUD nodes get NodeAddr=127.0.0.1 and a port of their own: nothing listens there until a
# simulated boot, so RPCs fail fast instead of resolving names that do not exist.
# Weight>1 makes Slurm prefer the real node when it has room.
NodeName=$LOCAL_NODE NodeHostname=$HOST_SHORT NodeAddr=127.0.0.1 CPUs=$LOCAL_CPUS RealMemory=$LOCAL_MEM $LOCAL_GRES State=UNKNOWN
NodeName=DEFAULT State=CLOUD Weight=100
NodeName=big-cpu-1 NodeAddr=127.0.0.1 Port=$P CPUs=64 RealMemory=256000 Feature=bigmem
NodeName=gpu-a100-1 NodeAddr=127.0.0.1 Port=$((P + 1)) CPUs=32 RealMemory=512000 Gres=gpu:a100:4 Feature=a100
NodeName=gpu-a100-2 NodeAddr=127.0.0.1 Port=$((P + 2)) CPUs=32 RealMemory=512000 Gres=gpu:a100:4 Feature=a100
NodeName=gpu-h100-1 NodeAddr=127.0.0.1 Port=$((P + 3)) CPUs=96 RealMemory=1024000 Gres=gpu:h100:8 Feature=h100
NodeName=gpu-any-1 NodeAddr=127.0.0.1 Port=$((P + 6)) CPUs=16 RealMemory=128000 Gres=gpu:2 Feature=gpu
NodeName=test-cloud-1 NodeAddr=127.0.0.1 Port=$((P + 4)) CPUs=2 RealMemory=1000 Feature=test
NodeName=test-cloud-2 NodeAddr=127.0.0.1 Port=$((P + 5)) CPUs=2 RealMemory=1000 Feature=test
$CLOUD_EXTRA

PartitionName=cpu Nodes=$LOCAL_NODE,big-cpu-1 Default=YES MaxTime=INFINITE State=UP
PartitionName=ml Nodes=$LOCAL_NODE,gpu-a100-[1-2],gpu-h100-1,gpu-any-1 MaxTime=INFINITE State=UP
PartitionName=cloud Nodes=test-cloud-[1-$CLOUD_NODES] MaxTime=INFINITE State=UP
EOF

# gres.conf is only read by slurmds. A typed Count= line without File= is ignored by 22.05 and
# the node goes inval, so GPUs are symlinks to /dev/null (they stat as character devices and
# Slurm sets CUDA_VISIBLE_DEVICES for jobs).
for i in 0 1 2 3 4 5 6 7; do ln -sf /dev/null "$BASE/dev/gpu$i"; done
{
  echo "AutoDetect=off"
  if [ "$LOCAL_GPUS" -gt 0 ]; then
    echo "NodeName=$LOCAL_NODE Name=gpu Type=fake File=$BASE/dev/gpu[0-$((LOCAL_GPUS - 1))]"
  fi
  echo "NodeName=gpu-a100-[1-2] Name=gpu Type=a100 File=$BASE/dev/gpu[0-3]"
  echo "NodeName=gpu-h100-1 Name=gpu Type=h100 File=$BASE/dev/gpu[0-7]"
  echo "NodeName=gpu-any-1 Name=gpu File=$BASE/dev/gpu[0-1]"
} >"$ETC/gres.conf"

cat >"$ETC/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
IgnoreSystemd=yes
IgnoreSystemdOnFailure=yes
EOF

cat >"$BASE/env.sh" <<EOF
export SLURM_CONF=$ETC/slurm.conf
EOF
export SLURM_CONF=$ETC/slurm.conf

####################################################################### daemons
setsid /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$BASE/log/slurmctld.stdout" 2>&1 </dev/null &
echo $! >"$BASE/run/slurmctld.pid"
CTLD_PID=$!
for _ in $(seq 200); do
  scontrol ping 2>/dev/null | grep -q UP && break
  kill -0 "$CTLD_PID" 2>/dev/null || fail "slurmctld exited"
  sleep 0.05
done
scontrol ping 2>/dev/null | grep -q UP || fail "slurmctld did not come up"
log "slurmctld up (pid $CTLD_PID, port $CTLD_PORT)"

mkdir -p "$BASE/spool/$LOCAL_NODE"
setsid /usr/sbin/slurmd -D -N "$LOCAL_NODE" -f "$SLURM_CONF" \
  >"$BASE/log/slurmd.stdout" 2>&1 </dev/null &
echo $! >"$BASE/run/slurmd.pid"
SLURMD_PID=$!

if [ "$RESTD" = 1 ]; then
  # slurmrestd refuses root and SlurmUser; it authenticates every request with a JWT. Every
  # installed slurmctld API version is served (22.05: v0.0.36 to v0.0.38), as a site would,
  # so clients have to pick one.
  if [ -z "${RESTD_PLUGINS:-}" ]; then
    for so in /usr/lib/*/slurm-wlm/openapi_v0_0_*.so; do
      [ -e "$so" ] || continue
      v=${so##*/openapi_v}; v=${v%.so}
      RESTD_PLUGINS="${RESTD_PLUGINS:+$RESTD_PLUGINS,}openapi/v$(echo "$v" | tr _ .)"
    done
  fi
  SLURM_JWT=daemon setsid /usr/sbin/slurmrestd -f "$SLURM_CONF" -a rest_auth/jwt \
    -s "${RESTD_PLUGINS:-openapi/v0.0.38}" -u nobody -g nogroup "127.0.0.1:$RESTD_PORT" \
    >"$BASE/log/slurmrestd.log" 2>&1 </dev/null &
  echo $! >"$BASE/run/slurmrestd.pid"
fi

st=""
for _ in $(seq 600); do    # up to 30 s
  st=$(sinfo -h -n "$LOCAL_NODE" -o '%T' 2>/dev/null | head -1 || true)
  [ "$st" = idle ] && break
  kill -0 "$SLURMD_PID" 2>/dev/null || fail "slurmd exited"
  sleep 0.05
done
[ "$st" = idle ] || fail "node $LOCAL_NODE not idle (state: ${st:-?})"
log "slurmd up, $LOCAL_NODE idle (pid $SLURMD_PID, port $SLURMD_PORT)"

if [ "$RESTD" = 1 ]; then
  up=0
  for _ in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$RESTD_PORT") 2>/dev/null; then up=1; break; fi
    kill -0 "$(cat "$BASE/run/slurmrestd.pid")" 2>/dev/null || fail "slurmrestd exited"
    sleep 0.05
  done
  [ "$up" = 1 ] || fail "slurmrestd does not listen on 127.0.0.1:$RESTD_PORT"
  echo "export SLURM_REST_URL=http://127.0.0.1:$RESTD_PORT" >>"$BASE/env.sh"
  log "slurmrestd up on http://127.0.0.1:$RESTD_PORT (pid $(cat "$BASE/run/slurmrestd.pid"))"
fi

log "ready: . $BASE/env.sh"
