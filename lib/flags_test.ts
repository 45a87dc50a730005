import { deepStrictEqual, ok, throws } from "node:assert/strict";
import { defineCommand, parseHostPort } from "./flags.ts";
import { OPS_PORT_ALIAS, readListen, readRedis } from "./flag_groups.ts";
import { applyTable, parseCommandLine, readCommandLine, UsageError } from "./args.ts";
import { captureLogs } from "./log.ts";

const spec = defineCommand({
  command: "demo-cmd",
  synopsis: "demo-cmd --node-name NAME [OPTIONS]",
  about: "A command for the test.",
  flags: {
    port: { arg: "N", help: "a port", default: "6080" },
    vip: { arg: "IP", multiple: true, help: "LB IPs", aliases: ["lb-ip"] },
    quiet: { type: "boolean", help: "say less" },
    "node-name": { arg: "NAME", help: "this node", required: true, aliases: ["node"] },
    listen: { arg: "HOST:PORT", help: "ops", default: "none", aliases: [OPS_PORT_ALIAS] },
    "bgp-dir": { arg: "DIR", help: "bird", defaultText: "/run/x", group: "BGP" },
  },
});

Deno.test("flags: options, defaults and aliases come from the one table", () => {
  deepStrictEqual(Object.keys(spec.options).sort(), [
    "bgp-dir",
    "lb-ip",
    "listen",
    "node",
    "node-name",
    "ops-port",
    "port",
    "quiet",
    "vip",
  ]);
  deepStrictEqual(spec.options.vip, { type: "string", multiple: true });
  deepStrictEqual(spec.options["lb-ip"], { type: "string", multiple: true });
  deepStrictEqual(spec.defaults, { port: "6080", listen: "none" });
  const { values } = parseCommandLine(["--node-name", "n1"], spec);
  deepStrictEqual(values, { "node-name": "n1", port: "6080", listen: "none" });
  // A given value wins over the default.
  deepStrictEqual(parseCommandLine(["--port", "1"], spec).values.port, "1");
});

Deno.test("flags: an old name reads as the new one and is logged once, as JSON fields", () => {
  using logs = captureLogs();
  const a = parseCommandLine(["--node", "n1", "--lb-ip", "10.0.0.1", "--lb-ip", "10.0.0.2"], spec);
  deepStrictEqual(a.values["node-name"], "n1");
  deepStrictEqual(a.values.vip, ["10.0.0.1", "10.0.0.2"]);
  ok(!("node" in a.values) && !("lb-ip" in a.values));
  parseCommandLine(["--node", "n2"], spec); // the same alias again: no second line
  const warned = logs.records.filter((r) => r.level === "warn");
  deepStrictEqual(
    warned.map((r) => [r.command, r.option, r.use]),
    [["demo-cmd", "--lb-ip", "--vip"], ["demo-cmd", "--node", "--node-name"]],
  );
  ok(warned.every((r) => /deprecated option/.test(r.msg)));
});

Deno.test("flags: an alias with a value mapping (--ops-port N is --listen 127.0.0.1:N)", () => {
  const read = (args: string[]) => readListen(parseCommandLine(args, spec).values);
  deepStrictEqual(read(["--ops-port", "9471"]), { hostname: "127.0.0.1", port: 9471 });
  deepStrictEqual(read(["--ops-port", "0"]), null);
  deepStrictEqual(read([]), null);
  deepStrictEqual(read(["--listen", "0.0.0.0:9470"]), { hostname: "0.0.0.0", port: 9470 });
  throws(
    () => read(["--ops-port", "x"]),
    /Cannot parse demo-cmd arguments: Cannot use --ops-port "x"/,
  );
  throws(() => read(["--listen", "9470"]), /--listen "9470": expected HOST:PORT or none/);
});

Deno.test("flags: the old and the new name together are a usage error naming both", () => {
  throws(
    () => parseCommandLine(["--node", "a", "--node-name", "b"], spec),
    (e: unknown) =>
      e instanceof UsageError && /--node with --node-name: it is its old name/.test(e.message),
  );
});

Deno.test("flags: applyTable is idempotent (readers may apply it to parsed values again)", () => {
  const once = applyTable({ node: "n1" }, spec);
  deepStrictEqual(applyTable(once, spec), once);
  deepStrictEqual(once, { "node-name": "n1", port: "6080", listen: "none" });
});

Deno.test("flags: the usage lists every option and alias, defaults, required, groups", () => {
  const u = spec.usage;
  ok(u.startsWith("usage: demo-cmd --node-name NAME [OPTIONS]\n\nA command for the test.\n"), u);
  for (const name of Object.keys(spec.options)) ok(u.includes(`--${name}`), name);
  ok(/--port N +a port \(default 6080\)/.test(u), u);
  ok(/--node-name NAME +this node \(required\)/.test(u), u);
  ok(/\nBGP:\n {2}--bgp-dir DIR +bird \(default \/run\/x\)/.test(u), u);
  ok(u.includes("--lb-ip (now --vip), --node (now --node-name), --ops-port N (now --listen)"), u);
  const out: string[] = [];
  const log = console.log;
  console.log = (s: unknown) => void out.push(String(s));
  try {
    deepStrictEqual(readCommandLine(["--help"], spec, () => 1), { exit: 0 });
  } finally {
    console.log = log;
  }
  deepStrictEqual(out, [u]);
});

Deno.test("flags: an alias that is also an option is a programming error", () => {
  throws(
    () =>
      defineCommand({
        command: "x",
        synopsis: "x",
        flags: { a: { help: "a", aliases: ["b"] }, b: { help: "b" } },
      }),
    /alias --b is an option too/,
  );
});

Deno.test("flags: HOST:PORT is read in one place", () => {
  deepStrictEqual(parseHostPort("10.0.0.1:80", "peer"), { hostname: "10.0.0.1", port: 80 });
  deepStrictEqual(parseHostPort("[::1]:9470", "listen"), { hostname: "[::1]", port: 9470 });
  for (const bad of ["10.0.0.1", "10.0.0.1:65536", ":80", "h:123456"]) {
    throws(() => parseHostPort(bad, "peer"), {
      message: `Cannot use --peer "${bad}": expected HOST:PORT`,
    });
  }
});

Deno.test("flags: the Redis group reads URL, user, password file or env, TLS", () => {
  const values = {
    redis: "redis://10.0.0.1:6379",
    "redis-user": "hf",
    "redis-password-file": "/pw",
    "redis-ca": "/ca.pem",
  };
  deepStrictEqual(readRedis(values, { readFile: (p) => `${p}-text\n` }), {
    url: "redis://10.0.0.1:6379",
    username: "hf",
    password: "/pw-text",
    tls: { ca: "/ca.pem-text\n" },
  });
  deepStrictEqual(readRedis({ redis: "redis://r:1" }, { password: "env" }), {
    url: "redis://r:1",
    password: "env",
  });
  deepStrictEqual(readRedis({ "redis-tls": true, redis: "redis://r:1" }), {
    url: "redis://r:1",
    tls: {},
  });
  deepStrictEqual(readRedis({}), undefined);
  deepStrictEqual(readRedis({}, { default: "redis://127.0.0.1:6379" }), {
    url: "redis://127.0.0.1:6379",
  });
  throws(() => readRedis({}, { required: true }), /Missing required option "--redis"/);
  throws(() => readRedis({ redis: "10.0.0.1:6379" }), /Cannot use --redis "10.0.0.1:6379"/);
  throws(
    () =>
      readRedis({ redis: "redis://r:1", "redis-password-file": "/nope" }, {
        readFile: () => {
          throw new Error("no such file");
        },
      }),
    /Cannot read --redis-password-file "\/nope": no such file/,
  );
});
