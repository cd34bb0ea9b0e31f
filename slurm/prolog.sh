#!/usr/bin/env bash
# Slurm Prolog=: the quick tier of zt check before each job; drains a sick node
# (slurm/health.sh has the rules and settings).
exec bash "$(dirname "$(readlink -f "$0")")/health.sh" prolog
