/**
 * Follows the active policy file that `main.ts policy swap` installs: loads it at start and
 * hot-swaps the {@link PolicyHost} whenever it is replaced. A bad file is rejected by the host
 * (logged, counted) and the old module keeps serving.
 *
 * @module
 */
import { log } from "../../lib/log.ts";
import type { PolicyHost, SwapResult } from "./policy_host.ts";

/**
 * Swaps `host` to the module in `path` now and after every change, until `signal` aborts.
 * Resolves once the initial load has been attempted; returns its result (undefined when the
 * file does not exist yet).
 */
export async function followActivePolicy(
  host: PolicyHost,
  path: string,
  options: {
    signal: AbortSignal;
    debounceMs?: number;
    /** Swaps `bytes` instead of `host.swap` (the agent's: it also rebuilds its tables). */
    swap?: (bytes: Uint8Array, source: string) => Promise<SwapResult>;
  },
): Promise<SwapResult | undefined> {
  const swap = options.swap ?? ((bytes, source) => host.swap(bytes, { source }));
  const load = async (): Promise<SwapResult | undefined> => {
    let bytes: Uint8Array;
    try {
      bytes = await Deno.readFile(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return undefined;
      log.warn("cannot read active policy file", { component: "policy", path, error: e });
      return undefined;
    }
    return await swap(bytes, path);
  };
  const initial = await load();
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) || "/" : ".";
  await Deno.mkdir(dir, { recursive: true });
  const watcher = Deno.watchFs(dir, { recursive: false });
  options.signal.addEventListener("abort", () => watcher.close(), { once: true });
  const name = path.slice(path.lastIndexOf("/") + 1);
  let timer: ReturnType<typeof setTimeout> | undefined;
  (async () => {
    for await (const event of watcher) {
      if (!event.paths.some((p) => p.endsWith(`/${name}`))) continue;
      if (event.kind !== "create" && event.kind !== "modify" && event.kind !== "rename") continue;
      clearTimeout(timer);
      timer = setTimeout(() => void load(), options.debounceMs ?? 50);
    }
    clearTimeout(timer);
  })().catch((e) => log.error("active policy watcher stopped", { component: "policy", error: e }));
  return initial;
}
