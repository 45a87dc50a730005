/**
 * A rig for replacing programs under traffic (tests/netns/program_swap_test.ts, bench/swap.ts):
 *
 * ```
 *  client ── c0 router ── l1 ── lb1 (XDP hf_lb, maps pinned in a bpffs dir of this run)
 *  eth0:     (forwards) ── b1 ── be1 (tc hf_decap; LB IP on lo)
 *  XDP gen (a worker thread: lab/_xdp_gen_worker.ts)
 * ```
 *
 * The generator sends UDP frames (client → LB IP:80, `flows` source ports) as live frames from
 * the client's eth0 on its own thread while the caller swaps programs on the main thread; every
 * frame hf_lb encapsulates reaches be1, where hf_decap counts it. Frames lost = frames sent −
 * frames decapsulated (summed over every decap object loaded, old and new), once the counts
 * settle. The router-side peers c0 and l1 run `hf_xdp_pass` natively (FINDINGS: XDP_TX over
 * veth). Names are prefixed `hf-<pid>-` by createTopology and removed by `close()`.
 *
 * @module
 */

import {
  attachXdp,
  BpfObject,
  Datapath,
  DecapDatapath,
  DEFAULT_OBJECT_DIR,
  ifIndex,
  inNetns,
  type XdpAttachment,
} from "../node/bpf/mod.ts";
import { programId } from "../node/bpf/attach.ts";
import { bpf } from "../node/bpf/_ffi.ts";
import { createTopology, routerSpoke, type Topology } from "./netns.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { udpFrame } from "./packets.ts";
import type { GenJob } from "./_xdp_gen_worker.ts";

const VIP = "10.0.100.1";
const PORT = 80;
const SPORT_BASE = 20_000;

/** How one swap of the LB program went. */
export interface LbSwap {
  /** Time to open and load the new object (maps reused or migrated), ms. */
  readonly loadMs: number;
  /** Time of the attach call itself (replace, or detach + attach), ms. */
  readonly attachMs: number;
  readonly attachment: XdpAttachment;
  /** Entries carried per migrated map. */
  readonly migrated: Map<string, number>;
}

/** Traffic running on the generator's thread. */
export interface Traffic {
  /** Batches sent so far. */
  batches(): number;
  /** Stops the generator; resolves to the frames sent. */
  stop(): Promise<number>;
}

/** Options for {@linkcode openSwapRig}. */
export interface SwapRigOptions {
  /** Five-tuples the generator spreads its frames over (default 64). */
  readonly flows?: number;
  /** Flow map size of the first datapath (default: the object's). */
  readonly maxFlows?: number;
}

/** The rig; `close()` removes the namespaces, pins and objects. */
export class SwapRig implements AsyncDisposable {
  lb!: Datapath;
  /** The LB program's attachment on lb1's eth0, the latest. */
  attachment!: XdpAttachment;
  readonly decaps: DecapDatapath[] = [];
  readonly #pass: BpfObject;
  readonly #frame: Uint8Array;

  private constructor(
    readonly topo: Topology,
    readonly pinDir: string,
    readonly flows: number,
    pass: BpfObject,
    frame: Uint8Array,
  ) {
    this.#pass = pass;
    this.#frame = frame;
  }

  /** Loads a datapath over this rig's pins and programs its one service (10.12.1.2:80). */
  async openLb(options: { maxFlows?: number } = {}): Promise<Datapath> {
    const dp = await Datapath.open({ pinDir: this.pinDir, ...options });
    dp.configure({ srcAddr: "10.11.1.2", encapPort: 6080, seed: 0 });
    const maps = dp.lbMaps();
    await maps.updateBackend(1, { address: "10.12.1.2", port: PORT });
    const table = new TsMaglevBuilder().build([{ key: `10.12.1.2:${PORT}`, weight: 1 }], 251);
    await maps.updateMaglev(1, table);
    await maps.updateService({ address: VIP, port: PORT, protocol: "UDP" }, {
      serviceId: 1,
      backendCount: 1,
      flowKeyMode: "five-tuple",
      maglevSize: table.length,
    });
    return dp;
  }

  /**
   * Replaces the LB program on lb1's eth0 with a newly loaded one (as an upgraded agent does:
   * open over the pins, program, attach) — atomically, or with `detachFirst` as a restart that
   * detaches on stop would: detached first, attached once the new one is loaded and programmed;
   * `unchecked`: the kernel replace as agents before `XDP_FLAGS_REPLACE` called it (no expected
   * program).
   */
  async swapLb(
    options: { detachFirst?: boolean; unchecked?: boolean; maxFlows?: number } = {},
  ): Promise<LbSwap> {
    if (options.detachFirst) this.attachment.detach();
    const t0 = performance.now();
    const next = await this.openLb(options.maxFlows ? { maxFlows: options.maxFlows } : {});
    const t1 = performance.now();
    const netns = this.topo.ns("lb1");
    const attachment = options.unchecked
      ? this.#attachUnchecked(next)
      : next.attach("eth0", { netns, mode: "native" });
    const attachMs = performance.now() - t1;
    const migrated = next.finishMigrations();
    this.lb[Symbol.dispose]();
    this.lb = next;
    this.attachment = attachment;
    return { loadMs: t1 - t0, attachMs, attachment, migrated };
  }

  /** `bpf_xdp_attach(ifindex, fd, XDP_FLAGS_DRV_MODE, NULL)`, the call agents made before. */
  #attachUnchecked(dp: Datapath): XdpAttachment {
    const netns = this.topo.ns("lb1");
    const ifindex = inNetns(netns, () => {
      const idx = ifIndex("eth0");
      const r = bpf().bpf_xdp_attach(idx, dp.program.fd, 4, /* XDP_FLAGS_DRV_MODE */ null);
      if (r < 0) throw new Error(`Cannot attach hf_lb in ${netns}: errno ${-r}`);
      return idx;
    });
    dp.finishMigrations();
    const progId = programId(dp.program);
    const previous = this.attachment;
    return {
      ifname: "eth0",
      ifindex,
      netns,
      mode: "native",
      replacedId: previous.progId,
      progId,
      detach: () => previous.detach(),
    };
  }

  /** Replaces hf_decap/hf_mss_clamp on be1's eth0 with a newly loaded object (tc replace). */
  async swapDecap(): Promise<void> {
    const decap = await DecapDatapath.open();
    decap.configure({ encapPort: 6080, mssMax: 1500 - 40 - 28 });
    decap.addLocalVip(VIP);
    decap.attach("eth0", { netns: this.topo.ns("be1") });
    this.decaps.push(decap);
  }

  /** Frames decapsulated at be1 so far, over every decap object loaded. */
  delivered(): number {
    return this.decaps.reduce((n, d) => n + Number(d.stats().decap), 0);
  }

  /**
   * Waits (bounded: `timeoutMs`) until `delivered()` reaches `sent` or stops moving for 300 ms;
   * returns it.
   */
  async settle(sent: number, timeoutMs = 10_000): Promise<number> {
    const end = Date.now() + timeoutMs;
    let last = -1, still = Date.now();
    while (Date.now() < end) {
      const now = this.delivered();
      if (now >= sent) return now;
      if (now !== last) [last, still] = [now, Date.now()];
      else if (Date.now() - still > 300) return now;
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.delivered();
  }

  /** Starts the generator: `batch` frames per call, `pauseMs` between calls, ≤ `maxSeconds`. */
  traffic(options: { batch?: number; pauseMs?: number; maxSeconds?: number } = {}): Traffic {
    const control = new SharedArrayBuffer(8);
    const worker = new Worker(new URL("./_xdp_gen_worker.ts", import.meta.url), {
      type: "module",
    });
    const done = new Promise<number>((resolve, reject) => {
      worker.onmessage = (e: MessageEvent<{ sent?: number; error?: string }>) => {
        worker.terminate();
        if (e.data.error) reject(new Error(`Generator failed: ${e.data.error}`));
        else resolve(e.data.sent ?? 0);
      };
      worker.onerror = (e) => {
        worker.terminate();
        reject(new Error(`Generator failed: ${e.message}`));
      };
    });
    const job: GenJob = {
      netns: this.topo.ns("client"),
      ifname: "eth0",
      frame: this.#frame,
      sportBase: SPORT_BASE,
      flows: this.flows,
      batch: options.batch ?? 16,
      pauseMs: options.pauseMs ?? 0.2,
      maxSeconds: options.maxSeconds ?? 60,
      control,
    };
    worker.postMessage(job);
    const ctl = new Int32Array(control);
    return {
      batches: () => Atomics.load(ctl, 1),
      stop: () => {
        Atomics.store(ctl, 0, 1);
        return done;
      },
    };
  }

  /** hf_flows as `key bytes → value bytes minus last_seen` (what a flow's placement is). */
  flowPlacements(): Map<string, string> {
    return new Map(
      this.lb.maps.flows.entries().map(([k, v]) => [k.join(","), v.subarray(0, 8).join(",")]),
    );
  }

  /** Builds the topology and loads everything; the first LB program is attached. */
  static async open(options: SwapRigOptions = {}): Promise<SwapRig> {
    const spokes = [
      routerSpoke("client", "c0", "10.10.0"),
      routerSpoke("lb1", "l1", "10.11.1"),
      routerSpoke("be1", "b1", "10.12.1"),
    ];
    const topo = await createTopology({
      hosts: [
        { name: "client" },
        { name: "router", sysctls: { "net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 2 } },
        { name: "lb1" },
        { name: "be1", loopback: [`${VIP}/32`] },
      ],
      links: spokes.map((s) => s.link),
      routes: [...spokes.map((s) => s.route), {
        host: "router",
        to: `${VIP}/32`,
        via: "10.11.1.2",
      }],
    });
    const pinDir = `/sys/fs/bpf/hf-${Deno.pid}-swap`;
    let pass: BpfObject | null = null;
    try {
      pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
      for (const dev of ["c0", "l1"]) {
        attachXdp(pass.program("hf_xdp_pass"), dev, { netns: topo.ns("router") });
      }
      for (const [to, dev, host] of [["10.11.1.2", "l1", "lb1"], ["10.12.1.2", "b1", "be1"]]) {
        const mac = await macOf(topo, host!, "eth0");
        await topo.exec("router", ["ip", "neigh", "replace", to!, "lladdr", mac, "dev", dev!]);
      }
      const frame = udpFrame("10.10.0.2", VIP, SPORT_BASE, PORT, new Uint8Array(18));
      frame.set(macBytes(await macOf(topo, "router", "c0")), 0);
      frame.set(macBytes(await macOf(topo, "client", "eth0")), 6);
      new DataView(frame.buffer).setUint16(40, 0); // UDP checksum 0: the generator sets ports
      const rig = new SwapRig(topo, pinDir, options.flows ?? 64, pass, frame);
      rig.lb = await rig.openLb(options.maxFlows ? { maxFlows: options.maxFlows } : {});
      rig.attachment = rig.lb.attach("eth0", { netns: topo.ns("lb1"), mode: "native" });
      await rig.swapDecap();
      return rig;
    } catch (e) {
      pass?.[Symbol.dispose]();
      Datapath.unpin(pinDir);
      await topo.destroy();
      throw e;
    }
  }

  /** Removes everything the rig made. */
  async close(): Promise<void> {
    try {
      this.lb?.[Symbol.dispose]();
      for (const d of this.decaps) d[Symbol.dispose]();
      this.#pass[Symbol.dispose]();
      Datapath.unpin(this.pinDir);
    } finally {
      await this.topo.destroy();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

async function macOf(topo: Topology, host: string, ifname: string): Promise<string> {
  const out = await topo.exec(host, ["ip", "-j", "link", "show", "dev", ifname]);
  const addr = (JSON.parse(out.stdout) as Array<{ address?: string }>)[0]?.address;
  if (!addr) throw new Error(`No MAC address for ${ifname} in ${host}: ${out.stdout}`);
  return addr;
}

function macBytes(mac: string): number[] {
  return mac.split(":").map((h) => parseInt(h, 16));
}
