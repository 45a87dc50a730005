/**
 * A long-running process inside a lab host (an agent, a server, a client): its stdout read line
 * by line, waited on by predicate, stopped with a grace period.
 *
 * @module
 */

/** Options for spawning a long-running process in a host. */
export interface SpawnOptions {
  /** Environment of the process. */
  readonly env?: Record<string, string>;
  /** Where stdout/stderr go: "piped" (default) to read them, "inherit" or "null". */
  readonly stdout?: "piped" | "inherit" | "null";
  /** Where stderr goes (default "piped"). */
  readonly stderr?: "piped" | "inherit" | "null";
  /** Stdin (default "null"). */
  readonly stdin?: "piped" | "null";
}

/** A process running inside a host, killed when the topology is torn down. */
export class HostProcess {
  #killed = false;
  /** Lines of stdout seen so far (the newest 10,000), drained continuously so the child never blocks. */
  readonly lines: string[] = [];
  #seen = 0;
  #waiters = new Set<() => void>();
  /** Set when stdout has ended, before the last wake-up, so no waiter misses it. */
  #closed = false;
  #pump: Promise<void> = Promise.resolve();

  /** Wraps a spawned child; `piped` says whether its stdout is read line by line. */
  constructor(
    readonly host: string,
    readonly argv: readonly string[],
    readonly child: Deno.ChildProcess,
    piped: boolean,
  ) {
    if (piped) this.#pump = this.#readLines();
  }

  /** The process id (of the command itself: `ip netns exec` execs it). */
  get pid(): number {
    return this.child.pid;
  }

  async #readLines(): Promise<void> {
    let buffer = "";
    try {
      for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
        buffer += chunk;
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          this.lines.push(buffer.slice(0, nl));
          this.#seen++;
          buffer = buffer.slice(nl + 1);
          if (this.lines.length > 10_000) this.lines.shift();
        }
        for (const wake of this.#waiters) wake();
      }
    } catch { /* stream cancelled at stop */ }
    this.#closed = true;
    for (const wake of this.#waiters) wake();
  }

  /** Sends a signal (default SIGTERM) and waits up to `graceMs` before SIGKILL. */
  async stop(signal: Deno.Signal = "SIGTERM", graceMs = 2_000): Promise<Deno.CommandStatus> {
    if (!this.#killed) {
      this.#killed = true;
      try {
        this.child.kill(signal);
      } catch { /* already exited */ }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const killLater = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        try {
          this.child.kill("SIGKILL");
        } catch { /* exited */ }
        resolve();
      }, graceMs);
    });
    const status = await Promise.race([this.child.status, killLater.then(() => this.child.status)]);
    clearTimeout(timer);
    await this.#pump;
    try {
      const stderr = this.child.stderr;
      if (!stderr.locked) await stderr.cancel();
    } catch { /* not piped */ }
    return status;
  }

  /**
   * Resolves with the first stdout line (from `fromLine` on, default the start) matching
   * `predicate`; rejects after `timeoutMs` or when the process closes its stdout.
   */
  async waitForLine(
    predicate: (line: string) => boolean,
    options: { timeoutMs?: number; fromLine?: number } = {},
  ): Promise<string> {
    const timeoutMs = options.timeoutMs ?? 15_000;
    const deadline = Date.now() + timeoutMs;
    let index = options.fromLine ?? 0;
    let closed = false;
    while (Date.now() < deadline) {
      closed = this.#closed;
      const offset = this.#seen - this.lines.length;
      for (; index < this.#seen; index++) {
        const line = this.lines[index - offset];
        if (line !== undefined && predicate(line)) return line;
      }
      if (closed) break;
      // Each waiter removes only its own wake-up: clearing the set would drop the wake-up of
      // another waitForLine on this process, which would then sleep until its deadline.
      let wake = () => {};
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(1, deadline - Date.now()));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        wake = done;
        this.#waiters.add(done);
      });
      this.#waiters.delete(wake);
    }
    throw new Error(
      `${closed ? "Output closed" : `Timed out after ${timeoutMs} ms`} waiting for a line from ${
        JSON.stringify(this.argv.join(" "))
      } in host "${this.host}"; last lines: ${JSON.stringify(this.lines.slice(-5))}`,
    );
  }

  /** Number of stdout lines seen so far; pass as `fromLine` to wait only for newer ones. */
  get lineCount(): number {
    return this.#seen;
  }

  /** Copies every stdout line (seen and to come) to stderr as `[host] line`, until it closes. */
  tailToStderr(): void {
    let from = 0;
    const pump = async () => {
      for (let k = 0; k < 100_000; k++) {
        try {
          await this.waitForLine(() => true, { fromLine: from, timeoutMs: 60_000 });
        } catch {
          if (this.#closed) return;
          continue;
        }
        for (; from < this.lineCount; from++) {
          const line = this.lines[from - (this.lineCount - this.lines.length)];
          if (line) console.error(`[${this.host}] ${line}`);
        }
      }
    };
    pump();
  }
}
