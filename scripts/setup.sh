#!/usr/bin/env bash
# Installs what Holdfast needs, only when missing. Sourced by ./hf; idempotent, a second run
# costs well under a few seconds. Exports DENO (absolute path to the pinned deno binary) and
# puts it first on PATH. Sets no shell options in the caller (callers choose their own).

HF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HF_DENO_VERSION=2.9.6
HF_CACHE="$HF_ROOT/.cache"

hf_log() { printf '{"level":"info","msg":"setup: %s"}\n' "$*" >&2; }

# Debian packages missing here, from scripts/packages.txt ("PROBE PACKAGE" lines: a command on
# PATH or an absolute file path that proves the package is present).
hf_apt_needed() {
  local missing=() probe pkg
  while read -r probe pkg; do
    [[ -z $probe || $probe == \#* ]] && continue
    if [[ $probe == /* ]]; then [[ -e $probe ]] && continue; else command -v "$probe" >/dev/null 2>&1 && continue; fi
    missing+=("$pkg")
  done <"$HF_ROOT/scripts/packages.txt"
  printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' '
}

hf_setup() {
  local missing
  missing=$(hf_apt_needed)
  if [[ -n ${missing// /} ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "setup: missing Debian packages: $missing — run as root or install them" >&2
      return 1
    fi
    hf_log "installing Debian packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || { echo "setup: apt-get update failed" >&2; return 1; }
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
      { echo "setup: apt-get install $missing failed" >&2; return 1; }
  fi

  local deno_bin="$HF_CACHE/deno/node_modules/deno/deno"
  if [[ ! -x $deno_bin ]] || [[ $("$deno_bin" --version 2>/dev/null | head -1) != "deno $HF_DENO_VERSION "* ]]; then
    hf_log "installing deno $HF_DENO_VERSION from npm into .cache/deno"
    mkdir -p "$HF_CACHE/deno"
    npm install --silent --no-audit --no-fund --prefix "$HF_CACHE/deno" "deno@$HF_DENO_VERSION" >/dev/null 2>&1 ||
      { echo "setup: npm install deno@$HF_DENO_VERSION failed" >&2; return 1; }
    [[ -x $deno_bin ]] || { echo "setup: $deno_bin missing after npm install" >&2; return 1; }
  fi
  export DENO="$deno_bin"
  export DENO_DIR="$HF_CACHE/deno-dir"
  export PATH="$(dirname "$deno_bin"):$PATH"
  export DENO_NO_UPDATE_CHECK=1

  # npm dependencies named in deno.json (AssemblyScript, redis, client-node), into node_modules.
  local stamp="$HF_CACHE/deps.stamp"
  if [[ ! -d $HF_ROOT/node_modules || ! -f $stamp || $HF_ROOT/deno.json -nt $stamp || $HF_ROOT/deno.lock -nt $stamp ]]; then
    hf_log "installing npm dependencies"
    (cd "$HF_ROOT" && "$DENO" install --quiet) || { echo "setup: deno install failed" >&2; return 1; }
    touch "$stamp"
  fi
}

hf_setup || { echo "setup failed" >&2; return 1 2>/dev/null || exit 1; }
