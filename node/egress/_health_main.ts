/**
 * A process that runs only {@link PeerHealth}, for tests that stop, continue and kill a real
 * process in its own network namespace (`tests/netns/egress_health_test.ts`). Logs the
 * heartbeat decisions as JSON lines on stdout ("heartbeats started", "peer up", "peer down").
 *
 *     deno run --allow-net node/egress/_health_main.ts --self nat1 --listen 10.99.0.1:7946 \
 *       --peer nat2=10.99.0.2:7946 [--interval-ms 100] [--multiplier 3]
 *
 * @module
 */

import {
  intOption,
  listOption,
  readCommandLineOrExit,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { parseHostPort } from "../../lib/flags.ts";
import { type PeerAddress, PeerHealth } from "./health.ts";

const USAGE = `usage: _health_main.ts --self NAME --listen HOST:PORT --peer NAME=HOST:PORT...
  [--interval-ms 100] [--multiplier 3]`;

/** HOST:PORT as lib/flags.ts reads every address (`host` is PeerHealth's name for it). */
function hostPort(text: string, flag: string): { host: string; port: number } {
  const { hostname, port } = parseHostPort(text, flag);
  return { host: hostname, port };
}

const options = readCommandLineOrExit(Deno.args, {
  command: "_health_main.ts",
  usage: USAGE,
  options: {
    self: { type: "string" },
    listen: { type: "string" },
    peer: { type: "string", multiple: true },
    "interval-ms": { type: "string" },
    multiplier: { type: "string" },
  },
}, ({ values }) => ({
  self: stringOption(values, "self", { required: true }),
  listen: hostPort(stringOption(values, "listen", { required: true }), "listen"),
  peers: listOption(values, "peer").map((p): PeerAddress => {
    const eq = p.indexOf("=");
    if (eq < 1) throw new UsageError(`--peer "${p}" is not NAME=HOST:PORT`, USAGE);
    return { name: p.slice(0, eq), ...hostPort(p.slice(eq + 1), "peer") };
  }),
  intervalMs: intOption(values, "interval-ms", { default: 100, min: 1 }),
  multiplier: intOption(values, "multiplier", { default: 3, min: 1 }),
}));

const health = new PeerHealth(options);
await health.start();
const stop = async () => {
  await health.stop();
  Deno.exit(0);
};
Deno.addSignalListener("SIGTERM", stop);
Deno.addSignalListener("SIGINT", stop);
