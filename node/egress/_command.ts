/**
 * The few system commands the egress agent runs (`nft`, `ip`, `sysctl`), inside its own network
 * namespace, with their stderr in the error when they fail.
 *
 * @module
 */

/** A command the agent ran failed. */
export class EgressCommandError extends Error {
  /** `argv` is the command; `stderr` what it said. */
  constructor(readonly argv: readonly string[], readonly stderr: string, readonly code: number) {
    super(
      `Command ${JSON.stringify(argv.join(" "))} failed with exit code ${code}: ${stderr.trim()}`,
    );
    this.name = "EgressCommandError";
  }
}

/**
 * Runs `argv` (stdin from `input` when given), bounded by `timeoutMs` (default 10 s); throws
 * {@link EgressCommandError} on a non-zero exit unless `allow` accepts its stderr.
 */
export async function runCommand(
  argv: readonly string[],
  options: { input?: string; timeoutMs?: number; allow?: (stderr: string) => boolean } = {},
): Promise<void> {
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdin: options.input === undefined ? "null" : "piped",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  if (options.input !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.input));
    await w.close();
  }
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }, options.timeoutMs ?? 10_000);
  try {
    const out = await child.output();
    const stderr = new TextDecoder().decode(out.stderr);
    if (out.code !== 0 && !options.allow?.(stderr)) {
      throw new EgressCommandError(argv, stderr, out.code);
    }
  } finally {
    clearTimeout(timer);
  }
}

/** Sets kernel settings of the current network namespace (`sysctl -w`). */
export async function setSysctls(values: Readonly<Record<string, string | number>>): Promise<void> {
  for (const [key, value] of Object.entries(values)) {
    await runCommand(["sysctl", "-q", "-w", `${key}=${value}`]);
  }
}
