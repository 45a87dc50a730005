/**
 * Cluster IPs and node ports as the real API server allocates them: one owner per node port
 * (30000-32767) and per cluster IP (10.96.0.0/16, fd00:10:96::/112) across every Service. The
 * allocator follows the store (every Service written or removed, by any path, namespace
 * deletion included), so what a deleted Service, or one whose type change dropped its node
 * ports, held is free again. Automatic values are the lowest free ones after the last handed
 * out (the real server picks at random); explicit values held by another Service or out of range
 * are refused with the real server's wording (`spec.ports[0].nodePort: Invalid value: 30080:
 * provided port is already allocated`).
 *
 * @module
 */
import { isObj, type Obj } from "./resources.ts";
import type { Store, StoreEvent } from "./store.ts";
import type { StatusCause } from "./status.ts";
import { invalidCause } from "./meta_validation.ts";
import { ApiError, invalid } from "./status.ts";

/** The node port range (`--service-node-port-range`). */
export const NODE_PORT_MIN = 30000, NODE_PORT_MAX = 32767;
const RANGE4 = "10.96.0.0/16", RANGE6 = "fd00:10:96::/112";
const SERVICES = "/services";

function keyOf(obj: Obj): string {
  const m = (obj.metadata ?? {}) as Obj;
  return `${m.namespace ?? ""}/${m.name}`;
}

function specOf(obj: Obj | undefined): Obj {
  return isObj(obj?.spec) ? obj.spec : {};
}

/** The node ports a Service holds (its ports' and its health-check node port). */
function heldPorts(obj: Obj | undefined): number[] {
  const spec = specOf(obj);
  const ports = (Array.isArray(spec.ports) ? spec.ports : []).filter(isObj)
    .map((p) => p.nodePort);
  return [...ports, spec.healthCheckNodePort].filter((n): n is number =>
    typeof n === "number" && n > 0
  );
}

/** The cluster IPs a Service holds. */
function heldIps(obj: Obj | undefined): string[] {
  const spec = specOf(obj);
  if (spec.type === "ExternalName") return [];
  const ips = Array.isArray(spec.clusterIPs)
    ? spec.clusterIPs
    : spec.clusterIP !== undefined
    ? [spec.clusterIP]
    : [];
  return ips.filter((ip): ip is string => typeof ip === "string" && ip !== "" && ip !== "None");
}

/** Whether `ip` is in the service CIDR of its family (the ranges above). */
function inRange(ip: string): boolean {
  if (ip.includes(":")) {
    const m = /^fd00:10:96::([0-9a-f]{1,4})$/i.exec(ip);
    return m !== null;
  }
  return /^10\.96\.\d{1,3}\.\d{1,3}$/.test(ip);
}

/** Allocates and tracks cluster IPs and node ports of every Service in a store. */
export class ServiceAllocator {
  readonly #ports = new Map<number, string>();
  readonly #ips = new Map<string, string>();
  #nextPort = NODE_PORT_MIN;
  #nextIp = 1;
  #nextIp6 = 1;
  readonly #unsubscribe: () => void;

  constructor(store: Store) {
    for (const s of store.list(SERVICES)) this.#claim(s);
    this.#unsubscribe = store.subscribe((e) => this.#follow(e));
  }

  /** Stops following the store. */
  close(): void {
    this.#unsubscribe();
  }

  #follow(e: StoreEvent): void {
    if (e.resource !== SERVICES) return;
    if (e.previous) this.#release(e.previous);
    if (e.type !== "DELETED") this.#claim(e.object);
  }

  #claim(obj: Obj): void {
    const key = keyOf(obj);
    for (const p of heldPorts(obj)) this.#ports.set(p, key);
    for (const ip of heldIps(obj)) this.#ips.set(ip, key);
  }

  #release(obj: Obj): void {
    const key = keyOf(obj);
    for (const p of heldPorts(obj)) if (this.#ports.get(p) === key) this.#ports.delete(p);
    for (const ip of heldIps(obj)) if (this.#ips.get(ip) === key) this.#ips.delete(ip);
  }

  /** The next free node port, skipping `reserved` (explicit ports of the same request). */
  nodePort(reserved: ReadonlySet<number>): number {
    const size = NODE_PORT_MAX - NODE_PORT_MIN + 1;
    for (let i = 0; i < size; i++) {
      const p = this.#nextPort;
      this.#nextPort = p === NODE_PORT_MAX ? NODE_PORT_MIN : p + 1;
      if (!this.#ports.has(p) && !reserved.has(p)) return p;
    }
    throw new ApiError(
      500,
      "InternalError",
      "Internal error occurred: failed to allocate a nodePort: range is full",
    );
  }

  /** The next free cluster IP of `family` (IPv4: 10.96.0.0/16, IPv6: fd00:10:96::/112). */
  clusterIp(family: string = "IPv4"): string {
    for (let i = 0; i < 0xffff; i++) {
      let ip: string;
      if (family === "IPv6") {
        ip = `fd00:10:96::${this.#nextIp6.toString(16)}`;
        this.#nextIp6 = this.#nextIp6 >= 0xfffe ? 1 : this.#nextIp6 + 1;
      } else {
        const n = this.#nextIp;
        ip = `10.96.${(n >> 8) & 255}.${n & 255}`;
        this.#nextIp = n >= 0xfffe ? 1 : n + 1;
      }
      if (!this.#ips.has(ip)) return ip;
    }
    throw new ApiError(
      500,
      "InternalError",
      `Internal error occurred: failed to allocate a serviceIP: range is full`,
    );
  }

  /**
   * What the real server's allocator refuses in `svc` (being written): node ports out of
   * 30000-32767 or held by another Service, cluster IPs out of the service range or held by
   * another Service.
   */
  check(svc: Obj): StatusCause[] {
    const key = keyOf(svc), spec = specOf(svc);
    const out: StatusCause[] = [];
    const ports = (Array.isArray(spec.ports) ? spec.ports : []) as unknown[];
    ports.forEach((p, i) => {
      const n = isObj(p) ? p.nodePort : undefined;
      if (typeof n !== "number" || n === 0) return;
      const at = `spec.ports[${i}].nodePort`;
      if (n < NODE_PORT_MIN || n > NODE_PORT_MAX) {
        out.push(invalidCause(
          at,
          n,
          `provided port is not in the valid range. The range of valid ports is ${NODE_PORT_MIN}-${NODE_PORT_MAX}`,
        ));
      } else if ((this.#ports.get(n) ?? key) !== key) {
        out.push(invalidCause(at, n, "provided port is already allocated"));
      }
    });
    const hc = spec.healthCheckNodePort;
    if (typeof hc === "number" && hc !== 0) {
      const why = hc < NODE_PORT_MIN || hc > NODE_PORT_MAX
        ? `provided port is not in the valid range. The range of valid ports is ${NODE_PORT_MIN}-${NODE_PORT_MAX}`
        : (this.#ports.get(hc) ?? key) !== key
        ? "provided port is already allocated"
        : undefined;
      // The real server reports this one as an internal error, not as Invalid.
      if (why) {
        throw new ApiError(
          500,
          "InternalError",
          `Internal error occurred: failed to allocate requested HealthCheck NodePort ${hc}: ${why}`,
        );
      }
    }
    const ips = heldIps(svc);
    for (const ip of ips) {
      let why: string | undefined;
      if (!inRange(ip)) {
        why = `the provided IP (${ip}) is not in the valid range. The range of valid IPs is ${
          ip.includes(":") ? RANGE6 : RANGE4
        }`;
      } else if ((this.#ips.get(ip) ?? key) !== key) why = "provided IP is already allocated";
      if (why) {
        out.push(invalidCause("spec.clusterIPs", ips, `failed to allocate IP ${ip}: ${why}`));
      }
    }
    return out;
  }

  /** Throws the real server's 422 when {@linkcode check} finds anything in `svc`. */
  assertFree(svc: Obj): void {
    const causes = this.check(svc);
    if (causes.length === 0) return;
    const name = String((svc.metadata as Obj | undefined)?.name ?? "");
    throw invalid("Service", { plural: "services", group: "", name }, causes);
  }
}
