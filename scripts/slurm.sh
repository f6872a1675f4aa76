#!/usr/bin/env bash
# A private single-node Slurm cluster on this (Debian) machine, for trying `bench slurm` and for the tests.
#
#   bash scripts/slurm.sh up DIR [--gpus N]   install slurm + munge if missing, start munged, slurmctld, slurmd
#   export SLURM_CONF=DIR/slurm.conf          then sbatch, squeue, sinfo and `bench slurm --submit` use it
#   bash scripts/slurm.sh status DIR          sinfo and squeue of that cluster
#   bash scripts/slurm.sh down DIR            cancel its jobs and stop its daemons (only the ones it started)
#
# Everything lives under DIR: munge key and socket, slurm.conf, state, spool, logs and pid files, and the
# ports are free ones picked at `up`, so two clusters (two test runs) on one machine do not meet. The node
# is sized from /proc (all CPUs, 90 % of MemTotal); --gpus N adds N fake GPUs as GRES (character devices
# under DIR/dev, nothing behind them: enough for Slurm to schedule `--gres=gpu:1`, not to run CUDA).
# No systemd and no cgroups (proctrack/linuxproc, task/none): it runs in a container. Needs root.
# Exit status: 0 done, 1 a daemon did not come up (see DIR/log), 3 Slurm is not available here (not root,
# no apt-get, or the packages cannot be installed), 2 usage.
set -euo pipefail

usage() { echo "usage: $0 up DIR [--gpus N] | status DIR | down DIR" >&2; exit 2; }
unavailable() { echo "slurm.sh: Slurm is not available here: $*" >&2; exit 3; }

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
gpus=0
while [ $# -gt 0 ]; do
  case $1 in
    --gpus) gpus=${2:?--gpus needs a number}; shift 2 ;;
    *) usage ;;
  esac
done
case $gpus in ''|*[!0-9]*) usage ;; esac

packages_present() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
  && command -v munged >/dev/null; }

install_packages() {
  packages_present && return 0
  [ "$(id -u)" = 0 ] || unavailable "slurmctld, slurmd, sbatch or munged is missing and installing them needs root"
  command -v apt-get >/dev/null || unavailable "slurmctld, slurmd, sbatch or munged is missing and there is no apt-get"
  local log
  log=$(mktemp)
  # The lock timeout lets two runs that install at once wait for each other instead of failing. The package
  # lists are updated only when they do not know the packages (a fresh image), or the install fails.
  local install=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -q
                 --no-install-recommends slurmctld slurmd slurm-client munge)
  if ! { { apt-cache show slurmctld slurmd slurm-client munge >/dev/null 2>&1 && "${install[@]}"; } \
      || { apt-get -o DPkg::Lock::Timeout=120 update -q && "${install[@]}"; }; } >"$log" 2>&1; then
    tail -5 "$log" >&2
    rm -f "$log"
    unavailable "apt-get could not install slurmctld slurmd slurm-client munge (last lines above)"
  fi
  rm -f "$log"
  packages_present || unavailable "the packages installed but slurmctld, slurmd, sbatch or munged is not on PATH"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  [ "$(id -u)" = 0 ] || unavailable "slurmd must run as root to start jobs (this is uid $(id -u))"
  install_packages
  if pid_alive "$dir/slurmctld.pid"; then echo "slurm.sh: $dir already runs a cluster" >&2; exit 1; fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/dev"
  chmod 700 "$dir/munge"
  local host cpus mem_mb ctld_port slurmd_port gres_node=""
  host=$(hostname -s)
  cpus=$(nproc --all)
  mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done

  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
    || { echo "slurm.sh: munged did not start (see $dir/log/munged.log)" >&2; exit 1; }

  if [ "$gpus" -gt 0 ]; then
    : >"$dir/gres.conf"
    for ((i = 0; i < gpus; i++)); do
      [ -e "$dir/dev/fakegpu$i" ] || mknod "$dir/dev/fakegpu$i" c 1 3  # the major/minor of /dev/null
      echo "Name=gpu File=$dir/dev/fakegpu$i" >>"$dir/gres.conf"
    done
    gres_node=" Gres=gpu:$gpus"
  fi
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm.sh up: a private single-node cluster; everything it writes is under $dir.
ClusterName=bench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=60
$( [ "$gpus" -gt 0 ] && echo "GresTypes=gpu" )
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN$gres_node
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=$((mem_mb / cpus))
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" -c || { echo "slurm.sh: slurmctld did not start (see $dir/log/slurmctld.log)" >&2; exit 1; }
  slurmd -f "$SLURM_CONF" || { echo "slurm.sh: slurmd did not start (see $dir/log/slurmd.log)" >&2; exit 1; }
  local state="" i
  for ((i = 0; i < 200; i++)); do  # 20 s at most; it is usually idle within a second
    state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null || true)
    case $state in idle*) break ;; esac
    sleep 0.1
  done
  case $state in
    idle*) ;;
    *) echo "slurm.sh: node $host is '${state:-not answering}', not idle (see $dir/log)" >&2; exit 1 ;;
  esac
  echo "$SLURM_CONF" >"$dir/conf-path"
  echo "slurm up: node $host, $cpus CPU(s), ${mem_mb} MB, $gpus fake GPU(s), partition debug;" \
       "export SLURM_CONF=$SLURM_CONF"
}

down() {
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/slurm.conf" ] && pid_alive "$dir/slurmctld.pid"; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
  fi
  local pidfile pid i pids=()
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    pid_alive "$pidfile" && pids+=("$(cat "$pidfile")")
  done
  # All at once: each takes a second or two to stop, and none needs another to do so.
  [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  done
  # Steps of jobs scancel had no time to end: slurmstepd processes whose spool is ours.
  for pid in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if grep -qsF "$dir/spool" "/proc/$pid/cmdline" "/proc/$pid/environ" 2>/dev/null \
       || ls -l "/proc/$pid/cwd" 2>/dev/null | grep -qF "$dir"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  echo "slurm down: $dir"
}

status() {
  [ -f "$dir/slurm.conf" ] || { echo "slurm.sh: no cluster under $dir" >&2; exit 1; }
  export SLURM_CONF=$dir/slurm.conf
  timeout 10 sinfo
  timeout 10 squeue
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
