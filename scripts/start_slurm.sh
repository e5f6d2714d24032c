#!/usr/bin/env bash
# A one-node SLURM cluster on 127.0.0.1 for the tests (root; Debian's slurmctld/slurmd/munge).
set -euo pipefail
if ! command -v slurmctld >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi
# munge: a generated key, the daemon running
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge && chown munge:munge /run/munge
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat >/etc/slurm/slurm.conf <<CONF
ClusterName=bioablate
SlurmctldHost=localhost(127.0.0.1)
AuthType=auth/munge
# a requeued job waits cred_expire seconds before it may start again (default 120): keep preemption tests short
# (a credential lives from its creation to slurmd reading it: well under a second on one node)
AuthInfo=cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# look for startable jobs every second (defaults: 30 s backfill, 60 s main loop): a requeued job is started by
# a scheduling pass, not by an event, and waited ~30 s for one with the defaults
SchedulerParameters=bf_interval=1,sched_interval=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd -N localhost
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then exit 0; fi
  sleep 1
done
echo "start_slurm: the node did not come up; see /var/log/slurm/" >&2
exit 1
