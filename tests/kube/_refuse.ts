/**
 * Asserting that kubectl is refused with the real API server's wording.
 *
 * @module
 */
import { ok } from "node:assert/strict";
import { assertStringIncludes } from "./_assert.ts";
import type { KubectlEnv } from "./_kubectl.ts";

/** Runs `kubectl ARGS` (stdin optional); asserts it fails and stderr has every `expect`. */
export async function refused(
  env: KubectlEnv,
  args: readonly string[],
  stdin: string | undefined,
  ...expect: string[]
): Promise<string> {
  const r = await env.kubectl(args, { stdin });
  ok(r.code !== 0, `kubectl ${args.join(" ")} must be refused; it printed ${r.stdout}`);
  for (const e of expect) assertStringIncludes(r.stderr, e);
  return r.stderr;
}

/** A Service manifest (YAML-compatible JSON) with `spec` merged over a one-port ClusterIP. */
export function serviceYaml(name: string, spec: Record<string, unknown> = {}, meta = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, ...meta },
    spec: { ports: [{ name: "http", port: 80 }], ...spec },
  });
}
