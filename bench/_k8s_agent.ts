/**
 * One agent of `bench/k8s.ts`: a control plane over in-memory BPF maps fed by a
 * `RedisModelSource` (deployed defaults, and the Maglev builder `node/lb/main.ts` uses: the policy
 * module's WASM builder with the TypeScript one as fallback), in this thread (`startAgent`) or a
 * Worker of its own (this module as the Worker's main: one agent per thread, as one per node).
 *
 * Worker protocol: `{ url }` in → `{ frontends, builds }` out whenever the maps' frontend count
 * or the Maglev builds change; `"stop"` in → `"stopped"` out.
 *
 * @module
 */

import { setLogLevel } from "../lib/log.ts";
import { createControlPlane } from "../node/lb/control_plane.ts";
import { MemoryLBMaps } from "../node/lb/maps/memory.ts";
import { connectModelStore } from "../controller/model/mod.ts";
import { RedisModelSource } from "../node/lb/sources/redis_source.ts";
import type { MaglevBuilder } from "../policy-as/host/maglev_input.ts";
import { PolicyHost, TsMaglevBuilder, WasmMaglevBuilder } from "../policy-as/host/mod.ts";

const RELEASE_WASM = new URL("../policy-as/build/release.wasm", import.meta.url);

/** A running agent. */
export interface BenchAgent {
  /** Frontends in its maps. */
  frontends(): number;
  /** Maglev tables it built (on its thread or its Maglev workers). */
  builds(): number;
  /** Resolves once its first snapshot of the model is applied. */
  ready(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts an agent in this thread following the model in the Redis at `url`. */
export async function startAgent(url: string): Promise<BenchAgent> {
  const maps = new MemoryLBMaps({ checkInvariants: false });
  // As node/lb/main.ts: the policy module's builder, the TypeScript one if the module is refused.
  const policy = await PolicyHost.create();
  const swap = await policy.swap(await Deno.readFile(RELEASE_WASM));
  if (!swap.ok) throw new Error(`Policy module rejected: ${JSON.stringify(swap)}`);
  const inner = new WasmMaglevBuilder(policy, { fallback: new TsMaglevBuilder() });
  let builds = 0;
  const maglev: MaglevBuilder = {
    build: (backends, m, out, values) => (builds++, inner.build(backends, m, out, values)),
    fillModule: () => inner.fillModule?.(),
  };
  const cp = await createControlPlane(maps, { maglev });
  const store = connectModelStore({ url });
  const source = new RedisModelSource(cp.writer, store);
  cp.start();
  source.start();
  return {
    frontends: () => maps.services.size,
    builds: () => builds + cp.ops.metrics.holdfast_lbmaps_maglev_built_ahead_total,
    ready: () => source.ready(),
    stop: async () => {
      await source.stop();
      await cp.stop();
      await store.close();
    },
  };
}

/** Starts an agent in a Worker of its own; its frontend count arrives by message. */
export function startWorkerAgent(url: string): Promise<BenchAgent> {
  const worker = new Worker(import.meta.url, { type: "module" });
  let count = 0, builds = 0;
  const ready = Promise.withResolvers<void>();
  const stopped = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  worker.onmessage = (e: MessageEvent) => {
    if (e.data === "stopped") stopped.resolve();
    else if (e.data === "started") started.resolve();
    else if (e.data === "ready") ready.resolve();
    else ({ frontends: count, builds } = e.data);
  };
  worker.onerror = (e) => {
    const err = new Error(`Agent worker failed: ${e.message}`);
    started.reject(err);
    ready.reject(err);
    stopped.reject(err);
  };
  worker.postMessage({ url });
  return started.promise.then(() => ({
    frontends: () => count,
    builds: () => builds,
    ready: () => ready.promise,
    stop: async () => {
      worker.postMessage("stop");
      await stopped.promise;
      worker.terminate();
    },
  }));
}

if ("WorkerGlobalScope" in globalThis) {
  setLogLevel("warn");
  // deno-lint-ignore no-explicit-any
  const scope = globalThis as any;
  let agent: BenchAgent | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  scope.onmessage = async (e: MessageEvent) => {
    if (e.data === "stop") {
      clearInterval(timer);
      await agent?.stop();
      scope.postMessage("stopped");
      return;
    }
    agent = await startAgent(e.data.url);
    agent.ready().then(() => scope.postMessage("ready"));
    let last = -1, lastBuilds = -1;
    timer = setInterval(() => {
      const n = agent!.frontends(), b = agent!.builds();
      if (n !== last || b !== lastBuilds) {
        scope.postMessage({ frontends: last = n, builds: lastBuilds = b });
      }
    }, 1);
    scope.postMessage("started");
  };
}
