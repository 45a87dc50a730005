import { deepStrictEqual } from "node:assert/strict";
import { decodeReport } from "../../controller/model/reports.ts";
import { captureLogs, log } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { FAST_CHECK } from "./health/_testing.ts";
import type { HealthChange } from "./health/mod.ts";
import { AgentReporter, MAX_IN_FLIGHT } from "./reports.ts";

const change: HealthChange = {
  target: {
    service: "shop/web",
    backend: "10.1.0.3:8080/TCP",
    portName: "",
    frontends: [],
    check: FAST_CHECK,
    ip: "10.1.0.3",
    probePort: 8080,
  },
  verdict: "quarantined",
  probes: 3,
  reason: "connect refused",
  atMs: 0,
};

Deno.test("agent reports: a verdict is one XADD on the model's reports stream", async () => {
  const sent: string[][] = [];
  const reporter = new AgentReporter({
    redis: { url: "redis://127.0.0.1:1" },
    node: "lb-node-1",
    logger: log,
    registry: new Registry(),
    connection: { command: (a) => (sent.push(a), Promise.resolve("1-0")), close: async () => {} },
  });
  reporter.health(change);
  await reporter.close();
  deepStrictEqual(sent.length, 1);
  deepStrictEqual(sent[0]!.slice(0, 5), ["XADD", "hf:model:{m}:reports", "MAXLEN", "~", "10000"]);
  deepStrictEqual(decodeReport(sent[0]!.slice(6)), {
    kind: "health",
    node: "lb-node-1",
    service: "shop/web",
    backend: "10.1.0.3:8080",
    state: "unhealthy",
    reason: "3 failed probes (connect refused)",
  });
});

Deno.test("agent reports: Redis failing or hanging never holds the caller; failures and drops are counted", async () => {
  using logs = captureLogs();
  const registry = new Registry();
  const hang = Promise.withResolvers<unknown>();
  let calls = 0;
  const reporter = new AgentReporter({
    redis: { url: "redis://127.0.0.1:1" },
    node: "lb-node-1",
    logger: log,
    registry,
    connection: {
      command: () => ++calls === 1 ? Promise.reject(new Error("down")) : hang.promise,
      close: async () => {},
    },
  });
  for (let i = 0; i < MAX_IN_FLIGHT + 5; i++) reporter.policyRejected("ab".repeat(32), "abi");
  await new Promise((r) => setTimeout(r, 0));
  const text = registry.expose();
  deepStrictEqual(
    text.includes('holdfast_agent_reports_total{kind="policy",result="failed"} 1'),
    true,
    text,
  );
  deepStrictEqual(
    text.includes('holdfast_agent_reports_total{kind="policy",result="dropped"} 5'),
    true,
    text,
  );
  deepStrictEqual(logs.records.some((r) => r.msg === "cannot send report to the controller"), true);
  hang.resolve("1-0");
  await reporter.close();
});
