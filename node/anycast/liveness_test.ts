import { deepStrictEqual } from "node:assert/strict";
import { type LivenessStore, OwnerLiveness } from "./liveness.ts";
import { departures } from "./redirect_purge.ts";

/** Liveness records in memory; a record lapses when the test says so (no clock). */
class MemoryLiveness implements LivenessStore {
  readonly records = new Set<string>();
  readonly owners = new Map<string, string>();
  down = false;
  refresh(owner: string, node: string): Promise<void> {
    if (this.down) return Promise.reject(new Error("store down"));
    this.records.add(owner);
    this.owners.set(owner, node);
    return Promise.resolve();
  }
  alive(owners: readonly string[]): Promise<boolean[]> {
    if (this.down) return Promise.reject(new Error("store down"));
    return Promise.resolve(owners.map((o) => this.records.has(o)));
  }
  claim(owner: string): Promise<boolean> {
    return Promise.resolve(this.owners.delete(owner));
  }
  deregister(owner: string): Promise<void> {
    this.owners.delete(owner);
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const OWNERS = ["10.9.1.2", "10.9.2.2", "10.9.3.2"];

function watcher(store: LivenessStore, self: string, purged: string[], fail = { n: 0 }) {
  return new OwnerLiveness({
    self,
    node: `n${self.split(".")[2]}`,
    owners: OWNERS,
    store,
    onLapse: (owner) => {
      if (fail.n > 0) {
        fail.n--;
        return Promise.reject(new Error("store down"));
      }
      purged.push(owner);
      return Promise.resolve();
    },
  });
}

Deno.test("liveness: an owner seen alive then lapsed is purged once, by one survivor", async () => {
  const store = new MemoryLiveness();
  const [p1, p2] = [[] as string[], [] as string[]];
  const w1 = watcher(store, "10.9.1.2", p1);
  const w2 = watcher(store, "10.9.2.2", p2);
  const w3 = watcher(store, "10.9.3.2", []);
  for (const w of [w1, w2, w3, w1, w2]) await w.tick();
  deepStrictEqual([...w1.seen].sort(), ["10.9.2.2", "10.9.3.2"]);
  // n3 dies: its record lapses (no refresh), both survivors see it; one claims and purges.
  store.records.delete("10.9.3.2");
  await w1.tick();
  await w2.tick();
  deepStrictEqual([p1, p2], [["10.9.3.2"], []]);
  await w1.tick();
  await w2.tick();
  deepStrictEqual([p1, p2], [["10.9.3.2"], []], "purged once");
  // n3 comes back and dies again: a new lapse, purged again.
  await w3.tick();
  await w2.tick();
  await w1.tick();
  store.records.delete("10.9.3.2");
  await w2.tick();
  await w1.tick();
  deepStrictEqual([p1, p2], [["10.9.3.2"], ["10.9.3.2"]]);
});

Deno.test("liveness: an owner never seen alive is not purged (first start, cluster restart)", async () => {
  const store = new MemoryLiveness();
  // n3 ran before (registered) but its record lapsed before n1 started watching.
  store.owners.set("10.9.3.2", "n3");
  const purged: string[] = [];
  const w1 = watcher(store, "10.9.1.2", purged);
  for (let i = 0; i < 3; i++) await w1.tick();
  deepStrictEqual(purged, []);
  deepStrictEqual([...w1.seen], []);
});

Deno.test("liveness: a deliberate stop deregisters, so its lapse purges nothing", async () => {
  const store = new MemoryLiveness();
  const purged: string[] = [];
  const w1 = watcher(store, "10.9.1.2", purged);
  const w2 = watcher(store, "10.9.2.2", []);
  await w2.tick();
  await w1.tick();
  await w2.stop({ deregister: true });
  store.records.delete("10.9.2.2");
  await w1.tick();
  deepStrictEqual(purged, []);
});

Deno.test("liveness: the watcher's own store failure lapses nothing; a failed purge is retried", async () => {
  const store = new MemoryLiveness();
  const purged: string[] = [];
  const fail = { n: 1 };
  const w1 = watcher(store, "10.9.1.2", purged, fail);
  await watcher(store, "10.9.2.2", []).tick();
  await w1.tick();
  store.down = true;
  await w1.tick();
  store.down = false;
  deepStrictEqual([...w1.seen], ["10.9.2.2"], "nothing lapsed while the store was unreachable");
  store.records.delete("10.9.2.2");
  await w1.tick(); // claimed; the purge fails
  deepStrictEqual(purged, []);
  await w1.tick();
  deepStrictEqual(purged, ["10.9.2.2"]);
});

Deno.test("departures: the first state purges addresses with no local pod; later, only departures", () => {
  const vips = ["10.0.100.10", "10.0.100.11", "2001:db8:100::10"];
  const pending = new Set<string>();
  let owned = departures(vips, new Set(["10.0.100.10"]), undefined, pending);
  deepStrictEqual([...pending].sort(), ["10.0.100.11", "2001:db8:100::10"]);
  pending.clear(); // purged
  owned = departures(vips, new Set(["10.0.100.10", "10.0.100.11"]), owned, pending);
  deepStrictEqual([...pending], [], "a pod arriving purges nothing");
  owned = departures(vips, new Set(["10.0.100.11"]), owned, pending);
  deepStrictEqual([...pending], ["10.0.100.10"]);
  // Not purged yet (store down) and no longer redirected: dropped.
  departures(["10.0.100.11"], new Set(["10.0.100.11"]), owned, pending);
  deepStrictEqual([...pending], []);
});
