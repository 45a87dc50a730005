/**
 * The script runner's printed forms of the maps (`maps/dump`, `maps/summary`) and the command
 * that changes them behind the reconciler's back (`maps/delete`, `maps/set`), as an operator
 * with bpftool could.
 *
 * @module
 */

import { joinHostPort } from "../tables/address.ts";
import type { LBMaps } from "../maps/lbmaps.ts";
import type { MemoryLBMaps } from "../maps/memory.ts";

/** `maps/dump`: every entry with its IDs, Maglev tables as slot counts and a hash. */
export async function dumpMaps(maps: LBMaps): Promise<string> {
  const d = await maps.dump();
  const out: string[] = ["services:"];
  for (const [k, e] of [...d.services].sort((a, b) => a[1].serviceId - b[1].serviceId)) {
    out.push(
      `  ${
        joinHostPort(k.address, k.port)
      }/${k.protocol} id=${e.serviceId} backends=${e.backendCount} ` +
        `mode=${e.flowKeyMode} M=${e.maglevSize}`,
    );
  }
  out.push("backends:");
  for (const [id, b] of [...d.backends].sort((a, b) => a[0] - b[0])) {
    out.push(`  ${id} ${joinHostPort(b.address, b.port)}`);
  }
  out.push("maglev:");
  for (const [id, t] of [...d.maglev].sort((a, b) => a[0] - b[0])) {
    const counts = new Map<number, number>();
    let h = 0x811c9dc5;
    for (const v of t) {
      counts.set(v, (counts.get(v) ?? 0) + 1);
      h = Math.imul(h ^ v, 0x01000193) >>> 0;
    }
    const slots = [...counts].sort((a, b) => a[0] - b[0]).map(([b, c]) => `${b}:${c}`).join(" ");
    out.push(`  ${id} ${slots} hash=${h.toString(16).padStart(8, "0")}`);
  }
  return out.join("\n") + "\n";
}

/** `maps/summary`: services → backend addresses and their Maglev slot counts (ID-independent). */
export async function summarizeMaps(maps: LBMaps): Promise<string> {
  const d = await maps.dump();
  const backends = new Map(d.backends.map(([id, b]) => [id, joinHostPort(b.address, b.port)]));
  const tables = new Map(d.maglev);
  const out: string[] = [];
  for (
    const [k, e] of [...d.services].sort((
      a,
      b,
    ) => (a[0].address + a[0].port < b[0].address + b[0].port ? -1 : 1))
  ) {
    const counts = new Map<string, number>();
    for (const id of tables.get(e.serviceId) ?? []) {
      const name = id === 0 ? "unset" : backends.get(id) ?? `missing#${id}`;
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    const slots = [...counts].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([n, c]) => `${n}=${c}`)
      .join(" ");
    out.push(
      `${joinHostPort(k.address, k.port)}/${k.protocol} backends=${e.backendCount} ${slots}`,
    );
  }
  out.push(`backend entries: ${d.backends.length}, maglev tables: ${d.maglev.length}`);
  return out.join("\n") + "\n";
}

/**
 * `maps/delete service IP:PORT/PROTO`, `maps/delete maglev SERVICE_ID`,
 * `maps/delete backend BACKEND_ID`, `maps/set backend BACKEND_ID IP:PORT`: edits the in-memory
 * maps directly, bypassing the reconciler (and the ordering checks), as `bpftool map delete`
 * would.
 */
export function tamperMaps(maps: MemoryLBMaps, op: "delete" | "set", args: readonly string[]) {
  const [kind, key, value] = args;
  const id = Number(key);
  if (op === "set") {
    const m = kind === "backend" ? /^\[?(.+?)\]?:(\d+)$/.exec(value ?? "") : null;
    if (m === null || !maps.backends.has(id)) {
      throw new Error(`maps/set: expected "backend ID IP:PORT" of an existing backend`);
    }
    maps.backends.set(id, { address: m[1]!, port: Number(m[2]) });
    return;
  }
  const gone = kind === "service"
    ? maps.services.delete(key ?? "")
    : kind === "maglev"
    ? maps.maglev.delete(id)
    : kind === "backend"
    ? maps.backends.delete(id)
    : undefined;
  if (gone === undefined) throw new Error(`maps/delete: unknown map "${kind}"`);
  if (!gone) throw new Error(`maps/delete: no ${kind} entry "${key}"`);
}
