/**
 * The node side of the datapath (docs/backends.md): bpf/build/node_tc.o's hf_node_in on tc
 * ingress and hf_node_out on tc egress of the node's uplink(s), with the frontends each local pod
 * serves and the per-flow reverse translations. Maps are pinned (default
 * /sys/fs/bpf/holdfast-node), so a node agent restart keeps every flow and the next agent adopts
 * them; the programs are replaced atomically on the same filter (handle/priority of its own, so a
 * CNI's tc programs on the uplink stay).
 *
 * @module
 */

import { attachTc, logAttach, type TcAttachment, type TcFilter } from "./attach.ts";
import type { BpfMap } from "./map.ts";
import { BpfObject, type BpfProgram } from "./object.ts";
import { type DecapConfig, encodeDecapConfig, u32 } from "./structs.ts";
import { NODE_REASONS, type NodeReason } from "./consts.ts";
import { countersByName, DEFAULT_OBJECT_DIR, ensureBpffs } from "./datapath.ts";
import {
  decodeNodeFlow,
  decodeNodeSvc,
  encodeNodeSvcKey,
  encodeNodeSvcValue,
  type NodeFlow,
  type PodFrontend,
  podOfKey,
} from "./node_structs.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { log } from "../../lib/log.ts";

/** Default bpffs directory of the node object's maps. */
export const NODE_PIN_DIR = "/sys/fs/bpf/holdfast-node";

/** The node programs, and their build for kernels before 6.3 (checksums by helpers). */
const NODE_OBJECT = "node_tc.o", NODE_COMPAT_OBJECT = "node_tc_compat.o";
/** The node programs' tc filter: beside a CNI's (which commonly use handle 1, priority 1). */
export const NODE_TC_FILTER: TcFilter = { handle: 0x4846, priority: 0x4846 };

/** Maps pinned (state worth keeping); the counters are too, so metrics do not restart at 0. */
export const NODE_PINNED_MAPS: readonly string[] = [
  "hf_node_cfg",
  "hf_node_svc",
  "hf_node_svc6",
  "hf_node_flows",
  "hf_node_flows6",
  "hf_node_stat",
];

/** Options for {@linkcode NodeDatapath.open}. */
export interface NodeDatapathOptions {
  readonly objectDir?: string;
  /** Load node_tc_compat.o (checksums by helpers) whatever the kernel offers (tests, benches). */
  readonly compat?: boolean;
  /** bpffs directory for the maps; null = not pinned (tests). Default {@link NODE_PIN_DIR}. */
  readonly pinDir?: string | null;
}

/** The node side: hf_node_in / hf_node_out and their maps. */
export class NodeDatapath implements Disposable {
  readonly object: BpfObject;
  readonly nodeIn: BpfProgram;
  readonly nodeOut: BpfProgram;
  readonly maps: {
    readonly config: BpfMap;
    readonly svc: BpfMap;
    readonly svc6: BpfMap;
    readonly flows: BpfMap;
    readonly flows6: BpfMap;
    readonly stats: BpfMap;
  };

  private constructor(object: BpfObject) {
    this.object = object;
    this.nodeIn = object.program("hf_node_in");
    this.nodeOut = object.program("hf_node_out");
    this.maps = {
      config: object.map("hf_node_cfg"),
      svc: object.map("hf_node_svc"),
      svc6: object.map("hf_node_svc6"),
      flows: object.map("hf_node_flows"),
      flows6: object.map("hf_node_flows6"),
      stats: object.map("hf_node_stat"),
    };
  }

  /**
   * Loads bpf/build/node_tc.o, reusing the maps pinned in `pinDir` (an agent restart adopts). A
   * kernel that refuses it (before 6.3 it lacks the `bpf_cast_to_kern_ctx` kfunc its in-place
   * checksums read `ip_summed` with) gets node_tc_compat.o, the same programs with every checksum
   * fixed by helpers (~40 ns more per packet); logged once.
   */
  static async open(options: NodeDatapathOptions = {}): Promise<NodeDatapath> {
    const pinDir = options.pinDir === undefined ? NODE_PIN_DIR : options.pinDir;
    if (pinDir !== null) await ensureBpffs(pinDir);
    const open = (name: string) =>
      BpfObject.open(`${options.objectDir ?? DEFAULT_OBJECT_DIR}/${name}`, {
        pinDir: pinDir ?? undefined,
        pinMaps: pinDir === null ? undefined : NODE_PINNED_MAPS,
        migrate: true,
      });
    if (options.compat) return new NodeDatapath(open(NODE_COMPAT_OBJECT));
    try {
      return new NodeDatapath(open(NODE_OBJECT));
    } catch (e) {
      let compat: BpfObject;
      try {
        compat = open(NODE_COMPAT_OBJECT);
      } catch {
        throw e; // not the kfunc: the first error says what
      }
      log.warn("node programs loaded without in-place checksums", {
        object: NODE_COMPAT_OBJECT,
        why: `${NODE_OBJECT} refused: ${(e as Error).message}`,
      });
      return new NodeDatapath(compat);
    }
  }

  /** Sets the encap port and the MSS clamp of the pods' SYN/ACKs (default 6080 and 1432). */
  configure(cfg: DecapConfig = {}): void {
    this.maps.config.update(u32(0), encodeDecapConfig(cfg));
  }

  /** Packets to `vip:port/proto` encapsulated to `pod` go to `pod:targetPort`. */
  setFrontend(f: PodFrontend): void {
    this.#svcMap(f.pod).update(encodeNodeSvcKey(f), encodeNodeSvcValue(f.targetPort));
  }

  /** Removes one (pod, frontend) pair; false when it was not there. */
  deleteFrontend(f: Omit<PodFrontend, "targetPort">): boolean {
    return this.#svcMap(f.pod).delete(encodeNodeSvcKey(f));
  }

  /** Every (pod, frontend) pair in the maps, both families. */
  frontends(): PodFrontend[] {
    return [...this.maps.svc.entries(), ...this.maps.svc6.entries()].map(([k, v]) =>
      decodeNodeSvc(k, v)
    );
  }

  /** Every recorded flow, both families. */
  flows(): NodeFlow[] {
    return [...this.maps.flows.entries(), ...this.maps.flows6.entries()].map(([k, v]) =>
      decodeNodeFlow(k, v)
    );
  }

  /**
   * Deletes the recorded flows whose pod is not in `keep` (pods gone from this node), or whose
   * last client packet is older than `idleBeforeNs` (monotonic ns; 0n: none by age). Returns how
   * many were deleted.
   */
  pruneFlows(keep: ReadonlySet<string>, idleBeforeNs = 0n): number {
    let n = 0;
    for (const [map, v4] of [[this.maps.flows, true], [this.maps.flows6, false]] as const) {
      for (const [k, v] of map.entries()) {
        const gone = !keep.has(podOfKey(k, v4));
        const idle = idleBeforeNs > 0n && decodeNodeFlow(k, v).lastSeenNs < idleBeforeNs;
        if ((gone || idle) && map.delete(k)) n++;
      }
    }
    return n;
  }

  /**
   * Attaches hf_node_in to ingress and hf_node_out to egress of `ifname`, replacing ours in one
   * step each (`BPF_TC_F_REPLACE` on our handle/priority), then finishes the maps migrated at
   * load once every uplink has the new programs (`finishMigrations`, called by the agent).
   */
  attach(ifname: string, options: { netns?: string } = {}): [TcAttachment, TcAttachment] {
    const filter = NODE_TC_FILTER;
    const started = performance.now();
    const ingress = attachTc(this.nodeIn, ifname, { ...options, direction: "ingress", filter });
    logAttach(ingress, "tc", performance.now() - started);
    const t = performance.now();
    const egress = attachTc(this.nodeOut, ifname, {
      ...options,
      direction: "egress",
      createQdisc: false,
      filter,
    });
    logAttach(egress, "tc", performance.now() - t);
    return [ingress, egress];
  }

  /** Completes migrated maps (`_pin_migrate.ts`) once the old programs are replaced. */
  finishMigrations(): Map<string, number> {
    return this.object.migrations?.finish() ?? new Map();
  }

  /** Node counters summed over CPUs. */
  stats(): Record<NodeReason, bigint> {
    return countersByName(this.maps.stats, NODE_REASONS);
  }

  #svcMap(pod: string): BpfMap {
    return isIpv4(pod) ? this.maps.svc : this.maps.svc6;
  }

  /** Closes handles; attached programs and pinned maps keep running. */
  [Symbol.dispose](): void {
    this.object[Symbol.dispose]();
  }
}
