/**
 * Flow redirection for anycast nodes (`main.ts anycast --redirect`, docs/anycast.md "Flow
 * redirection"): the stateful LB datapath on the node's uplink, so a packet of an established
 * flow that ECMP moved to this node reaches the node that owns the flow.
 *
 * - hf_lb (XDP) on the uplink, with each anycast service's LB address and ports as frontends and
 *   this node as their only backend (node/anycast/redirect_config.ts). A new flow's backend is
 *   this node: hf_lb passes it to the kernel (`pass_local_backend`), and its flow, naming this
 *   node, is shared through the flow store by the flow-sync agent (node/lb/flows) like any LB
 *   node's. A flow in the map naming another node — learned from the store — is encapsulated to
 *   that node.
 * - hf_decap / hf_mss_clamp (tc) on the same uplink: encapsulated packets from other nodes are
 *   stripped and delivered locally; SYN/ACKs from an LB address get their MSS clamped so client
 *   segments fit the encapsulation (docs/mtu.md).
 * - The LB addresses are held on a device of their own (`hf-anycast`: a dummy, or an empty
 *   bridge where the kernel lacks the dummy driver), not on `lo`: they are
 *   local (redirected packets are delivered) whether or not this node announces them, so a
 *   draining node keeps serving the flows it owns while the routers send it nothing new. bird
 *   watches `lo` only.
 *
 * Ordering: {@linkcode FlowRedirect.update} restores every stored flow of the LB addresses
 * before it resolves the first time, and the agent puts addresses on `lo` (announces) only after
 * it, so a node never announces before it can place moved flows.
 *
 * @module
 */

import { type ControlPlane, createControlPlane } from "../lb/control_plane.ts";
import { FileSource } from "../lb/sources/file_source.ts";
import { log as rootLog, type Logger } from "../../lib/log.ts";
import type { RedisStoreOptions } from "../../lib/redis_connection.ts";
import { DecapDatapath } from "../bpf/decap_datapath.ts";
import { type NodeDatapath, openDatapath } from "../lb/_datapath.ts";
import { FlowSyncAgent } from "../lb/flows/sync_agent.ts";
import { connectRedisStore } from "../lb/flows/redis_store.ts";
import type { FlowStore } from "../lb/flows/store.ts";
import { IpLoopback, runIp } from "./loopback.ts";
import { type AnycastService, managedAddresses } from "./model.ts";
import { redirectAddress, redirectConfig } from "./redirect_config.ts";
import { OwnerPurger } from "./redirect_purge.ts";

/**
 * Longest wait gathering new flows into one burst on an anycast node (the LB agent's default is
 * 200 ms): a node that drains is withdrawn at once, and a connection it accepted in its last
 * moments survives the move only if its flow is shared before its next packet lands elsewhere. 50
 * ms keeps that window short at a bounded cost (at most 20 bursts a second, ~1 ms of CPU each).
 */
export const REDIRECT_LEARN_WINDOW_MS = 50;
import { OwnerLiveness, RedisLivenessStore } from "./liveness.ts";

/** Options of {@linkcode FlowRedirect.open}. */
export interface FlowRedirectOptions {
  /** This node's name (written with its flows). */
  readonly node: string;
  /** The uplink: hf_lb (XDP) and decap (tc) attach here. */
  readonly attach: string;
  /** This node's address on the uplink: outer source, and the backend of its own flows. */
  readonly srcAddr: string;
  /** Addresses of the anycast nodes flows may be owned by (this one is added). */
  readonly owners: readonly string[];
  /** The shared flow store. */
  readonly redis: RedisStoreOptions;
  /** Encapsulation UDP port (default 6080); the same on every node. */
  readonly encapPort?: number;
  /** Flow hash seed (default 0); the same on every node. */
  readonly seed?: number;
  /** bpffs directory of the maps (default the datapath's, /sys/fs/bpf/holdfast). */
  readonly pinDir?: string;
  /** The device holding the LB addresses for local delivery (default `hf-anycast`). */
  readonly device?: string;
  /** MSS clamp of SYN/ACKs from an LB address (default 1432: 1500 − 40 − 28). */
  readonly mssMax?: number;
  /** The liveness record (node/anycast/liveness.ts; default 1 s refresh, 5 s TTL). */
  readonly liveness?: { readonly intervalMs?: number; readonly ttlMs?: number };
  readonly log?: Logger;
}

/** The redirection datapath of one anycast node; {@linkcode update} with each state. */
export class FlowRedirect {
  readonly #o: FlowRedirectOptions;
  readonly #log: Logger;
  readonly #dp: NodeDatapath;
  readonly #cp: ControlPlane;
  readonly #file: FileSource;
  readonly #decap: DecapDatapath;
  readonly #store: FlowStore & { close(): Promise<void> };
  readonly #flows: FlowSyncAgent;
  readonly #device: IpLoopback;
  readonly #unsubscribe: () => Promise<void>;
  #applied = "";
  #localVips = new Set<string>();
  #started = false;
  readonly #purger: OwnerPurger;
  readonly #liveness: OwnerLiveness;
  #purging: Promise<void> = Promise.resolve();

  private constructor(
    o: FlowRedirectOptions,
    parts: {
      dp: NodeDatapath;
      cp: ControlPlane;
      decap: DecapDatapath;
      store: FlowStore & { close(): Promise<void> };
      liveness: RedisLivenessStore;
    },
  ) {
    this.#o = o;
    this.#log = o.log ?? rootLog.with({ component: "anycast-redirect", node: o.node });
    this.#dp = parts.dp;
    this.#cp = parts.cp;
    this.#decap = parts.decap;
    this.#store = parts.store;
    this.#file = new FileSource(this.#cp.writer, { source: "anycast" });
    this.#cp.start();
    this.#device = new IpLoopback(o.device ?? "hf-anycast");
    this.#flows = new FlowSyncAgent(this.#dp.flows, this.#store, {
      node: o.node,
      vips: [],
      logger: this.#log,
    });
    // Events are taken from the start and queue in the agent until it is ready.
    this.#unsubscribe = this.#dp.subscribe((ev) => this.#flows.learn(ev));
    this.#purger = new OwnerPurger({
      store: this.#store,
      node: o.node,
      self: o.srcAddr,
      log: this.#log,
    });
    this.#liveness = new OwnerLiveness({
      self: o.srcAddr,
      node: o.node,
      owners: o.owners,
      store: parts.liveness,
      ...o.liveness,
      log: this.#log,
      // In the purge chain: one purge at a time, after the state that configured the addresses.
      onLapse: (owner) => {
        const done = this.#purging.then(() => this.#purger.lapsed(owner, this.#liveness.ttlMs));
        this.#purging = done.then(() => {}, () => {});
        return done.then(() => {});
      },
    });
  }

  /**
   * Loads hf_lb (maps pinned in `pinDir`) and the decap programs, creates the delivery device;
   * nothing is attached and no flow restored until the first {@linkcode update}.
   */
  static async open(o: FlowRedirectOptions): Promise<FlowRedirect> {
    const encapPort = o.encapPort ?? 6080;
    const dp = await openDatapath({
      datapath: "bpf",
      attach: { ifname: o.attach },
      learnWindowMs: REDIRECT_LEARN_WINDOW_MS,
      ...(o.pinDir ? { pinDir: o.pinDir } : {}),
      configure: { srcAddr: o.srcAddr, encapPort, seed: o.seed ?? 0 },
    });
    const closers: (() => unknown)[] = [() => dp.close()];
    try {
      const cp = await createControlPlane(dp.lbMaps, {
        logger: (o.log ?? rootLog).with({ component: "control-plane" }),
      });
      closers.push(() => cp.stop());
      const decap = await DecapDatapath.open();
      closers.push(() => decap[Symbol.dispose]());
      decap.configure({ encapPort, mssMax: o.mssMax ?? 1432 });
      await ensureDummy(o.device ?? "hf-anycast");
      const store = connectRedisStore(o.redis);
      const liveness = new RedisLivenessStore(o.redis);
      return new FlowRedirect(o, { dp, cp, decap, store, liveness });
    } catch (e) {
      for (const close of closers.reverse()) await close();
      throw e;
    }
  }

  /** True once the flow map holds every stored flow of the LB addresses (until stop). */
  get ready(): boolean {
    return this.#flows.ready;
  }

  /**
   * Programs the services' frontends (this node the only backend), holds their addresses on the
   * delivery device and in decap's local LB IPs, and follows them in the flow store. The first
   * call restores every stored flow, then attaches hf_lb and decap; it resolves only then (it
   * retries while the store is unreachable), so the caller announces after it. IPv4 and IPv6
   * addresses alike; a service or address the datapath refuses is logged and the others go on.
   * `owned`: the addresses this node has a local pod for (serving or terminating); when one it
   * had is no longer among them (at the first state: is not among them), this node's flows of it
   * are purged everywhere, in the background (node/anycast/redirect_purge.ts). `serving`: the
   * services a local pod serves (redirect_config.ts): the others take no new TCP connection,
   * programmed before it resolves — so before the caller withdraws their addresses.
   */
  async update(
    services: readonly AnycastService[],
    options: {
      signal?: AbortSignal;
      owned?: ReadonlySet<string>;
      serving?: ReadonlySet<string>;
    } = {},
  ): Promise<void> {
    const c = redirectConfig(services, this.#o.srcAddr, this.#o.owners, options.serving);
    const text = JSON.stringify(c.datapath);
    if (text !== this.#applied) {
      if (c.skipped.length > 0) {
        this.#log.warn("not redirected: no TCP/UDP port, or an address neither IPv4 nor IPv6", {
          services: c.skipped,
        });
      }
      // One service the control plane refuses (or slow to program) never stops the others nor
      // the agent: logged, and tried again with the next state.
      try {
        this.#file.load(text, { format: "json" });
        for (const s of c.datapath.services) {
          for (const f of s.frontends) {
            await this.#cp.waitFrontend(f.address, { timeoutMs: 10_000 });
          }
        }
        this.#applied = text;
      } catch (error) {
        this.#log.error("flow redirection frontends not all programmed; the others go on", {
          error,
        });
      }
    }
    // Every managed address, redirected or not (a service without ports too), as before IPv6.
    const managed = [...managedAddresses(services)].map(redirectAddress);
    await this.#holdLocally(managed.filter((a): a is string => a !== undefined));
    this.#flows.setServices(c.trust);
    await this.#flows.setVips(c.vips);
    if (!this.#started) {
      this.#log.info("restoring flows before announcing", { vips: c.vips });
      await this.#flows.start(options);
      this.#decap.attach(this.#o.attach);
      this.#dp.attach();
      this.#started = true;
      // Alive from here (redirecting); the others' lapses are watched from here too.
      this.#liveness.start();
      this.#log.info("flow redirection ready", {
        vips: c.vips,
        attached: this.#o.attach,
        owners: this.#o.owners,
      });
    }
    // In the background, one at a time: a slow or unreachable store never holds up the next
    // state (the addresses following the pods).
    const owned = options.owned;
    if (owned) this.#purging = this.#purging.then(() => this.#purger.update(c, owned));
  }

  async #holdLocally(addresses: readonly string[]): Promise<void> {
    const want = new Set(addresses);
    let on = new Set<string>();
    try {
      on = await this.#device.list();
    } catch (error) {
      this.#log.error("cannot list the delivery device's addresses", { error });
    }
    // Each address on its own: one the device or decap refuses is named, the others go on.
    const each = async (what: string, address: string, step: () => unknown) => {
      try {
        await step();
      } catch (error) {
        this.#log.error(`cannot ${what} LB address for local delivery`, { address, error });
      }
    };
    for (const a of on) if (!want.has(a)) await each("remove", a, () => this.#device.remove(a));
    for (const a of want) if (!on.has(a)) await each("add", a, () => this.#device.add(a));
    for (const a of this.#localVips) {
      if (!want.has(a)) await each("remove", a, () => this.#decap.removeLocalVip(a));
    }
    for (const a of want) await each("add", a, () => this.#decap.addLocalVip(a));
    this.#localVips = want;
  }

  /**
   * Stops following the store and closes handles. hf_lb, decap and the delivery device stay:
   * the flows in the map keep being redirected and delivered until the next agent takes over.
   */
  async close(): Promise<void> {
    await this.#liveness.stop({ deregister: true });
    await this.#purging;
    await this.#flows.stop();
    await this.#unsubscribe();
    await this.#store.close();
    await this.#cp.stop();
    this.#decap[Symbol.dispose]();
    this.#dp.close();
  }
}

/**
 * Creates the device `name` if missing — a dummy, or an empty bridge where the kernel has no
 * dummy driver (either holds local addresses and carries no traffic) — and sets it up.
 */
async function ensureDummy(name: string): Promise<void> {
  const shown = await runIp(["link", "show", "dev", name]);
  if (!shown.ok) {
    const dummy = await runIp(["link", "add", name, "type", "dummy"]);
    const added = dummy.ok ? dummy : await runIp(["link", "add", name, "type", "bridge"]);
    if (!added.ok) {
      throw new Error(
        `Cannot create device "${name}" (dummy: ${dummy.err}; bridge: ${added.err})`,
      );
    }
  }
  const up = await runIp(["link", "set", "dev", name, "up"]);
  if (!up.ok) throw new Error(`Cannot set "${name}" up: ${up.err}`);
}
