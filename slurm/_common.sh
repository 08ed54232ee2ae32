# Shared by the scoctl Slurm hooks (sourced, not run). POSIX sh, absolute paths only: slurmctld
# starts hooks with no PATH.
HOOK_DIR=$(cd "$(/usr/bin/dirname "$0")" && pwd)
# shellcheck source=/dev/null
[ -r "$HOOK_DIR/hooks.env" ] && . "$HOOK_DIR/hooks.env"
SCOCTL=${SCOCTL:-/usr/local/bin/scoctl}
SCO_HOOK_TIMEOUT=${SCO_HOOK_TIMEOUT:-10}
export SCOCTL_CONFIG SLURM_CONF

# is_slug WORD: the workload slug rule (^[a-z0-9][a-z0-9.-]{0,46}$) without external commands
is_slug() {
  case $1 in
    ""|[!a-z0-9]*|*[!a-z0-9.-]*) return 1 ;;
  esac
  [ "${#1}" -le 47 ]
}

# job_workload: the job's workload, from `--comment sco:workload=SLUG` (or `sco:SLUG`), else the
# job name (the sbatch-gate convention); empty when the job is not scoctl's business.
job_workload() {
  if [ -n "${SCO_HOOK_PARTITIONS:-}" ]; then
    case " $SCO_HOOK_PARTITIONS " in *" ${SLURM_JOB_PARTITION:-} "*) ;; *) return 0 ;; esac
  fi
  w=""
  for item in $(echo "${SLURM_JOB_COMMENT:-}" | /usr/bin/tr ',;' '  '); do
    case $item in
      sco:workload=*) w=${item#sco:workload=} ;;
      sco:*=*) ;;
      sco:*) [ -z "$w" ] && w=${item#sco:} ;;
    esac
  done
  [ -n "$w" ] || w=${SLURM_JOB_NAME:-}
  is_slug "$w" && echo "$w"
  return 0
}

# emit TOKEN WORKLOAD [--detail K=V ...]: through the spool, bounded in time, never failing
emit() {
  token=$1 workload=$2
  shift 2
  /usr/bin/timeout "$SCO_HOOK_TIMEOUT" "$SCOCTL" -q emit "$token" --workload "$workload" \
    --job-id "${SLURM_JOB_ID:-}" --hook "$@" </dev/null >/dev/null 2>&1 || true
}
