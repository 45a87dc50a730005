/**
 * What the agent does with the model's settings (`controller/model/settings.ts`), handed over by
 * `RedisModelSource.onSettings`:
 *
 * - **Encap port**: `--encap-port` when given wins; else the model's `encapPort`; else
 *   {@linkcode HF_ENCAP_PORT_DEFAULT}. A change is written to the datapath's node settings
 *   (`configureEncap`, i.e. `dp.configure`) and logged `encap port set to N (from the model)`.
 *   Backends decapsulate on their own `main.ts decap --encap-port`: operators set both.
 * - **LB node or not**: the source has already withdrawn (or written back) the frontends; here
 *   the change is logged (`not an LB node: lbNodeSelector does not select node X`), counted in
 *   `holdfast_agent_lb_node` and reflected in {@linkcode LbNodeRole.serving}, which `/readyz`
 *   reads (a node that serves nothing is not ready: the router should not send it traffic).
 * - **BGP**: the model's `bgp` section goes to `LbModelBgp` (node/bgp/lb_announcer.ts), which
 *   runs bird once the agent is ready (`--bgp-config` wins over it).
 *
 * @module
 */

import type { Logger } from "../../lib/log.ts";
import { type Registry, registry as rootRegistry } from "../../lib/metrics.ts";
import type { ModelSettings } from "../../controller/model/settings.ts";
import { HF_ENCAP_PORT_DEFAULT } from "../bpf/consts.ts";
import { u32 } from "../bpf/structs.ts";

/**
 * The encap port in a datapath's node settings map (`hf_config`, pinned from an earlier run), or
 * null when none were written: a restarted agent keeps it instead of the default until the model
 * is read (or while Redis is down), so it never sends to a port the backends do not decap.
 */
export function pinnedEncapPort(
  dp: { readonly maps: { readonly config: { lookup(key: Uint8Array): Uint8Array | null } } },
): number | null {
  const v = dp.maps.config.lookup(u32(0)); // struct lb_config: see encodeLbConfig
  return v === null ? null : new DataView(v.buffer, v.byteOffset).getUint16(4, true) || null;
}

/** Options of {@linkcode LbNodeRole}. */
export interface LbNodeRoleOptions {
  nodeName: string;
  /** `--encap-port` when given on the command line: it wins over the model. */
  encapPortFlag?: number;
  /** The encap port written at start (default {@linkcode HF_ENCAP_PORT_DEFAULT}). */
  encapPort?: number;
  /**
   * Writes a new encap port to the datapath. Absent: the agent writes no node settings (no
   * `--src-addr`/`--node-address`), so a port from the model cannot be applied (logged).
   */
  configureEncap?: (port: number) => void;
  logger: Logger;
  /** Where `holdfast_agent_lb_node` lives (default: the process registry). */
  registry?: Registry;
}

/** The agent's LB-node role and encap port, following the model's settings. */
export class LbNodeRole {
  readonly #o: LbNodeRoleOptions;
  readonly #gauge;
  #serving = true;
  #encapPort: number;
  /** Model port last reported as overridden by the flag (logged once per value). */
  #overridden: number | undefined;

  constructor(options: LbNodeRoleOptions) {
    this.#o = options;
    this.#encapPort = options.encapPortFlag ?? options.encapPort ?? HF_ENCAP_PORT_DEFAULT;
    this.#gauge = (options.registry ?? rootRegistry).gauge(
      "holdfast_agent_lb_node",
      "1 while the model's lbNodeSelector selects this node (it serves), 0 while it does not.",
    );
    this.#gauge.set(undefined, 1);
  }

  /** Whether this node serves (false: the selector leaves it out; `/readyz` answers 503). */
  get serving(): boolean {
    return this.#serving;
  }

  /** The encap port in effect. */
  get encapPort(): number {
    return this.#encapPort;
  }

  /** Applies the model's `settings`; `serving` is the source's verdict for this node. */
  apply(settings: ModelSettings, serving: boolean): void {
    const log = this.#o.logger;
    const flag = this.#o.encapPortFlag;
    const model = settings.encapPort;
    if (flag !== undefined && model !== undefined && model !== flag && model !== this.#overridden) {
      this.#overridden = model;
      log.warn("encap port of the model ignored: --encap-port wins", { model, flag });
    }
    const want = flag ?? model ?? HF_ENCAP_PORT_DEFAULT;
    if (want !== this.#encapPort) {
      if (this.#o.configureEncap === undefined) {
        log.warn("cannot apply the encap port of the model: no node settings written", {
          port: want,
          why: "no --src-addr or --node-address",
        });
      } else {
        this.#o.configureEncap(want);
        this.#encapPort = want;
        const from = model !== undefined ? "from the model" : "default: the model has none";
        log.info(`encap port set to ${want} (${from})`, { encapPort: want });
      }
    }
    if (serving === this.#serving) return;
    this.#serving = serving;
    this.#gauge.set(undefined, serving ? 1 : 0);
    const node = this.#o.nodeName;
    if (serving) {
      log.info(`LB node: lbNodeSelector selects node ${node}`, { node, lbNodes: settings.lbNodes });
    } else {
      log.warn(`not an LB node: lbNodeSelector does not select node ${node}`, {
        node,
        lbNodes: settings.lbNodes,
      });
    }
  }
}
