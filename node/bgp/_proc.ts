/**
 * What the node's bird daemon is when the agent did not start it: a pid file in the bird
 * directory names a process, and `/proc/PID` says whether it is a live bird serving that
 * directory's control socket in this network namespace. Deno refuses `/proc/PID/*` and
 * `Deno.kill` without `--allow-all`/`--allow-run`, so both go through libc.
 *
 * @module
 */

import { c as libc, cstr } from "../bpf/_ffi.ts";

const O_RDONLY = 0;
const SIGNALS = { SIGTERM: 15, SIGKILL: 9 } as const;

/** Reads a small /proc file (≤ 64 KiB) with libc; null when it cannot be opened. */
export function readProcFile(path: string): Uint8Array | null {
  const fd = libc().open(cstr(path), O_RDONLY);
  if (fd < 0) return null;
  try {
    const chunks: Uint8Array[] = [];
    let total = 0;
    for (let i = 0; i < 16 && total < 65_536; i++) {
      const buf = new Uint8Array(4_096);
      const n = Number(libc().read(fd, buf, BigInt(buf.length)));
      if (n <= 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
    }
    const out = new Uint8Array(total);
    let at = 0;
    for (const ch of chunks) {
      out.set(ch, at);
      at += ch.length;
    }
    return out;
  } finally {
    libc().close(fd);
  }
}

/**
 * Whether `pid` runs (a zombie or a missing pid does not): the state letter of `/proc/PID/stat`.
 */
export function processRunning(pid: number): boolean {
  const stat = readProcFile(`/proc/${pid}/stat`);
  if (!stat) return false;
  const text = new TextDecoder().decode(stat);
  const state = text.slice(text.lastIndexOf(")") + 2, text.lastIndexOf(")") + 3);
  return state !== "" && state !== "Z" && state !== "X";
}

/** Sends `signal` to `pid` (not our child); false when the process is gone. */
export function signalProcess(pid: number, signal: keyof typeof SIGNALS): boolean {
  return libc().kill(pid, SIGNALS[signal]) === 0;
}

/** The target of a symlink under /proc (e.g. `net:[4026531840]`), or null. */
function readProcLink(path: string): string | null {
  const buf = new Uint8Array(256);
  const n = Number(libc().readlink(cstr(path), buf, BigInt(buf.length)));
  return n > 0 ? new TextDecoder().decode(buf.subarray(0, n)) : null;
}

/**
 * Why `pid` is not the bird of `socket` in this network namespace, or null when it is: its
 * command line is `bird … -s SOCKET …`, it runs (not a zombie), and `/proc/PID/ns/net` is ours.
 */
export function notOurBird(pid: number, socket: string): string | null {
  const raw = readProcFile(`/proc/${pid}/cmdline`);
  if (!raw || raw.length === 0) return `no process ${pid}`;
  const argv = new TextDecoder().decode(raw).split("\0").filter((a) => a !== "");
  if (!/(^|\/)bird$/.test(argv[0] ?? "")) return `pid ${pid} runs ${JSON.stringify(argv[0])}`;
  const s = argv.indexOf("-s");
  if (s < 0 || argv[s + 1] !== socket) {
    return `pid ${pid} is a bird of another socket (${JSON.stringify(argv[s + 1] ?? null)})`;
  }
  if (!processRunning(pid)) return `pid ${pid} has exited`;
  const theirs = readProcLink(`/proc/${pid}/ns/net`);
  if (theirs === null || theirs !== readProcLink(`/proc/self/ns/net`)) {
    return `pid ${pid} runs in another network namespace (${theirs})`;
  }
  return null;
}

/** bird as {@linkcode BirdDaemon} drives it: our child, or one a previous agent left running. */
export interface BirdProcess {
  readonly pid: number;
  /** Resolves when the process is gone. */
  readonly status: Promise<Deno.CommandStatus>;
  kill(signal: "SIGTERM" | "SIGKILL"): void;
  /** Frees what watching it holds (a pipe, a poll). */
  release(): Promise<void>;
}

/** Our child, started with `bird -f`. */
export function childBird(child: Deno.ChildProcess): BirdProcess {
  return {
    pid: child.pid,
    status: child.status,
    kill(signal) {
      try {
        child.kill(signal);
      } catch { /* exited */ }
    },
    release: () => child.stderr.cancel().catch(() => {}),
  };
}

/**
 * A bird we did not start (its parent is gone): watched by polling `/proc/PID/stat` every
 * `pollMs` (bounded by count and by {@linkcode BirdProcess.release}); signalled through libc.
 */
export function adoptedBird(pid: number, pollMs = 200): BirdProcess {
  const released = new AbortController();
  const status = (async (): Promise<Deno.CommandStatus> => {
    // A year of polls at most; release() ends it early.
    for (let i = 0; i < 31_536_000_000 / pollMs && !released.signal.aborted; i++) {
      if (!processRunning(pid)) break;
      await new Promise((r) => setTimeout(r, pollMs));
    }
    return { success: false, code: -1, signal: null };
  })();
  return {
    pid,
    status,
    kill(signal) {
      signalProcess(pid, signal);
    },
    release: () => Promise.resolve(released.abort()),
  };
}
