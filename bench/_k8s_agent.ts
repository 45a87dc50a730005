/**
 * One agent of `bench/k8s.ts`: a control plane over in-memory BPF maps fed by a
 * `RedisModelSource` (deployed defaults), in this thread (`startAgent`) or a Worker of its own
 * (this module as the Worker's main: one agent per thread, as one per node).
 *
 * Worker protocol: `{ url }` in → `{ frontends }` out whenever the maps' frontend count changes;
 * `"stop"` in → `"stopped"` out.
 *
 * @module
 */

import { setLogLevel } from "../lib/log.ts";
import { createControlPlane } from "../controller/control_plane.ts";
import { MemoryLBMaps } from "../controller/lbmaps_memory.ts";
import { connectModelStore } from "../controller/model/mod.ts";
import { RedisModelSource } from "../controller/sources/redis_source.ts";

/** A running agent. */
export interface BenchAgent {
  /** Frontends in its maps. */
  frontends(): number;
  /** Resolves once its first snapshot of the model is applied. */
  ready(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts an agent in this thread following the model in the Redis at `url`. */
export async function startAgent(url: string): Promise<BenchAgent> {
  const maps = new MemoryLBMaps({ checkInvariants: false });
  const cp = await createControlPlane(maps);
  const store = connectModelStore({ url });
  const source = new RedisModelSource(cp.writer, store);
  cp.start();
  source.start();
  return {
    frontends: () => maps.services.size,
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
  let count = 0;
  const ready = Promise.withResolvers<void>();
  const stopped = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  worker.onmessage = (e: MessageEvent) => {
    if (e.data === "stopped") stopped.resolve();
    else if (e.data === "started") started.resolve();
    else if (e.data === "ready") ready.resolve();
    else count = e.data.frontends;
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
    let last = -1;
    timer = setInterval(() => {
      const n = agent!.frontends();
      if (n !== last) scope.postMessage({ frontends: last = n });
    }, 1);
    scope.postMessage("started");
  };
}
