#!/usr/bin/env bash
# Slurm Epilog=: the quick tier of zt check after each job; drains a node the job
# left sick (slurm/health.sh has the rules and settings).
exec bash "$(dirname "$(readlink -f "$0")")/health.sh" epilog
