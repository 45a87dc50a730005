/**
 * What the anycast lab adds for flow redirection (`AnycastLab.create({ redirect: true })`,
 * docs/anycast.md "Flow redirection"): the shared flow store (redis-server in the router
 * namespace on 10.8.0.1:6379), a pass-through XDP program on the router's ends of the node links
 * (XDP_TX on a veth delivers only if the peer has one: shared FINDINGS), a bpffs per node for its
 * pinned maps (in the root mount namespace, as lab/cluster.ts does), and each node's
 * `main.ts anycast --redirect` flags.
 *
 * @module
 */

import { run } from "./command.ts";
import { type RedisServer, startRedis } from "./redis_server.ts";
import type { Topology } from "./netns.ts";
import { unmountUnder } from "./cluster.ts";
import { attachXdp, BpfObject, DEFAULT_OBJECT_DIR } from "../node/bpf/mod.ts";

/** Where the nodes reach the flow store. */
export const REDIRECT_REDIS = { bind: "10.8.0.1", port: 6379 } as const;

/** A node as redirection sees it: its name and its address on the router link. */
export interface RedirectNode {
  readonly name: string;
  readonly address: string;
}

/** The redirection parts of a running anycast lab; {@linkcode stop} them with the lab. */
export class RedirectParts {
  private constructor(
    readonly redis: RedisServer,
    readonly pass: BpfObject,
    readonly dir: string,
    readonly nodes: readonly RedirectNode[],
  ) {}

  /** Starts Redis, attaches the router's pass-through programs, mounts the nodes' bpffs. */
  static async start(
    topo: Topology,
    dir: string,
    nodes: readonly RedirectNode[],
  ): Promise<RedirectParts> {
    const redis = await startRedis({ netns: topo.ns("router"), ...REDIRECT_REDIS });
    let pass: BpfObject | undefined;
    try {
      pass = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
      for (const n of nodes) {
        attachXdp(pass.program("hf_xdp_pass"), `r-${n.name}`, { netns: topo.ns("router") });
        await Deno.mkdir(`${dir}/${n.name}.bpffs`, { recursive: true });
        await run(["mount", "-t", "bpf", "bpf", `${dir}/${n.name}.bpffs`]);
      }
      return new RedirectParts(redis, pass, dir, nodes);
    } catch (e) {
      pass?.[Symbol.dispose]();
      await unmountUnder(dir);
      await redis[Symbol.asyncDispose]();
      throw e;
    }
  }

  /** The `main.ts anycast` flags of node `name`. */
  agentArgs(name: string): string[] {
    const self = this.nodes.find((n) => n.name === name);
    if (!self) throw new Error(`No anycast node "${name}" in the redirect lab`);
    return [
      "--redirect",
      "--redis",
      `redis://${REDIRECT_REDIS.bind}:${REDIRECT_REDIS.port}`,
      "--attach",
      "eth0",
      "--src-addr",
      self.address,
      "--owners",
      this.nodes.map((n) => n.address).join(","),
      "--pin-dir",
      `${this.dir}/${name}.bpffs/holdfast`,
    ];
  }

  /** Permissions the agent needs beyond plain anycast's. */
  get permissions(): string[] {
    return ["--allow-ffi", `--allow-net=127.0.0.1,${REDIRECT_REDIS.bind}`];
  }

  /** Unmounts the nodes' bpffs and stops Redis (call after the namespaces are gone). */
  async stop(): Promise<void> {
    this.pass[Symbol.dispose]();
    await unmountUnder(this.dir);
    await this.redis[Symbol.asyncDispose]();
  }
}
