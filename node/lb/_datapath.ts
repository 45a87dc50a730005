/**
 * The agent's datapath (`main.ts agent --datapath bpf|memory`), behind the narrow interface the
 * rest of the agent uses: the XDP load balancer over the maps pinned in `--pin-dir` with the
 * node settings written (a restart with `--model redis` and no `--encap-port` keeps the encap
 * port pinned before: `pinnedEncapPort`), or in-memory maps to run everything else without root.
 *
 * @module
 */
import type { LBMaps } from "./maps/lbmaps.ts";
import { MemoryLBMaps } from "./maps/memory.ts";
import { log } from "../../lib/log.ts";
import { registry } from "../../lib/metrics.ts";
import { pinnedEncapPort } from "./_node_role.ts";
import { type AgentArgs, globalIpv6Of, interfaceHolding } from "./args.ts";
import { Datapath, exportDatapathMetrics, HF_MAX, inNetns, Ipv6Maps } from "../bpf/mod.ts";
import { exportPinMetrics } from "../bpf/metrics.ts";
import type { AnyFlowEvent } from "../bpf/flow.ts";
import { DualFlowTable } from "../bpf/flow_table.ts";
import { type FlowTable, MemoryFlowTable } from "./flows/table.ts";
import { flowEventReader } from "./flows/sync_agent.ts";

/** What the rest of the agent needs from a datapath, real or in memory. */
export interface NodeDatapath {
  readonly kind: "bpf" | "memory";
  readonly lbMaps: LBMaps;
  /** The flow maps, IPv4 and IPv6 (`hf_flows`, `hf_flows6`) as one table. */
  readonly flows: FlowTable;
  /** Starts delivering new-flow events of both families; returns a stop function. */
  subscribe(onEvent: (event: AnyFlowEvent) => void): () => Promise<void>;
  /** Attaches the LB program (no-op in memory). */
  attach(): void;
  /** The interface `attach()` attaches to, or null. */
  readonly attachTo: string | null;
  /** The encap port written at start, and how to write another (absent: no --src-addr). */
  readonly encapPort?: number;
  configureEncap?: (port: number) => void;
  /** This node's IPv6 address written to `hf_config6` (`--src-addr6`), when given. */
  readonly srcAddr6?: string;
  close(): void;
}

/** The agent arguments the datapath is opened from (`main.ts anycast --redirect` builds these). */
export type DatapathArgs = Pick<
  AgentArgs,
  | "datapath"
  | "attach"
  | "pinDir"
  | "objectDir"
  | "maxFlows"
  | "maxServices"
  | "maxBackends"
  | "model"
  | "encapPortFlag"
  | "configure"
  | "srcAddr6"
  | "learnWindowMs"
>;

/** Opens the datapath `a` asks for (`--datapath`), configured and ready to attach. */
export async function openDatapath(a: DatapathArgs): Promise<NodeDatapath> {
  if (a.datapath === "memory") {
    return {
      kind: "memory",
      lbMaps: new MemoryLBMaps({
        capacity: {
          services: a.maxServices ?? HF_MAX.SERVICES,
          backends: a.maxBackends ?? HF_MAX.BACKENDS,
        },
      }),
      flows: new MemoryFlowTable(),
      subscribe: () => () => Promise.resolve(),
      attach: () => {},
      attachTo: null,
      close: () => {},
    };
  }
  // The interface holding --node-address, found before anything loads: a wrong address fails here.
  const attach = a.attach && "address" in a.attach
    ? {
      ...a.attach,
      ifname: interfaceHolding(
        a.attach.address,
        inNetns(a.attach.netns, () => Deno.networkInterfaces()),
        a.attach.netns,
      ),
    }
    : a.attach;
  // `--src-addr6 auto`: the attach interface's global IPv6 address, read before anything loads.
  let srcAddr6 = a.srcAddr6;
  if (srcAddr6 === "auto") {
    if (!attach) throw new Error(`Cannot use --src-addr6 auto: no attach interface to read`);
    const seen = inNetns(attach.netns, () => Deno.networkInterfaces());
    srcAddr6 = globalIpv6Of(attach.ifname, seen, attach.netns);
    log.info("node IPv6 address from the attach interface", {
      component: "agent",
      iface: attach.ifname,
      src_addr6: srcAddr6,
    });
  }
  const dp = await Datapath.open({
    ...(a.pinDir ? { pinDir: a.pinDir } : {}),
    ...(a.objectDir ? { objectDir: a.objectDir } : {}),
    ...(a.maxFlows ? { maxFlows: a.maxFlows } : {}),
    ...(a.maxServices ? { maxServices: a.maxServices } : {}),
    ...(a.maxBackends ? { maxBackends: a.maxBackends } : {}),
  });
  const kept = a.model === "redis" && a.encapPortFlag === undefined ? pinnedEncapPort(dp) : null;
  const configure = a.configure && { ...a.configure, encapPort: kept ?? a.configure.encapPort };
  if (configure) dp.configure(configure);
  const v6 = new Ipv6Maps(dp.object);
  if (srcAddr6) v6.configure(srcAddr6);
  exportDatapathMetrics(dp, registry);
  exportPinMetrics(dp.object.migrations, registry);
  return {
    kind: "bpf",
    lbMaps: dp.lbMaps(),
    flows: new DualFlowTable(dp.flowTable(), v6.flowTable()),
    subscribe(onEvent) {
      const readers = [
        dp.subscribe(onEvent, flowEventReader(a.learnWindowMs, dp.maps.events.maxEntries)),
        v6.subscribeAgent(
          onEvent,
          flowEventReader(a.learnWindowMs, dp.object.map("hf_events6").maxEntries),
        ),
      ];
      return async () => void await Promise.all(readers.map((r) => r.close()));
    },
    attach() {
      if (attach) dp.attach(attach.ifname, attach.netns ? { netns: attach.netns } : {});
      else dp.finishMigrations();
    },
    attachTo: attach?.ifname ?? null,
    ...(configure
      ? {
        encapPort: configure.encapPort,
        configureEncap: (p) => dp.configure({ ...configure, encapPort: p }),
      }
      : {}),
    ...(srcAddr6 ? { srcAddr6 } : {}),
    close: () => dp[Symbol.dispose](),
  };
}
