/**
 * `holdfast control-plane` subcommand: runs the control plane over in-memory maps from a file
 * config (default: the embedded demo config) and prints the tables and the resulting maps — a
 * dry run of what the agent would program.
 *
 * Usage: `control-plane [--config FILE.yaml|FILE.json] [--maglev M]`
 *
 * @module
 */

import { intOption, readCommandLine, stringOption } from "../../lib/args.ts";
import { defineCommand } from "../../lib/flags.ts";
import { setLogLevel } from "../../lib/log.ts";
import { createControlPlane } from "./control_plane.ts";
import { backendHeader, backendToRow } from "./tables/backend.ts";
import { frontendHeader, frontendToRow } from "./tables/frontend.ts";
import { formatTable } from "./tables/print.ts";
import { selectBackends } from "./tables/select.ts";
import { serviceHeader, serviceToRow } from "./tables/service.ts";
import { MemoryLBMaps } from "./maps/memory.ts";
import { MAGLEV_M_DEFAULT } from "../../policy-as/host/abi.ts";
import { DEFAULT_CONFIG_YAML, FileSource } from "./sources/file_source.ts";

/** The `control-plane` command for lib/args.ts: its flag table, options and usage. */
export const CONTROL_PLANE_COMMAND = defineCommand({
  command: "control-plane",
  synopsis: "main.ts control-plane [--config FILE.yaml|FILE.json] [--maglev M]",
  about: "Loads the services file into in-memory maps and prints the tables and maps: a dry run\n" +
    "of what the agent would program.",
  flags: {
    config: { arg: "FILE", help: "the services file", defaultText: "the embedded demo config" },
    maglev: { arg: "M", help: "Maglev table size (prime)", default: String(MAGLEV_M_DEFAULT) },
  },
});

/** Entry point; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, CONTROL_PLANE_COMMAND, ({ values }) => ({
    config: stringOption(values, "config"),
    maglev: intOption(values, "maglev", { min: 1 })!,
  }));
  if ("exit" in read) return read.exit;
  const { config, maglev } = read.options;
  const maps = new MemoryLBMaps();
  setLogLevel("warn"); // the tables are the output; only trouble is logged beside them
  const cp = await createControlPlane(maps, { maglevSize: maglev });
  const file = new FileSource(cp.writer); // registers its initializer: no prune before the load
  cp.start();
  try {
    if (config === undefined) file.load(DEFAULT_CONFIG_YAML);
    else await file.loadFile(config);
    await cp.reconciler.waitIdle();
    const r = cp.db.readTxn();
    const t = cp.tables;
    console.log(formatTable(serviceHeader, t.services.all(r).map(serviceToRow)));
    console.log(formatTable(
      frontendHeader,
      t.frontends.all(r).map((f) =>
        frontendToRow(f, selectBackends(r, t, f).map((b) => b.address))
      ),
    ));
    console.log(formatTable(backendHeader, t.backends.all(r).map(backendToRow)));
    const d = await maps.dump();
    console.log("maps:");
    for (const [k, e] of d.services) {
      console.log(
        `  service ${k.address}:${k.port}/${k.protocol} id=${e.serviceId} backends=${e.backendCount} M=${e.maglevSize}`,
      );
    }
    for (const [id, b] of d.backends) console.log(`  backend ${id} ${b.address}:${b.port}`);
    if (maps.violations.length > 0) {
      console.error(`ordering violations: ${maps.violations.join("; ")}`);
      return 1;
    }
    return 0;
  } catch (e) {
    console.error(`control-plane: ${(e as Error).message}`);
    return 1;
  } finally {
    await cp.stop();
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
