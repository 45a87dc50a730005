/**
 * Helper of agent_caps_test.ts, run as a child under the bpf permission set (the k8s set has no
 * FFI): `pin-old DIR` replaces hf_maglev pinned in DIR by one as a version before mmapable Maglev
 * tables pinned it (same size, an inner-map template without BPF_F_MMAPABLE; no tables, so the
 * agent must write them); `tables DIR` prints `{"<service ID>": mmapable}` for the table pins.
 */
import {
  BPF_F_INNER_MAP,
  BpfError,
  BpfMap,
  ERRNO,
  isMmapable,
  MAP_TYPE,
} from "../../node/bpf/mod.ts";
import { MaglevTableStore } from "../../node/bpf/_maglev_tables.ts";
import { unlinkPath } from "../../node/bpf/_ffi.ts";

const [command, dir] = Deno.args;
if (dir === undefined) throw new Error("usage: _old_maglev.ts pin-old|tables DIR");
const tablesDir = `${dir}/hf_maglev_tables`;
let services: number;
{
  using pinned = BpfMap.fromPinned(`${dir}/hf_maglev`);
  services = pinned.maxEntries;
}

if (command === "pin-old") {
  MaglevTableStore.unpin(tablesDir, services);
  unlinkPath(`${dir}/hf_maglev`); // Deno's remove wants --allow-all under /sys
  using template = BpfMap.create(MAP_TYPE.ARRAY, {
    name: "hf_maglev_inner",
    keySize: 4,
    valueSize: 4,
    maxEntries: 1,
    flags: BPF_F_INNER_MAP,
  });
  using outer = BpfMap.create(MAP_TYPE.ARRAY_OF_MAPS, {
    name: "hf_maglev",
    keySize: 4,
    valueSize: 4,
    maxEntries: services,
    innerMapFd: template.fd,
  });
  outer.pin(`${dir}/hf_maglev`);
} else if (command === "tables") {
  const out: Record<string, boolean> = {};
  // pins by service ID (Deno's readDir wants --allow-all under /sys)
  for (let sid = 1; sid < services; sid++) {
    let table: BpfMap;
    try {
      table = BpfMap.fromPinned(`${tablesDir}/${sid}`);
    } catch (e) {
      if (e instanceof BpfError && e.errno === ERRNO.ENOENT) continue;
      throw e;
    }
    using _table = table;
    out[sid] = isMmapable(table);
  }
  console.log(JSON.stringify(out));
} else {
  throw new Error(`Unknown command "${command}": pin-old or tables`);
}
