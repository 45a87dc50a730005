/**
 * What flow redirection (node/anycast/redirect.ts) programs, from the anycast services: a pure
 * translation, so it is unit tested without a datapath.
 *
 * - The **datapath config** (the file source's format, node/lb/sources/file_source.ts): one LB
 *   service per anycast service, a frontend per LB address and port, and this node as the only
 *   backend. Maglev then picks this node for every new flow — hf_lb passes such flows to the
 *   kernel (`pass_local_backend`) — while a flow found in the flow map, learned from the node that
 *   owns it, is encapsulated to that node.
 * - The **trust view** for flows read from the shared store (node/lb/flows/frontends.ts): the same
 *   frontends served by every anycast node (`owners`), so a flow owned by another node is
 *   installed and one naming any other address is refused.
 *
 * @module
 */

import type { ServicesView } from "../lb/flows/frontends.ts";
import { isIpv4 } from "../../lib/ipv4.ts";
import { formatIpv6, ipv6Bytes, isIpv6 } from "../../lib/ipv6.ts";
import { joinHostPort } from "../lb/tables/address.ts";
import type { AnycastService } from "./model.ts";

/** One port of a service: `80/TCP` → `{ port: 80, protocol: "TCP" }`. */
export interface ServicePort {
  readonly port: number;
  readonly protocol: "TCP" | "UDP";
}

/**
 * Parses `80/TCP`, `53/UDP` or `80` (TCP).
 *
 * @throws {TypeError} naming the value when it is not a port 1..65535 with TCP or UDP.
 */
export function parseServicePort(text: string): ServicePort {
  const m = /^(\d{1,5})(?:\/(TCP|UDP))?$/i.exec(text.trim());
  const port = m ? Number(m[1]) : NaN;
  if (!m || port < 1 || port > 65535) {
    throw new TypeError(
      `Cannot redirect port ${JSON.stringify(text)}: expected PORT or PORT/TCP|UDP (1..65535)`,
    );
  }
  return { port, protocol: (m[2]?.toUpperCase() ?? "TCP") as "TCP" | "UDP" };
}

/** A service name the file source accepts (`namespace/name`; anycast names may lack the namespace). */
function lbName(name: string): string {
  return name.includes("/") ? name : `default/${name}`;
}

/**
 * An LB address as the datapath names it: IPv4 as given, IPv6 in RFC 5952 form; undefined when it
 * is neither (such an address is named in `skipped`, the others of its service go on).
 */
export function redirectAddress(text: string): string | undefined {
  if (isIpv4(text)) return text;
  if (isIpv6(text)) return formatIpv6(ipv6Bytes(text));
  return undefined;
}

interface Entry {
  /** The anycast service's name as given. */
  readonly source: string;
  readonly name: string;
  readonly addresses: string[];
  readonly frontends: { address: string; portName: string }[];
  readonly ports: ServicePort[];
}

/**
 * The services redirection covers: IPv4 and IPv6 addresses (the backend, this node, is IPv4 for
 * both: an IPv6 client's packet is encapsulated in outer IPv4, decap takes either inner family)
 * and at least one TCP or UDP port.
 */
function entries(services: readonly AnycastService[]): { list: Entry[]; skipped: string[] } {
  const list: Entry[] = [];
  const skipped: string[] = [];
  for (const s of services) {
    const ports: ServicePort[] = [];
    for (const text of s.ports ?? []) {
      try {
        ports.push(parseServicePort(text));
      } catch {
        skipped.push(`${s.name} port ${text}`); // e.g. SCTP: the datapath has TCP and UDP
      }
    }
    const addresses: string[] = [];
    for (const text of s.addresses) {
      const a = redirectAddress(text);
      if (a === undefined) skipped.push(`${s.name} address ${text}`);
      else if (!addresses.includes(a)) addresses.push(a);
    }
    if (ports.length === 0 || addresses.length === 0) {
      skipped.push(s.name);
      continue;
    }
    const frontends = addresses.flatMap((a) =>
      ports.map((p) => ({
        address: `${joinHostPort(a, p.port)}/${p.protocol}`,
        portName: `${p.port}-${p.protocol.toLowerCase()}`,
      }))
    );
    list.push({ source: s.name, name: lbName(s.name), addresses, frontends, ports });
  }
  return { list, skipped };
}

function backendsOf(addresses: readonly string[], ports: readonly ServicePort[]) {
  return addresses.flatMap((a) =>
    ports.map((p) => ({
      address: `${a}:${p.port}/${p.protocol}`,
      portName: `${p.port}-${p.protocol.toLowerCase()}`,
    }))
  );
}

/** The datapath config and the trust view of flow redirection, and the services left out. */
export interface RedirectConfig {
  /** The file source's JSON (node/lb/sources/file_source.ts): this node is every backend. */
  readonly datapath: {
    readonly services: {
      name: string;
      flowKeyMode: "five-tuple";
      /** True while no local pod serves the service: new TCP connections are not taken. */
      draining?: boolean;
      frontends: { address: string; portName: string }[];
      backends: { address: string; portName: string }[];
    }[];
  };
  /** Frontends served by every owner: flows from the store are checked against it. */
  readonly trust: ServicesView;
  /** The LB addresses to follow in the flow store (sorted, unique). */
  readonly vips: readonly string[];
  /**
   * Services without a port or an address, ports not TCP or UDP, addresses neither IPv4 nor
   * IPv6: not redirected (each named).
   */
  readonly skipped: readonly string[];
}

/**
 * Translates the anycast services for a node at `self` among the anycast nodes `owners`.
 * `serving`: the services a local pod serves now (ready, not terminating); the others are
 * **draining** — the node withdraws their addresses, or never announced them — so hf_lb drops a
 * TCP SYN of theirs that finds no flow (`HF_SVC_F_DRAINING`): a client whose SYN reached this
 * node while routers still sent it here retries (1 s) and lands on a node that stays, instead of
 * completing its handshake here and having its next packets moved, unknown, to another node
 * (reset). Known flows go on. Omitted: every service is served.
 *
 * @example
 * ```ts
 * import { redirectConfig } from "./redirect_config.ts";
 * const c = redirectConfig([
 *   { name: "default/web", addresses: ["10.0.100.10"], ports: ["80/TCP"], selector: { app: "web" } },
 * ], "10.9.1.2", ["10.9.1.2", "10.9.2.2"]);
 * const svc = c.datapath.services[0]!;
 * if (svc.frontends[0]!.address !== "10.0.100.10:80/TCP") throw new Error();
 * if (svc.backends.map((b) => b.address).join() !== "10.9.1.2:80/TCP") throw new Error();
 * if (c.trust.services[0]!.backends.length !== 2) throw new Error();
 * ```
 */
export function redirectConfig(
  services: readonly AnycastService[],
  self: string,
  owners: readonly string[],
  serving?: ReadonlySet<string>,
): RedirectConfig {
  const { list, skipped } = entries(services);
  const everyOwner = [...new Set([self, ...owners])].sort();
  return {
    datapath: {
      // A service's IPv6 frontends are a datapath service of their own (`NAME.ipv6`; a dot is
      // never in a Service's name): a dual-stack service would pair them with IPv6 backends only
      // (node/lb/tables/select.ts), and this node's address is IPv4.
      services: list.flatMap((e) => {
        const backends = backendsOf([self], e.ports);
        const draining = serving !== undefined && !serving.has(e.source);
        const v6 = e.frontends.filter((f) => f.address.startsWith("["));
        const v4 = e.frontends.filter((f) => !f.address.startsWith("["));
        const of = (name: string, frontends: Entry["frontends"]) =>
          frontends.length === 0 ? [] : [{
            name,
            flowKeyMode: "five-tuple" as const,
            ...(draining ? { draining } : {}),
            frontends,
            backends,
          }];
        return [...of(e.name, v4), ...of(`${e.name}.ipv6`, v6)];
      }),
    },
    trust: {
      services: list.map((e) => ({
        name: e.name,
        frontends: e.frontends,
        backends: backendsOf(everyOwner, e.ports),
      })),
    },
    vips: [...new Set(list.flatMap((e) => e.addresses))].sort(),
    skipped,
  };
}
