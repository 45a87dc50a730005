/**
 * Root handling for tests that need the real kernel: namespaces, BPF, nftables.
 *
 * On a developer laptop without root such a test is ignored with a printed reason. In CI
 * (`CI=true`) it is never skipped: it runs and fails with the reason instead, so a green CI
 * always means the real thing ran.
 *
 * @module
 */
import { rootMissingReason } from "../../lab/command.ts";

/** True when the environment says this is a CI run. */
export function inCI(): boolean {
  const value = Deno.env.get("CI") ?? "";
  return value !== "" && value !== "0" && value.toLowerCase() !== "false";
}

/** Options for {@linkcode rootTest}, passed through to `Deno.test`. */
export interface RootTestOptions {
  sanitizeOps?: boolean;
  sanitizeResources?: boolean;
  sanitizeExit?: boolean;
  only?: boolean;
}

/**
 * Registers a test that needs root: ignored with a printed reason when not root outside CI,
 * failing with that reason in CI.
 *
 * @example
 * ```ts ignore
 * rootTest("xdp counts packets", async () => { ... });
 * ```
 */
export function rootTest(
  name: string,
  fn: (t: Deno.TestContext) => void | Promise<void>,
  options: RootTestOptions = {},
): void {
  const reason = rootMissingReason();
  const skip = reason !== null && !inCI();
  if (skip) console.log(`ignoring "${name}": ${reason} (set CI=true to make this a failure)`);
  Deno.test({
    name,
    ignore: skip,
    ...options,
    fn: async (t) => {
      if (reason !== null) throw new Error(`Cannot run "${name}" in CI: ${reason}`);
      await fn(t);
    },
  });
}
