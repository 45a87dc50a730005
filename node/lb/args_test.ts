import {
  AGENT_COMMAND,
  globalIpv6Of,
  interfaceHolding,
  parseAgentArgs,
  readAgentArgs,
} from "./args.ts";
import { readCommandLine } from "../../lib/args.ts";
import { deepStrictEqual, throws } from "node:assert/strict";

Deno.test("agent arguments: required, lists, defaults, secrets from a file", () => {
  const a = parseAgentArgs([
    "--config",
    "/etc/holdfast/services.yaml",
    "--redis",
    "redis://127.0.0.1:6379",
    "--vip",
    "10.0.100.1,10.0.100.2",
    "--vip=10.0.100.3",
    "--node-name",
    "lb-a",
    "--redis-user",
    "holdfast",
    "--redis-password-file",
    "/secret",
    "--datapath",
    "memory",
    "--idle-timeout-ms",
    "1000",
  ], { readFile: () => "s3cret\n" });
  deepStrictEqual(a.vips, ["10.0.100.1", "10.0.100.2", "10.0.100.3"]);
  deepStrictEqual(a.redis, {
    url: "redis://127.0.0.1:6379",
    username: "holdfast",
    password: "s3cret",
  });
  deepStrictEqual([a.nodeName, a.datapath, a.idleTimeoutMs], ["lb-a", "memory", 1000]);
  deepStrictEqual(a.listen, { hostname: "127.0.0.1", port: 9470 });
  deepStrictEqual([a.config, a.flowSync, a.configPollMs], [
    "/etc/holdfast/services.yaml",
    true,
    200,
  ]);
  deepStrictEqual(a.fullReconcileIntervalMs, 30_000);
});

Deno.test("agent arguments: --full-reconcile-interval-ms sets how often the maps are repaired", () => {
  const base = ["--config", "s.yaml", "--node-name", "lb1", "--no-flow-sync"];
  deepStrictEqual(
    parseAgentArgs([...base, "--full-reconcile-interval-ms", "5000"]).fullReconcileIntervalMs,
    5000,
  );
  deepStrictEqual(
    parseAgentArgs([...base, "--full-reconcile-interval-ms", "0"]).fullReconcileIntervalMs,
    0,
  );
});

Deno.test("agent arguments: --learn-window-ms sets the longest burst wait, 0 to 10000", () => {
  const base = ["--config", "s.yaml", "--node-name", "lb1", "--no-flow-sync"];
  deepStrictEqual(parseAgentArgs(base).learnWindowMs, undefined);
  deepStrictEqual(parseAgentArgs([...base, "--learn-window-ms", "200"]).learnWindowMs, 200);
  deepStrictEqual(parseAgentArgs([...base, "--learn-window-ms", "0"]).learnWindowMs, 0);
  throws(() => parseAgentArgs([...base, "--learn-window-ms", "20000"]), /--learn-window-ms/);
  throws(() => parseAgentArgs([...base, "--learn-window-ms", "soon"]), /--learn-window-ms/);
});

Deno.test("agent arguments: --no-flow-sync needs no Redis; --vip is optional", () => {
  const a = parseAgentArgs(["--config", "s.yaml", "--node-name", "lb1", "--no-flow-sync"]);
  deepStrictEqual([a.flowSync, a.vips], [false, []]);
});

Deno.test("agent arguments: --model redis instead of --config; it needs --redis even without flow sync", () => {
  const a = parseAgentArgs(
    ["--model", "redis", "--node-name", "lb1", "--no-flow-sync", "--redis", "rediss://r:6380"],
    { password: "pw" },
  );
  deepStrictEqual([a.model, "config" in a, a.flowSync], ["redis", false, false]);
  deepStrictEqual(a.redis, { url: "rediss://r:6380", password: "pw" });
  const cases: [string[], string][] = [
    [
      ["--model", "redis", "--node-name", "a", "--no-flow-sync"],
      'Missing required option "--redis"',
    ],
    [["--model", "k8s", "--node-name", "a", "--no-flow-sync"], '--model "k8s": expected redis'],
    [
      ["--model", "redis", "--config", "s.yaml", "--node-name", "a", "--redis", "redis://h:1"],
      'Cannot use --config "s.yaml" with --model redis: choose one',
    ],
    [["--node-name", "a", "--no-flow-sync"], '"--config" FILE or "--model redis"'],
  ];
  for (const [args, want] of cases) {
    let msg = "";
    try {
      parseAgentArgs(args);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.includes(want)) throw new Error(`${JSON.stringify(args)}: "${msg}" lacks ${want}`);
  }
});

Deno.test("agent arguments: errors name the argument", () => {
  const base = ["--config", "s.yaml", "--node-name", "a"];
  const cases: [string[], string][] = [
    [["--vip", "10.0.100.1", ...base], 'Missing required option "--redis"'],
    [["--redis", "redis://h:1", "--node-name", "a"], 'Missing required option "--config"'],
    [["--redis", "redis://h:1", "--vip", "10.0.100", ...base], '--vip "10.0.100"'],
    [["--redis", "http://h", ...base], "redis:// or rediss://"],
    [["--redis", "redis://h:1", ...base, "--bogus", "1"], 'Unknown option "--bogus"'],
    [["--no-flow-sync", ...base, "--listen", "9470"], '--listen "9470"'],
    [["--no-flow-sync", ...base, "--datapath", "dpdk"], '--datapath "dpdk"'],
    [["--no-flow-sync", ...base, "--max-services=-1"], '--max-services "-1"'],
    [["--no-flow-sync", ...base, "--max-backends", "-1"], '"--max-backends" argument is ambiguous'],
    [["--no-flow-sync", ...base, "--src-addr", "10.2.1"], '--src-addr "10.2.1"'],
    [["--no-flow-sync", ...base, "--node-address", "eth0"], '--node-address "eth0"'],
    [
      ["--no-flow-sync", ...base, "--redis-password-file", "/nonexistent-hf"],
      "--redis-password-file",
    ],
    [["--no-flow-sync", ...base, "stray"], '"stray"'],
  ];
  for (const [args, want] of cases) {
    let msg = "";
    try {
      parseAgentArgs(args);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.includes(want)) throw new Error(`${JSON.stringify(args)}: "${msg}" lacks ${want}`);
  }
});

Deno.test("agent arguments: datapath sizes, node settings, attach, last value wins", () => {
  const a = parseAgentArgs([
    "--config=s.yaml",
    "--node-name=lb1",
    "--no-flow-sync",
    "--max-services=64",
    "--max-backends",
    "1024",
    "--max-flows=4096",
    "--full-reconcile-interval-ms=0",
    "--attach",
    "eth0",
    "--netns",
    "hf-1-lb1",
    "--src-addr",
    "10.2.1.2",
    "--seed",
    "7",
    "--log-level",
    "debug",
    "--log-level",
    "warn",
    "--listen",
    "none",
  ]);
  deepStrictEqual(
    [a.maxServices, a.maxBackends, a.maxFlows, a.fullReconcileIntervalMs],
    [64, 1024, 4096, 0],
  );
  deepStrictEqual(a.attach, { ifname: "eth0", netns: "hf-1-lb1" });
  deepStrictEqual(a.configure, { srcAddr: "10.2.1.2", encapPort: 6080, seed: 7 });
  deepStrictEqual([a.logLevel, a.listen, a.datapath], ["warn", null, "bpf"]);
  // absent options are absent, not undefined (callers spread them over defaults)
  deepStrictEqual(["pinDir", "policy", "maglevSize"].filter((k) => k in a), []);
});

Deno.test("agent --node-address: the interface holding it, default --src-addr; --attach wins", () => {
  const base = ["--config=s.yaml", "--node-name=lb1", "--no-flow-sync"];
  const a = parseAgentArgs([...base, "--node-address", "10.2.1.2", "--netns", "hf-1-lb1"]);
  deepStrictEqual(a.attach, { address: "10.2.1.2", netns: "hf-1-lb1" });
  deepStrictEqual(a.configure, { srcAddr: "10.2.1.2", encapPort: 6080, seed: 0 });
  // --src-addr wins for the source address, --attach for the interface
  const b = parseAgentArgs([...base, "--node-address=10.2.1.2", "--src-addr=10.2.1.9"]);
  deepStrictEqual([b.attach, b.configure?.srcAddr], [{ address: "10.2.1.2" }, "10.2.1.9"]);
  const c = parseAgentArgs([...base, "--node-address=10.2.1.2", "--attach=eth1"]);
  deepStrictEqual([c.attach, c.configure?.srcAddr], [{ ifname: "eth1" }, "10.2.1.2"]);

  const ifaces = [
    { name: "lo", family: "IPv4", address: "127.0.0.1" },
    { name: "eth0", family: "IPv6", address: "fe80::1" },
    { name: "eth0", family: "IPv4", address: "10.2.1.2" },
  ] as Deno.NetworkInterfaceInfo[];
  deepStrictEqual(interfaceHolding("10.2.1.2", ifaces), "eth0");
  throws(() => interfaceHolding("10.2.1.7", ifaces, "hf-1-lb1"), {
    message: 'Cannot find the interface for --node-address "10.2.1.7" in netns "hf-1-lb1": ' +
      "no interface holds it; seen: lo (127.0.0.1), eth0 (fe80::1, 10.2.1.2)",
  });
});

Deno.test("agent --help prints the usage naming every option, exit 0", () => {
  const out: string[] = [];
  const log = console.log;
  console.log = (s: unknown) => void out.push(String(s));
  try {
    const r = readCommandLine(["--node-name", "x", "--help"], AGENT_COMMAND, readAgentArgs);
    deepStrictEqual(r, { exit: 0 });
  } finally {
    console.log = log;
  }
  for (const name of Object.keys(AGENT_COMMAND.options)) {
    if (!out.join("\n").includes(`--${name}`)) throw new Error(`usage lacks --${name}`);
  }
});

Deno.test("agent arguments: --health on by default, off on request, anything else named", () => {
  const base = ["--config", "s.yaml", "--no-flow-sync", "--node-name", "lb-a"];
  deepStrictEqual(parseAgentArgs(base).health, true);
  deepStrictEqual(parseAgentArgs([...base, "--health", "off"]).health, false);
  throws(() => parseAgentArgs([...base, "--health", "maybe"]), /--health "maybe"/);
});

Deno.test("agent --event-budget reaches the LB node settings; absent = the datapath's default", () => {
  const base = ["--config=s.yaml", "--node-name=lb1", "--no-flow-sync", "--src-addr=10.2.1.2"];
  deepStrictEqual(parseAgentArgs([...base, "--event-budget", "5000"]).configure, {
    srcAddr: "10.2.1.2",
    encapPort: 6080,
    seed: 0,
    eventBudget: 5000,
  });
  deepStrictEqual("eventBudget" in (parseAgentArgs(base).configure ?? {}), false);
  throws(() => parseAgentArgs([...base, "--event-budget", "0"]), /event-budget/);
});

Deno.test("agent --src-addr6: an address or auto; absent = hf_config6 untouched", () => {
  const base = ["--config=s.yaml", "--node-name=lb1", "--no-flow-sync"];
  deepStrictEqual("srcAddr6" in parseAgentArgs([...base, "--src-addr=10.2.1.2"]), false);
  const a = parseAgentArgs([...base, "--src-addr=10.2.1.2", "--src-addr6", "2001:db8:11::2"]);
  deepStrictEqual([a.srcAddr6, a.configure?.srcAddr], ["2001:db8:11::2", "10.2.1.2"]);
  const b = parseAgentArgs([...base, "--node-address=10.2.1.2", "--src-addr6=auto"]);
  deepStrictEqual([b.srcAddr6, b.attach], ["auto", { address: "10.2.1.2" }]);
  const cases: [string[], string][] = [
    [["--src-addr6=2001:db8::1"], "needs --src-addr or --node-address"],
    [["--src-addr=10.2.1.2", "--src-addr6=auto"], "give --attach or --node-address"],
    [["--src-addr=10.2.1.2", "--src-addr6=fe80::1"], "not a global unicast IPv6 address"],
    [["--src-addr=10.2.1.2", "--src-addr6=10.2.1.2"], 'Cannot use --src-addr6 "10.2.1.2"'],
  ];
  for (const [args, want] of cases) {
    throws(() => parseAgentArgs([...base, ...args]), (e: Error) => e.message.includes(want));
  }
});

Deno.test("agent --node-address IPV4,IPV6 (status.hostIPs): the IPv6 one is the --src-addr6", () => {
  const base = ["--config=s.yaml", "--node-name=lb1", "--no-flow-sync"];
  for (const list of ["10.2.1.2,2001:db8:11::2", "2001:db8:11::2,10.2.1.2"]) {
    const a = parseAgentArgs([...base, "--node-address", list]);
    deepStrictEqual([a.attach, a.configure?.srcAddr, a.srcAddr6], [
      { address: "10.2.1.2" },
      "10.2.1.2",
      "2001:db8:11::2",
    ]);
  }
  // --src-addr6 wins; one address stays IPv4 only
  const b = parseAgentArgs([...base, "--node-address=10.2.1.2,2001:db8:11::2", "--src-addr6=auto"]);
  deepStrictEqual(b.srcAddr6, "auto");
  deepStrictEqual("srcAddr6" in parseAgentArgs([...base, "--node-address=10.2.1.2"]), false);
  const cases: [string, string][] = [
    ["2001:db8:11::2", 'Cannot use --node-address "2001:db8:11::2"'],
    ["10.2.1.2,2001:db8:11::2,2001:db8:11::3", "one IPv4 and one IPv6 at most"],
    ["10.2.1.2,fe80::1", "not a global unicast IPv6 address"],
  ];
  for (const [list, want] of cases) {
    throws(
      () => parseAgentArgs([...base, "--node-address", list]),
      (e: Error) => e.message.includes(want),
    );
  }
});

Deno.test("agent --src-addr6 auto: the attach interface's one global IPv6 address", () => {
  const ifaces = [
    { name: "eth0", family: "IPv4", address: "10.2.1.2" },
    { name: "eth0", family: "IPv6", address: "fe80::1" },
    { name: "eth0", family: "IPv6", address: "2001:db8:11::2" },
    { name: "eth1", family: "IPv6", address: "2001:db8:12::2" },
    { name: "eth1", family: "IPv6", address: "fd00::2" },
  ] as Deno.NetworkInterfaceInfo[];
  deepStrictEqual(globalIpv6Of("eth0", ifaces), "2001:db8:11::2");
  throws(() => globalIpv6Of("eth1", ifaces, "hf-1-lb1"), {
    message: 'Cannot pick --src-addr6 auto on "eth1" in netns "hf-1-lb1": it has 2 global IPv6 ' +
      "addresses (2001:db8:12::2, fd00::2); name one",
  });
  throws(
    () =>
      globalIpv6Of("eth2", [
        ...ifaces,
        { name: "eth2", family: "IPv6", address: "fe80::2" } as Deno.NetworkInterfaceInfo,
      ]),
    {
      message:
        'Cannot pick --src-addr6 auto on "eth2": it has no global IPv6 address (holds: fe80::2)',
    },
  );
});

Deno.test("agent arguments: --flow-sharing all by default, exceptions on request (with the seed's node settings)", () => {
  const base = ["--config", "/c.yaml", "--redis", "redis://127.0.0.1:6379", "--node-name", "lb-a"];
  deepStrictEqual(parseAgentArgs([...base, "--datapath", "memory"]).flowSharing, "all");
  deepStrictEqual(
    parseAgentArgs([...base, "--datapath", "memory", "--flow-sharing", "exceptions"]).flowSharing,
    "exceptions",
  );
  const bpf = [...base, "--flow-sharing", "exceptions"];
  deepStrictEqual(parseAgentArgs([...bpf, "--src-addr", "10.2.1.2"]).flowSharing, "exceptions");
  throws(() => parseAgentArgs(bpf), /--flow-sharing exceptions without --src-addr/);
  throws(() => parseAgentArgs([...base, "--flow-sharing", "some"]), /--flow-sharing "some"/);
});
