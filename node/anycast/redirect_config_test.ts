import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { parseConfig } from "../lb/sources/file_source.ts";
import { parseIpv4 } from "../../lib/ipv4.ts";
import { ServingBackends } from "../lb/flows/frontends.ts";
import { parseServicePort, redirectConfig } from "./redirect_config.ts";
import { main } from "./main.ts";

const WEB = {
  name: "default/web",
  addresses: ["10.0.100.10"],
  ports: ["80/TCP", "53/udp"],
  selector: { app: "web" },
};

Deno.test("redirect config: this node is every frontend's only backend; the file source takes it", () => {
  const c = redirectConfig([WEB], "10.9.1.2", ["10.9.2.2", "10.9.1.2"]);
  const cfg = parseConfig(JSON.stringify(c.datapath), { format: "json" });
  strictEqual(cfg.services.length, 1);
  deepStrictEqual(cfg.services[0]!.frontends.map((f) => f.address), [
    "10.0.100.10:80/TCP",
    "10.0.100.10:53/UDP",
  ]);
  deepStrictEqual(cfg.services[0]!.backends.map((b) => b.address), [
    "10.9.1.2:80/TCP",
    "10.9.1.2:53/UDP",
  ]);
  deepStrictEqual(c.vips, ["10.0.100.10"]);
  deepStrictEqual(c.skipped, []);
});

Deno.test("redirect config: a service no local pod serves is draining, the file source takes it", () => {
  const API = { ...WEB, name: "api", addresses: ["10.0.100.11", "2001:db8:ac::11"] };
  const c = redirectConfig([WEB, API], "10.9.1.2", ["10.9.2.2"], new Set(["default/web"]));
  deepStrictEqual(
    c.datapath.services.map((s) => [s.name, s.draining ?? false]),
    [["default/web", false], ["default/api", true], ["default/api.ipv6", true]],
  );
  const cfg = parseConfig(JSON.stringify(c.datapath), { format: "json" });
  deepStrictEqual(cfg.services.map((s) => s.draining ?? false), [false, true, true]);
  // Without `serving` (every service served) no service drains.
  const all = redirectConfig([WEB, API], "10.9.1.2", ["10.9.2.2"]);
  strictEqual(all.datapath.services.some((s) => s.draining), false);
  throws(
    () => parseConfig(JSON.stringify({ services: [{ name: "a/b", draining: "yes" }] })),
    /\$\.services\[0\]\.draining.*"yes" is not true or false/,
  );
});

Deno.test("redirect trust view: flows owned by any anycast node are accepted, others refused", () => {
  const c = redirectConfig([WEB], "10.9.1.2", ["10.9.2.2", "10.9.3.2"]);
  const serving = new ServingBackends(c.trust);
  const key = {
    saddr: parseIpv4("10.8.0.2"),
    daddr: parseIpv4("10.0.100.10"),
    sport: 40000,
    dport: 80,
    proto: 6,
  };
  for (const owner of ["10.9.1.2", "10.9.2.2", "10.9.3.2"]) {
    strictEqual(serving.check(key, parseIpv4(owner)), null, owner);
  }
  strictEqual(serving.check(key, parseIpv4("10.9.9.9")), "backend_not_serving");
  strictEqual(serving.check({ ...key, dport: 81 }, parseIpv4("10.9.2.2")), "unknown_frontend");
});

Deno.test("redirect config: services without ports, and SCTP ports, are named and left out", () => {
  const c = redirectConfig(
    [
      { name: "default/noports", addresses: ["10.0.100.11"], selector: { app: "a" } },
      { ...WEB, ports: ["80/TCP", "9/SCTP"] },
    ],
    "10.9.1.2",
    [],
  );
  deepStrictEqual(c.skipped, ["default/noports", "default/web port 9/SCTP"]);
  deepStrictEqual(c.datapath.services.map((s) => s.name), ["default/web"]);
  deepStrictEqual(c.datapath.services[0]!.frontends.map((f) => f.address), [
    "10.0.100.10:80/TCP",
  ]);
});

Deno.test("service ports: PORT, PORT/TCP, PORT/UDP; others refused with the value quoted", () => {
  deepStrictEqual(parseServicePort("8080"), { port: 8080, protocol: "TCP" });
  deepStrictEqual(parseServicePort("53/UDP"), { port: 53, protocol: "UDP" });
  throws(() => parseServicePort("0/TCP"), /"0\/TCP"/);
  throws(() => parseServicePort("http"), /"http"/);
});

Deno.test("main.ts anycast: redirect flags are checked before anything starts", async () => {
  const errors: string[] = [];
  const orig = console.error;
  console.error = (...a: unknown[]) => errors.push(a.join(" "));
  try {
    strictEqual(await main(["--node", "n1", "--state", "s.yaml", "--redis", "redis://x:1"]), 2);
    strictEqual(
      await main(["--node", "n1", "--state", "s.yaml", "--redirect", "--attach", "eth0"]),
      2,
    );
    strictEqual(
      await main([
        "--node",
        "n1",
        "--state",
        "s.yaml",
        "--redirect",
        "--redis",
        "redis://10.8.0.1:6379",
        "--attach",
        "eth0",
        "--src-addr",
        "10.9.1.2",
        "--owners",
        "10.9.2.x",
      ]),
      2,
    );
    const args = ["--node", "n1", "--state", "s.yaml", "--liveness-ttl-ms", "500"];
    strictEqual(await main(args), 2, "--liveness-ttl-ms goes with --redirect");
    strictEqual(
      await main([
        ...args,
        "--redirect",
        "--redis",
        "redis://10.8.0.1:6379",
        "--attach",
        "eth0",
        "--src-addr",
        "10.9.1.2",
        "--owners",
        "10.9.2.2",
      ]),
      2,
      "a liveness TTL under 2 s is refused",
    );
    if (!errors.some((e) => e.includes("liveness-ttl-ms"))) {
      throw new Error(`no error names --liveness-ttl-ms: ${JSON.stringify(errors)}`);
    }
  } finally {
    console.error = orig;
  }
  strictEqual(errors.length, 5, errors.join("\n"));
  strictEqual(errors[0]!.includes("--redis goes with --redirect"), true, errors[0]);
  strictEqual(errors[1]!.includes("redis"), true, errors[1]);
  strictEqual(errors[2]!.includes('"10.9.2.x"'), true, errors[2]);
});

Deno.test("redirect config: IPv6 addresses are frontends too (RFC 5952), this node's IPv4 address their backend", () => {
  const dual = { ...WEB, ports: ["80/TCP"], addresses: ["10.0.100.10", "2001:DB8:AC:0::10"] };
  const c = redirectConfig([dual], "10.9.1.2", ["10.9.2.2"]);
  const cfg = parseConfig(JSON.stringify(c.datapath), { format: "json" });
  // The IPv6 frontends are a service of their own: a dual-stack one pairs them with IPv6 backends.
  deepStrictEqual(cfg.services.map((s) => s.name), ["default/web", "default/web.ipv6"]);
  deepStrictEqual(cfg.services.map((s) => s.frontends.map((f) => f.address)), [
    ["10.0.100.10:80/TCP"],
    ["[2001:db8:ac::10]:80/TCP"],
  ]);
  for (const s of cfg.services) {
    deepStrictEqual(s.backends.map((b) => b.address), ["10.9.1.2:80/TCP"]);
  }
  deepStrictEqual(c.vips, ["10.0.100.10", "2001:db8:ac::10"]);
  deepStrictEqual(c.skipped, []);
  const serving = new ServingBackends(c.trust);
  const key6 = {
    saddr: "2001:db8:8::2",
    daddr: "2001:db8:ac::10",
    sport: 40000,
    dport: 80,
    proto: 6,
  };
  strictEqual(serving.check(key6, parseIpv4("10.9.2.2")), null);
  strictEqual(serving.check(key6, parseIpv4("10.9.9.9")), "backend_not_serving");
});

Deno.test("redirect config: an address that is neither family is named; the service's others stay", () => {
  const c = redirectConfig([{ ...WEB, addresses: ["10.0.100.10", "web.example"] }], "10.9.1.2", []);
  deepStrictEqual(c.skipped, ["default/web address web.example"]);
  deepStrictEqual(c.vips, ["10.0.100.10"]);
});
