/**
 * Test helpers of the model: a controller (file source → tables → publisher) and an agent
 * (RedisModelSource → tables → in-memory BPF maps) around one {@linkcode ModelStore}.
 *
 * @module
 */

import { type ControlPlane, createControlPlane } from "../../node/lb/control_plane.ts";
import { MemoryLBMaps } from "../../node/lb/maps/memory.ts";
import type { LBMaps } from "../../node/lb/maps/lbmaps.ts";
import { FileSource } from "../../node/lb/sources/file_source.ts";
import {
  RedisModelSource,
  type RedisModelSourceOptions,
} from "../../node/lb/sources/redis_source.ts";
import { type RunningModelPublisher, startModelPublisher } from "./publisher.ts";
import type { ModelChange, ModelStore } from "./store.ts";
import type { ModelPolicy } from "./schema.ts";
import type { Logger } from "../../lib/log.ts";

export { waitUntil } from "../../node/lb/_testing.ts";

/** A controller publishing the model of a services file. */
export interface TestController extends AsyncDisposable {
  readonly cp: ControlPlane;
  readonly file: FileSource;
  readonly pub: RunningModelPublisher;
}

/** Starts a controller whose tables hold `yaml` (file source), publishing to `store`. */
export async function startTestController(
  store: ModelStore,
  yaml: string,
  options: { logger?: Logger; epochCheckMs?: number } = {},
): Promise<TestController> {
  const cp = await createControlPlane(new MemoryLBMaps());
  const file = new FileSource(cp.writer);
  cp.start();
  file.load(yaml);
  const pub = startModelPublisher(cp, store, { retry: { minMs: 10, maxMs: 50 }, ...options });
  await pub.synced();
  return {
    cp,
    file,
    pub,
    [Symbol.asyncDispose]: async () => {
      await pub.stop();
      await cp.stop();
    },
  };
}

/** An agent following the model from `store` into in-memory maps. */
export interface TestAgent<M extends LBMaps = MemoryLBMaps> extends AsyncDisposable {
  readonly cp: ControlPlane;
  readonly maps: M;
  readonly source: RedisModelSource;
  /** Map writes and deletes so far (the BPF reconciler's counters, prunes included). */
  writes(): number;
}

/** Starts an agent over `maps` (default: new ones) following `store`. */
export async function startTestAgent<M extends LBMaps = MemoryLBMaps>(
  store: ModelStore,
  options: RedisModelSourceOptions & { maps?: M } = {},
): Promise<TestAgent<M>> {
  const maps = options.maps ?? new MemoryLBMaps() as LBMaps as M;
  const cp = await createControlPlane(maps);
  const source = new RedisModelSource(cp.writer, store, {
    retry: { minMs: 10, maxMs: 50 },
    blockMs: 50,
    epochCheckMs: 100,
    ...options,
  });
  cp.start();
  source.start();
  return {
    cp,
    maps,
    source,
    writes: () => {
      const m = cp.ops.metrics;
      return m.holdfast_lbmaps_backend_writes_total + m.holdfast_lbmaps_backend_deletes_total +
        m.holdfast_lbmaps_maglev_writes_total + m.holdfast_lbmaps_service_writes_total +
        m.holdfast_lbmaps_service_deletes_total + m.holdfast_lbmaps_pruned_total;
    },
    [Symbol.asyncDispose]: async () => {
      await source.stop();
      await cp.stop();
    },
  };
}

/** Two services: default/web (two backends) and default/dns (one, client-ip). */
export const MODEL_YAML = `
services:
  - name: default/web
    frontends: [{ address: 10.0.100.1:80/TCP, portName: http }]
    backends:
      - { address: 10.1.0.1:8080/TCP, portName: http }
      - { address: 10.1.0.2:8080/TCP, portName: http, weight: 50, zone: a }
  - name: default/dns
    flowKeyMode: client-ip
    maglevSize: 251
    frontends: [{ address: 10.0.100.2:53/UDP }]
    backends: [{ address: 10.1.0.3:53/UDP }]
`;

/** A store whose reads can be held back (an agent that falls behind). */
export class HeldStore implements ModelStore {
  #gate: Promise<void> | null = null;
  #open = () => {};
  /** Reads waiting at the gate now (a test waits for one rather than for a guessed time). */
  parked = 0;
  constructor(readonly inner: ModelStore) {}
  hold(): void {
    this.#gate = new Promise((r) => this.#open = r);
  }
  release(): void {
    this.#gate = null;
    this.#open();
  }
  snapshot = () => this.inner.snapshot();
  epoch = () => this.inner.epoch();
  initEpoch = (t: string) => this.inner.initEpoch(t);
  write = (e: string, w: Parameters<ModelStore["write"]>[1]) => this.inner.write(e, w);
  writePolicy = (e: string, p: ModelPolicy) => this.inner.writePolicy(e, p);
  writeSettings = (e: string, json: string) => this.inner.writeSettings(e, json);
  readPolicy = () => this.inner.readPolicy();
  async read(after: string, o: { count: number; blockMs: number }): Promise<ModelChange[]> {
    if (this.#gate) {
      this.parked++;
      await this.#gate;
      this.parked--;
    }
    return this.inner.read(after, o);
  }
  close = () => this.inner.close();
}
