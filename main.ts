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

/** A subcommand: a one-line summary and its lazily imported entry point. */
interface Command {
  readonly summary: string;
  readonly load: () => Promise<{ main(args: string[]): Promise<number> }>;
}

const COMMANDS: Record<string, Command> = {
  demo: {
    summary: "run the virtual-cluster demo in network namespaces (needs root)",
    load: () => import("./tests/e2e/demo.ts"),
  },
  agent: {
    summary: "run an LB node: XDP datapath, control plane from a config file, flow sync via Redis",
    load: () => import("./node/agent.ts"),
  },
  "control-plane": {
    summary: "dry run: load a services file into in-memory maps and print the tables",
    load: () => import("./controller/main.ts"),
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
    "usage: main.ts COMMAND [ARGS]",
    "",
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
  ].join("\n");
}

/** Runs the subcommand named by `args[0]`; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    console.error(`Unknown command "${name}"\n${usage()}`);
    return 2;
  }
  const mod = await command.load();
  return await mod.main(rest);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
