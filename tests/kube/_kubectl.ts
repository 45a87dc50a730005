/**
 * Runs the real kubectl against a test server: its own kubeconfig and discovery cache dir
 * (removed with the handle), a bounded run time, output captured.
 *
 * @module
 */
import { type KubeServer, startKubeServer } from "../../lab/kube/mod.ts";

/** What one kubectl run printed. */
export interface KubectlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A test server with a kubectl bound to it. */
export interface KubectlEnv extends AsyncDisposable {
  readonly server: KubeServer;
  readonly kubeconfig: string;
  /** Runs `kubectl ARGS` (stdin optional), at most `timeoutMs` (default 20 s). */
  kubectl(
    args: readonly string[],
    options?: { stdin?: string; timeoutMs?: number },
  ): Promise<KubectlResult>;
  /** Runs kubectl and throws with its stderr unless it exits 0; returns stdout. */
  ok(args: readonly string[], stdin?: string): Promise<string>;
  /**
   * Starts `kubectl ARGS` in the background; `stdout()` is what it printed so far, `stop()` kills
   * it and returns all it printed.
   */
  spawn(args: readonly string[]): { stdout(): string; stop(): Promise<KubectlResult> };
}

/** Starts a server (options as {@linkcode startKubeServer}) and a kubectl environment for it. */
export async function kubectlEnv(
  options: Parameters<typeof startKubeServer>[0] = {},
): Promise<KubectlEnv> {
  const server = await startKubeServer(options);
  const dir = await Deno.makeTempDir({ prefix: "hf-kubectl-" });
  const kubeconfig = await server.writeKubeconfig(`${dir}/kubeconfig`);
  const base = ["--kubeconfig", kubeconfig, "--cache-dir", `${dir}/cache`];
  const command = (args: readonly string[], stdin: boolean) =>
    new Deno.Command("kubectl", {
      args: [...base, ...args],
      stdin: stdin ? "piped" : "null",
      stdout: "piped",
      stderr: "piped",
      env: { HOME: dir, KUBECONFIG: kubeconfig },
    });
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  const kubectl = async (
    args: readonly string[],
    opts: { stdin?: string; timeoutMs?: number } = {},
  ) => {
    const child = command(args, opts.stdin !== undefined).spawn();
    if (opts.stdin !== undefined) {
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(opts.stdin));
      await w.close();
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 20_000);
    try {
      const out = await child.output();
      return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    server,
    kubeconfig,
    kubectl,
    async ok(args, stdin) {
      const r = await kubectl(args, { stdin });
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
      return r.stdout;
    },
    spawn(args) {
      const child = command(args, false).spawn();
      let stdout = "";
      // Ends when kubectl closes its stdout (it exits, or stop() kills it).
      const reading = (async () => {
        for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) stdout += text;
      })();
      const stderr = new Response(child.stderr).text();
      return {
        stdout: () => stdout,
        async stop() {
          try {
            child.kill("SIGTERM");
          } catch {
            // already gone
          }
          const status = await child.status;
          await reading;
          return { code: status.code, stdout, stderr: await stderr };
        },
      };
    },
    async [Symbol.asyncDispose]() {
      await server.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/**
 * Polls `check` every 50 ms until it returns true, at most `timeoutMs` (default 30 s: it returns
 * as soon as the check holds, so the limit only bounds a failure).
 */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
}
