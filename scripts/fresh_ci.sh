#!/usr/bin/env bash
# Runs CI as it runs on a fresh machine, on this one: removes the Debian packages that
# scripts/setup.sh installs and the base image lacks, clones this checkout's HEAD into a new
# directory, and runs `CI=true bash .ci/run` there with no standard input — so setup has to install
# everything again, from nothing, as on a new machine. See docs/fresh_machine.md.
#
#   bash scripts/fresh_ci.sh --dry-run   only list what would be removed
#   bash scripts/fresh_ci.sh             remove, clone, run CI (as root; removes packages!)
#   bash scripts/fresh_ci.sh --keep      clone and run CI without removing anything
#   bash scripts/fresh_ci.sh --load      also keep both CPUs busy for the whole run
#   bash scripts/fresh_ci.sh --only=podman,mmdebstrap   remove just these (of setup's packages)
#
# Ends with CI's own last line ("N passed, N failed") and its exit code.
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0 keep=0 load=0 only=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    --keep) keep=1 ;;
    --load) load=1 ;;
    --only=*) only=",${arg#--only=}," ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "Cannot parse fresh_ci.sh arguments: Unknown option \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done

# Packages setup installs (scripts/packages.txt) that the base image does not have.
removable=()
while read -r _ pkg; do
  [[ -z ${pkg:-} ]] && continue
  grep -qx "$pkg" scripts/base-packages.txt && continue
  [[ -z $only || $only == *",$pkg,"* ]] || continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || continue
  [[ " ${removable[*]} " == *" $pkg "* ]] || removable+=("$pkg")
done < <(grep -v '^#' scripts/packages.txt)

if [[ $keep -eq 0 ]]; then
  echo "fresh_ci: packages to remove: ${removable[*]:-(none)}"
  if [[ $dry -eq 1 ]]; then exit 0; fi
  if [[ ${#removable[@]} -gt 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --autoremove "${removable[@]}" >/dev/null
  fi
elif [[ $dry -eq 1 ]]; then
  exit 0
fi

dir=$(mktemp -d /tmp/hf-fresh-ci.XXXXXX)
git clone -q . "$dir"
echo "fresh_ci: clone of $(git rev-parse --short HEAD) in $dir"

busy=()
stop_load() { [[ ${#busy[@]} -eq 0 ]] || kill "${busy[@]}" 2>/dev/null || true; }
trap stop_load EXIT
if [[ $load -eq 1 ]]; then
  for _ in $(seq "$(nproc)"); do
    bash -c 'while :; do :; done' &
    busy+=($!)
  done
  echo "fresh_ci: ${#busy[@]} busy loops keep the CPUs loaded (pids ${busy[*]})"
fi

cd "$dir"
# A fresh TMPDIR too: what a test builds there once per machine (the previous release for the
# upgrade tests) is built anew, as on a new machine — a stale build once hid a race that failed CI.
tmp=$(mktemp -d /tmp/holdfast-fresh-tmp.XXXXXX)
echo "fresh_ci: TMPDIR $tmp"
TMPDIR="$tmp" CI=true bash .ci/run </dev/null
