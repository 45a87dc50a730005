/**
 * Holdfast's command line. Each subcommand lives in the module that owns it and is loaded only
 * when called, so `main.ts policy check` never loads libbpf and `main.ts agent` never loads the
 * demo.
 *
 *     deno run -P=demo main.ts demo            the virtual-cluster demo (network namespaces)
 *     deno run -P=... main.ts agent ...        the LB-node agent
 *     deno run -P=... main.ts policy check F   validate a WASM policy module
 *
 * @module
 */

import { readCommandLine, UsageError } from "./lib/args.ts";
import { versionLine } from "./lib/version.ts";

/** A subcommand: a one-line summary and its lazily imported entry point. */
interface Command {
  readonly summary: string;
  readonly load: () => Promise<{ main(args: string[]): Promise<number> }>;
}

/** Every subcommand, by name (tests/hygiene/docs_flags_test.ts checks the docs against them). */
export const COMMANDS: Readonly<Record<string, Command>> = {
  demo: {
    summary: "run the virtual-cluster demo in network namespaces (needs root)",
    load: () => import("./lab/demo.ts"),
  },
  agent: {
    summary: "run an LB node: XDP datapath, control plane from a config file, flow sync via Redis",
    load: () => import("./node/lb/main.ts"),
  },
  anycast: {
    summary: "run an anycast node: hold LB /32s on lo while a local pod is ready (BGP via bird)",
    load: () => import("./node/anycast/main.ts"),
  },
  egress: {
    summary: "run an egress NAT pod: SNAT, floating addresses, heartbeats, conntrack sync",
    load: () => import("./node/egress/main.ts"),
  },
  controller: {
    summary: "the Kubernetes controller: addresses, status, Events, the LB model in Redis",
    load: () => import("./controller/k8s/main.ts"),
  },
  status: {
    summary: "what runs now (Redis, nodes' /metrics): tables, --json, --serve the dashboard",
    load: () => import("./controller/status/main.ts"),
  },
  "control-plane": {
    summary: "dry run: load a services file into in-memory maps and print the tables",
    load: () => import("./node/lb/dry_run.ts"),
  },
  node: {
    summary: "run a node: give the local pods that back frontends the LB's traffic (DSR)",
    load: () => import("./node/backends/main.ts"),
  },
  decap: {
    summary: "backend side: attach decapsulation and MSS clamping to an interface (tc)",
    load: () => import("./node/bpf/decap_main.ts"),
  },
  "xdp-pass": {
    summary: "attach a pass-through XDP program (veth peers of XDP_TX interfaces need one)",
    load: () => import("./node/bpf/xdp_pass_main.ts"),
  },
  policy: {
    summary: "check FILE | swap FILE [--active PATH]: validate or install a WASM policy module",
    load: () => import("./policy-as/host/cli.ts"),
  },
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return [
    "usage: main.ts COMMAND [ARGS]   (main.ts COMMAND --help: its options; main.ts --version)",
    "",
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
  ].join("\n");
}

/** Runs the subcommand named by `args[0]`; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [first, ...rest] = args;
  if (first === "--version") {
    console.log(versionLine());
    return 0;
  }
  // Only the command name is parsed here; its own flags (and its --help) are the command's.
  const read = readCommandLine(
    first === "help" ? ["--help"] : args.slice(0, 1),
    { command: "main.ts", usage: usage(), positionals: true, options: {} },
    ({ positionals: [name] }) => {
      if (name === undefined) throw new UsageError("Missing COMMAND");
      const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
      if (command === undefined) throw new UsageError(`Unknown command "${name}"`);
      return command;
    },
  );
  if ("exit" in read) return read.exit;
  const mod = await read.options.load();
  return await mod.main(rest);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
