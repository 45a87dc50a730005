/**
 * The maps of a tc program another process attached and left running (`main.ts decap` exits with
 * decap and MSS clamp attached): found with bpftool in the host's namespace, opened by kernel ID
 * (map IDs are global), so a test reads what the operator's command wrote.
 *
 * @module
 */
import type { Topology } from "../../lab/mod.ts";
import { BpfMap } from "../../node/bpf/mod.ts";

/**
 * Opens map `name` of the tc program attached to `direction` of `dev` in `host`.
 *
 * @throws {Error} naming the device and what was found when there is no such program or map.
 */
export async function openTcMap(
  topo: Topology,
  host: string,
  dev: string,
  name: string,
  direction: "ingress" | "egress" = "ingress",
): Promise<BpfMap> {
  const json = async <T>(args: string[]): Promise<T> =>
    JSON.parse((await topo.exec(host, ["bpftool", "-j", ...args])).stdout) as T;
  const [net] = await json<{ tc?: { kind: string; id: number }[] }[]>(["net", "show", "dev", dev]);
  const prog = net?.tc?.find((p) => p.kind.endsWith(direction));
  if (!prog) {
    throw new Error(`No tc ${direction} program on "${dev}" in ${host}: ${JSON.stringify(net)}`);
  }
  const { map_ids } = await json<{ map_ids?: number[] }>(["prog", "show", "id", String(prog.id)]);
  for (const id of map_ids ?? []) {
    const map = await json<{ name: string }>(["map", "show", "id", String(id)]);
    if (map.name === name) return BpfMap.fromId(id);
  }
  throw new Error(`No map "${name}" in tc program ${prog.id} on "${dev}" in ${host} (${map_ids})`);
}
