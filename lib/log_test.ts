import { ok } from "node:assert/strict";
import { captureLogs, log, setLogLevel } from "./log.ts";

Deno.test("log writes level, timestamp, message and fields; fields cannot override them", () => {
  using logs = captureLogs();
  log.with({ component: "flows" }).info("flow learned", { vip: "10.0.100.1", msg: "nope" });
  const r = logs.records[0]!;
  ok(r.level === "info" && r.msg === "flow learned", JSON.stringify(r));
  ok(r.component === "flows" && r.vip === "10.0.100.1", JSON.stringify(r));
  ok(!Number.isNaN(Date.parse(r.ts)), `bad ts ${r.ts}`);
  ok(Object.keys(r).slice(0, 3).join() === "ts,level,msg", Object.keys(r).join());
});

Deno.test("log drops lines below the level", () => {
  using logs = captureLogs();
  const prev = setLogLevel("warn");
  try {
    log.info("quiet");
    log.error("loud", { err: new Error("boom") });
  } finally {
    setLogLevel(prev);
  }
  ok(logs.records.length === 1 && logs.records[0]!.msg === "loud", "level filter");
});
