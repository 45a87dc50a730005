import { deepStrictEqual, rejects } from "node:assert/strict";
import { Lifecycle } from "./lifecycle.ts";
import { captureLogs, log } from "./log.ts";

Deno.test("lifecycle: parts stop last first; a failing stop is logged and the rest still stop", async () => {
  using logs = captureLogs();
  const order: string[] = [];
  const life = new Lifecycle(log);
  const a = await life.start("a", () => ({ value: 1, stop: () => void order.push("a") }));
  life.onStop("b", () => {
    order.push("b");
    throw new Error("b broke");
  });
  await life.start("c", async () => {
    await Promise.resolve();
    return { value: "no stop" };
  });
  life.onStop("d", () => Promise.resolve().then(() => void order.push("d")));
  deepStrictEqual([a, life.parts], [1, ["a", "b", "d"]]);
  await life.stop();
  deepStrictEqual(order, ["d", "b", "a"]);
  const warned = logs.records.filter((r) => r.level === "warn");
  deepStrictEqual(warned.map((r) => [r.msg, r.component, r.err]), [
    ["cleanup step failed", "b", new Error("b broke")],
  ]);
  await life.stop(); // each hook runs once
  deepStrictEqual(order, ["d", "b", "a"]);
});

Deno.test("lifecycle: a start that throws registers nothing; a stop registered after stop runs at once", async () => {
  const order: string[] = [];
  const life = new Lifecycle(log);
  await rejects(
    life.start("x", () => {
      throw new Error("cannot start");
    }),
    /cannot start/,
  );
  deepStrictEqual(life.parts, []);
  await life.stop();
  const late = Promise.withResolvers<void>();
  life.onStop("late", () => {
    order.push("late");
    late.resolve();
  });
  await late.promise;
  deepStrictEqual(order, ["late"]);
});
