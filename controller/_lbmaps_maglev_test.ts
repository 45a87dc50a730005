import { assert, assertEquals } from "./_testing.ts";
import { MaglevTables } from "./_lbmaps_maglev.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";

Deno.test("MaglevTables: the same keys, IDs and M reuse the table; a reused table is never overwritten", () => {
  const tables = new MaglevTables(new TsMaglevBuilder());
  const keys = [{ key: "10.1.0.1:80", weight: 100 }, { key: "10.1.0.2:80", weight: 100 }];
  const first = tables.table(keys, [7, 9], 251);
  assert(!first.reused && first.table.every((v) => v === 7 || v === 9));
  const copy = first.table.slice();
  const again = tables.table([...keys], [7, 9], 251);
  assert(again.reused && again.table === first.table);
  // Two further builds: the buffers alternate, and the one written last stays intact.
  const other = tables.table(keys.slice(0, 1), [3], 251);
  assertEquals([...first.table], [...copy], "the previous table is still being written");
  const third = tables.table(keys, [7, 8], 251);
  assert(!third.reused && third.table !== other.table);
  assertEquals(new Set(other.table), new Set([3]));
});
