#!/usr/bin/env bash
# Installs Debian's Slurm daemons and munge (slurmctld, slurmd, slurm-client, munge) for the tests'
# single-node Slurm (tests/tracer/campaign/slurmcluster.py), which configures and starts them in a
# temporary folder of its own; nothing here configures or starts a cluster.
#
#   scripts/install_slurm.sh     # as root; without root it says what to install and exits 0
#
# Idempotent: packages already there are not touched. On Debian the packages' services may start
# with the system's (absent) configuration and stop again; they do not disturb the tests' cluster,
# which uses its own ports, socket and state.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge)
have_all() {
    local c
    for c in slurmctld slurmd sbatch squeue scancel scontrol sinfo munged; do
        command -v "$c" >/dev/null || [[ -x /usr/sbin/$c ]] || return 1
    done
}

if have_all; then
    echo "install_slurm: Slurm and munge are installed" >&2
    exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install_slurm: not installed; as root on Debian/Ubuntu: apt-get install ${PACKAGES[*]} (the Slurm tests skip without them)" >&2
    exit 0
fi
echo "install_slurm: apt-get install ${PACKAGES[*]}" >&2
apt-get -qq update >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >&2
have_all
