/**
 * IPAM benchmark: one `AddressAllocator.reconcile` over N Services × P AddressPools, as the
 * controller runs it after every change (level-triggered: every call sees everything).
 *
 * Pools are /20s; half select Services by a label (matchLabels + a NotIn expression), the rest
 * take every Service. One Service in ten has a sharing key, one in fifty requests an address.
 * Three passes are timed:
 * - cold: a new allocator, no Service has an address yet (every one is allocated);
 * - steady: the same input again (nothing changes: the common case);
 * - restart: a new allocator, every Service's status shows its address (restored, not reallocated).
 *
 * Run: `deno task bench:ipam` (`--services=N` 10000, `--pools=P` 10, `--quick`: 1,000 Services;
 * `--dual-stack`: every pool also holds an IPv6 /64 and every Service is PreferDualStack, so each
 * gets two addresses).
 * Goal: 10,000 × 10 well under a second. The last line of output is one JSON object.
 *
 * @module
 */

import { AddressAllocator } from "../controller/ipam/allocator.ts";
import { pool, service, withStatus } from "../controller/ipam/_testing.ts";
import type { K8sAddressPool } from "../controller/ipam/pool.ts";
import type { IpamService } from "../controller/ipam/service.ts";
import { intOption, readCommandLineOrExit } from "../lib/args.ts";

const OPTIONS = {
  command: "bench:ipam",
  usage: `usage: deno task bench:ipam [--services=N] [--pools=P] [--dual-stack] [--quick]
  --dual-stack: pools hold an IPv6 /64 too; Services are PreferDualStack (two addresses each)
  --quick: 1,000 services (a smoke test, not a figure)`,
  options: {
    services: { type: "string" },
    pools: { type: "string" },
    quick: { type: "boolean" },
    "dual-stack": { type: "boolean" },
  },
} as const;

function pools(p: number, dual: boolean): K8sAddressPool[] {
  const out: K8sAddressPool[] = [];
  for (let i = 0; i < p; i++) {
    const selected = i % 2 === 0;
    const blocks = [`10.${i}.0.0/20`, ...(dual ? [`2001:db8:${i.toString(16)}::/64`] : [])];
    out.push(pool(`pool-${String(i).padStart(2, "0")}`, blocks, {
      avoidBuggyIPs: i % 3 === 0,
      serviceSelector: selected
        ? {
          matchLabels: { team: `team-${i % 5}` },
          matchExpressions: [{ key: "tier", operator: "NotIn", values: ["test"] }],
        }
        : undefined,
    }));
  }
  return out;
}

function services(n: number, p: number, dual: boolean): IpamService[] {
  const out: IpamService[] = [];
  for (let i = 0; i < n; i++) {
    const annotations: Record<string, string> = {};
    // Sharing groups of three Services on ports 80, 81 and 82 in one namespace.
    if (i % 10 === 0) annotations["holdfast.io/allow-shared-ip"] = `share-${Math.floor(i / 30)}`;
    // Requests land in a pool that takes every Service, high up where dynamic allocation is not.
    else if (i % 50 === 1) {
      annotations["holdfast.io/load-balancer-ips"] = `10.${(i % p) | 1}.15.${
        1 + Math.floor(i / 50) % 250
      }`;
    }
    out.push(service(`svc-${i}`, {
      namespace: `ns-${Math.floor(i / 30) % 7}`,
      labels: { team: `team-${i % 5}`, app: `app-${i}` },
      annotations,
      ports: [`${80 + (i % 3)}/TCP`],
      created: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
      ...(dual ? { ipFamilies: ["IPv4", "IPv6"], ipFamilyPolicy: "PreferDualStack" } : {}),
    }));
  }
  return out;
}

function time<T>(f: () => T): [T, number] {
  const t0 = performance.now();
  const r = f();
  return [r, performance.now() - t0];
}

function main(): void {
  const opts = readCommandLineOrExit(Deno.args, OPTIONS, ({ values }) => {
    const quick = values.quick === true;
    return {
      services: intOption(values, "services", { default: quick ? 1_000 : 10_000, min: 1 }),
      pools: intOption(values, "pools", { default: 10, min: 1, max: 200 }),
      dual: values["dual-stack"] === true,
    };
  });
  const n = opts.services, p = opts.pools;
  const poolObjects = pools(p, opts.dual), svcs = services(n, Math.max(p, 2), opts.dual);
  // Warm up the JIT on a small input so the cold figure is the allocator, not compilation.
  new AddressAllocator().reconcile(poolObjects, svcs.slice(0, 200));

  const ipam = new AddressAllocator();
  const [cold, coldMs] = time(() => ipam.reconcile(poolObjects, svcs));
  const [steady, steadyMs] = time(() => ipam.reconcile(poolObjects, svcs));
  const withAddresses = withStatus(svcs, cold);
  const [restart, restartMs] = time(() =>
    new AddressAllocator().reconcile(poolObjects, withAddresses)
  );

  const allocated = cold.services.filter((s) => s.addresses.length > 0).length;
  const addresses = cold.services.reduce((sum, s) => sum + s.addresses.length, 0);
  if (steady.events.length !== 0) {
    throw new Error(`steady pass emitted ${steady.events.length} events`);
  }
  if (restart.events.length !== 0) {
    throw new Error(`restart pass emitted ${restart.events.length} events`);
  }
  const out = {
    services: n,
    pools: p,
    dual_stack: opts.dual,
    addresses,
    allocated,
    failed: n - allocated,
    cold_ms: Number(coldMs.toFixed(1)),
    steady_ms: Number(steadyMs.toFixed(1)),
    restart_ms: Number(restartMs.toFixed(1)),
    services_per_s: Math.round(n / (coldMs / 1000)),
    steady_services_per_s: Math.round(n / (steadyMs / 1000)),
    restart_services_per_s: Math.round(n / (restartMs / 1000)),
  };
  console.log(`${n} Services × ${p} pools: ${allocated} allocated, ${n - allocated} failed`);
  console.log(
    `reconcile: cold ${out.cold_ms} ms (${out.services_per_s} services/s), steady ${out.steady_ms} ms, ` +
      `restart from status ${out.restart_ms} ms (goal: well under 1000 ms at 10,000 × 10)`,
  );
  console.log(JSON.stringify(out));
}

if (import.meta.main) main();
