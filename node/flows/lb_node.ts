/**
 * One LB node as a process composes it: the datapath (pinned BPF maps, XDP on an interface),
 * optionally the control plane following a services file (services, backends, Maglev into the
 * maps), and the flow-sync agent (Redis). {@link startLbNode} resolves once the node may take
 * traffic: the services of the file are in the maps and every stored flow is in the flow map.
 *
 * When the services file drops a backend, this node removes that backend's flows through
 * {@link purgeBackendFlows} (every node does; the second finds nothing), so those clients get a
 * fresh Maglev choice; added backends change the Maglev table while existing flows keep theirs.
 *
 * @module
 */

import { FlowSyncAgent } from "./agent.ts";
import { connectRedisStore, type RedisFlowStore, type RedisStoreOptions } from "./redis_store.ts";
import { MemoryFlowTable } from "./table.ts";
import type { FlowTable } from "./table.ts";
import { purgeBackendFlows } from "./purge.ts";
import { log as rootLog, type Logger } from "../log.ts";
import { type Registry, registry as rootRegistry } from "../metrics.ts";

/** Options of {@link startLbNode}. */
export interface LbNodeOptions {
  nodeName: string;
  /** LB IPs to sync flows for; the services file's frontend addresses are added. */
  vips: readonly string[];
  /** Redis for flow sharing; absent: no flow sharing (Maglev only, the baseline). */
  redis?: RedisStoreOptions;
  /** `bpf`: the real datapath (default); `memory`: an in-memory flow map and LB maps (tests). */
  datapath?: "bpf" | "memory";
  pinDir?: string;
  objectDir?: string;
  maxFlows?: number;
  /** Attach XDP here (in this process's namespace unless `netns`). */
  attach?: { ifname: string; netns?: string };
  /** Datapath node settings. */
  configure?: { srcAddr: string; encapPort: number; seed: number };
  /** Services file (YAML or JSON, controller/sources/file_source.ts), followed for changes. */
  config?: string;
  /** How often the services file is checked for changes (default 200 ms). */
  configPollMs?: number;
  idleTimeoutMs?: number;
  sweepIntervalMs?: number;
  queueCapacity?: number;
  registry?: Registry;
  logger?: Logger;
  signal?: AbortSignal;
}

/** A started LB node. */
export interface LbNode {
  /** The flow-sync agent, when flow sharing is on. */
  readonly agent: FlowSyncAgent | null;
  /** The node's flow map. */
  readonly table: FlowTable;
  /** `bpf` or `memory`. */
  readonly datapath: string;
  /** LB IPs whose flows are synced. */
  readonly vips: readonly string[];
  /** Stops following and syncing; pinned maps and the XDP attachment stay. */
  close(): Promise<void>;
}

interface ServiceView {
  vips: string[];
  backends: Set<string>;
}

/** Service name → frontend IPs and backend IPs, from a services file. */
function servicesOf(
  cfg: { services: readonly { name: string; frontends: readonly { address: string }[] }[] } & {
    services: readonly { backends: readonly { address: string }[] }[];
  },
): Map<string, ServiceView> {
  const out = new Map<string, ServiceView>();
  for (const s of cfg.services) {
    const view = out.get(s.name) ?? { vips: [], backends: new Set<string>() };
    for (const f of s.frontends) view.vips.push(f.address.split(":")[0]!);
    for (const b of s.backends) view.backends.add(b.address.split(":")[0]!);
    out.set(s.name, view);
  }
  return out;
}

/** Starts an LB node; resolves when it is ready for traffic. */
export async function startLbNode(options: LbNodeOptions): Promise<LbNode> {
  const log = (options.logger ?? rootLog).with({ component: "lb-node", node: options.nodeName });
  const cleanups: (() => Promise<void> | void)[] = [];
  const close = async () => {
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        log.warn("cleanup failed", { err });
      }
    }
    cleanups.length = 0;
  };
  try {
    // Datapath: flow map, LB maps, new-flow events.
    let table: FlowTable;
    let lbMaps: import("../../controller/lbmaps.ts").LBMaps | null = null;
    let subscribe: ((onEvent: (ev: import("./flow.ts").FlowEvent) => void) => void) | null = null;
    const kind = options.datapath ?? "bpf";
    if (kind === "memory") {
      table = new MemoryFlowTable();
      if (options.config) {
        const { MemoryLBMaps } = await import("../../controller/lbmaps_memory.ts");
        lbMaps = new MemoryLBMaps();
      }
    } else {
      const { Datapath } = await import("../bpf/mod.ts");
      const { BpfFlowTable, fromDatapathEvent } = await import("./bpf_table.ts");
      const dp = await Datapath.open({
        ...(options.pinDir ? { pinDir: options.pinDir } : {}),
        ...(options.objectDir ? { objectDir: options.objectDir } : {}),
        ...(options.maxFlows ? { maxFlows: options.maxFlows } : {}),
      });
      cleanups.push(() => dp[Symbol.dispose]());
      if (options.configure) dp.configure(options.configure);
      table = new BpfFlowTable(dp.maps.flows);
      lbMaps = options.config ? dp.lbMaps() : null;
      subscribe = (onEvent) => {
        const reader = dp.subscribe((ev) => onEvent(fromDatapathEvent(ev)));
        cleanups.push(() => reader.close());
      };
      if (options.attach) {
        dp.attach(
          options.attach.ifname,
          options.attach.netns ? { netns: options.attach.netns } : {},
        );
        log.info("xdp attached", { iface: options.attach.ifname, netns: options.attach.netns });
      }
    }

    // Flow sharing.
    let store: RedisFlowStore | null = null;
    if (options.redis) {
      store = connectRedisStore(options.redis);
      const s = store;
      cleanups.push(() => s.close());
    }

    // Control plane following the services file.
    let services = new Map<string, ServiceView>();
    const vips = new Set(options.vips);
    if (options.config && lbMaps) {
      const { createControlPlane } = await import("../../controller/control_plane.ts");
      const { FileSource } = await import("../../controller/sources/file_source.ts");
      const cpLog = log.with({ component: "control-plane" });
      const cp = await createControlPlane(lbMaps, {
        log: (level, msg, fields) => cpLog[level](msg, fields),
      });
      cleanups.push(() => cp.stop());
      const file = new FileSource(cp.writer);
      cp.start();
      const path = options.config;
      const cfg = await file.loadFile(path);
      services = servicesOf(cfg);
      for (const s of services.values()) for (const v of s.vips) vips.add(v);
      for (const s of cfg.services) {
        for (const f of s.frontends) await cp.waitFrontend(f.address, { timeoutMs: 30_000 });
      }
      log.info("services loaded", { config: path, services: cfg.services.length });
      let last = await Deno.stat(path);
      const timer = setInterval(async () => {
        let st: Deno.FileInfo;
        try {
          st = await Deno.stat(path);
        } catch {
          return; // being replaced
        }
        if (st.ino === last.ino && st.mtime?.getTime() === last.mtime?.getTime()) return;
        last = st;
        try {
          const next = servicesOf(await file.loadFile(path));
          log.info("services reloaded", { config: path, services: next.size });
          if (store) await purgeRemoved(services, next, store, options.nodeName);
          services = next;
        } catch (err) {
          log.error("services file rejected, keeping the previous one", { config: path, err });
        }
      }, options.configPollMs ?? 200);
      cleanups.push(() => clearInterval(timer));
    }

    // The agent: events queue from the start, restore before ready.
    let agent: FlowSyncAgent | null = null;
    if (store) {
      const a = agent = new FlowSyncAgent(table, store, {
        node: options.nodeName,
        vips: [...vips],
        registry: options.registry ?? rootRegistry,
        ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMs: options.idleTimeoutMs } : {}),
        ...(options.sweepIntervalMs !== undefined
          ? { sweepIntervalMs: options.sweepIntervalMs }
          : {}),
        ...(options.queueCapacity !== undefined ? { queueCapacity: options.queueCapacity } : {}),
      });
      subscribe?.((ev) => a.learn(ev));
      cleanups.push(() => a.stop());
      await a.start(options.signal ? { signal: options.signal } : {});
    }
    return { agent, table, datapath: kind, vips: [...vips], close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Purges flows of backends that left a service, on each of the service's LB IPs. */
async function purgeRemoved(
  before: Map<string, ServiceView>,
  after: Map<string, ServiceView>,
  store: RedisFlowStore,
  node: string,
): Promise<void> {
  for (const [name, prev] of before) {
    const next = after.get(name);
    for (const backend of prev.backends) {
      if (next?.backends.has(backend)) continue;
      for (const vip of prev.vips) await purgeBackendFlows(vip, backend, { store, node });
    }
  }
}
