/**
 * Commands of the virtual lab: run one and collect its output, tell whether a process lives, and
 * say why the lab cannot run here (it needs Linux and root for namespaces and BPF).
 *
 * @module
 */

/** Result of a finished command. */
export interface ExecResult {
  /** Exit code. */
  readonly code: number;
  /** Standard output, decoded. */
  readonly stdout: string;
  /** Standard error, decoded. */
  readonly stderr: string;
}

/** Options for running a command (in the caller's namespace or in a host). */
export interface ExecOptions {
  /** Throw when the exit code is not 0 (default true). */
  readonly check?: boolean;
  /** Environment of the command. */
  readonly env?: Record<string, string>;
  /** Text written to the command's stdin. */
  readonly stdin?: string;
  /** Kill the command after this many milliseconds (default 60,000). */
  readonly timeoutMs?: number;
}

/** Error raised when a command the lab runs fails. */
export class CommandError extends Error {
  /** Made from the failed command and its result. */
  constructor(readonly argv: readonly string[], readonly result: ExecResult) {
    super(
      `Command failed with exit code ${result.code}: ${JSON.stringify(argv.join(" "))}: ${
        result.stderr.trim() || result.stdout.trim()
      }`,
    );
    this.name = "CommandError";
  }
}

/** Runs a command in the caller's own namespace and returns its output. */
export async function run(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  const [cmd, ...args] = argv;
  if (cmd === undefined) throw new TypeError("Cannot run an empty command");
  const child = new Deno.Command(cmd, {
    args,
    env: options.env,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const timeoutMs = options.timeoutMs ?? 60_000;
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, timeoutMs);
  let out: Deno.CommandOutput;
  try {
    out = await child.output();
  } finally {
    clearTimeout(timer);
  }
  const result = {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
  if ((options.check ?? true) && result.code !== 0) throw new CommandError(argv, result);
  return result;
}

/**
 * Whether a process exists. Deno gates /proc behind --allow-all, so this asks `kill -0`.
 */
export async function processAlive(pid: number): Promise<boolean> {
  const { code } = await run(["kill", "-0", String(pid)], { check: false });
  return code === 0;
}

/** Why the lab (namespaces, BPF) cannot run here, or `null` when it can. */
export function rootMissingReason(): string | null {
  if (Deno.build.os !== "linux") return `needs Linux, this is "${Deno.build.os}"`;
  const uid = Deno.uid();
  if (uid !== 0) return `needs root (uid 0), running as uid ${uid}`;
  return null;
}
