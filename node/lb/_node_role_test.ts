import { deepStrictEqual } from "node:assert/strict";
import { captureLogs, log } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import { LbNodeRole } from "./_node_role.ts";

function role(options: { encapPortFlag?: number; noConfigure?: boolean } = {}) {
  const written: number[] = [];
  const registry = new Registry();
  const r = new LbNodeRole({
    nodeName: "lb2",
    ...(options.encapPortFlag !== undefined ? { encapPortFlag: options.encapPortFlag } : {}),
    ...(options.noConfigure ? {} : { configureEncap: (p: number) => void written.push(p) }),
    logger: log.with({ component: "agent" }),
    registry,
  });
  return { r, written, registry };
}

Deno.test("LB node role: the model's encap port reaches configure once per change, and back to 6080 when the model drops it", () => {
  using logs = captureLogs();
  const { r, written } = role();
  r.apply({}, true);
  deepStrictEqual(written, [], "default 6080 already written at start");
  r.apply({ encapPort: 7000 }, true);
  r.apply({ encapPort: 7000, lbNodes: ["lb2"] }, true);
  deepStrictEqual([written, r.encapPort], [[7000], 7000]);
  deepStrictEqual(
    logs.records.filter((l) => l.msg.startsWith("encap port set")).map((l) => l.msg),
    ["encap port set to 7000 (from the model)"],
  );
  r.apply({}, true);
  deepStrictEqual(written, [7000, 6080]);
});

Deno.test("LB node role: an explicit --encap-port wins over the model (said once)", () => {
  using logs = captureLogs();
  const { r, written } = role({ encapPortFlag: 6081 });
  r.apply({ encapPort: 7000 }, true);
  r.apply({ encapPort: 7000, lbNodes: [] }, true);
  deepStrictEqual([written, r.encapPort], [[], 6081]);
  deepStrictEqual(
    logs.records.filter((l) => l.msg === "encap port of the model ignored: --encap-port wins")
      .map((l) => [l.model, l.flag]),
    [[7000, 6081]],
  );
});

Deno.test("LB node role: without node settings to write the port is not applied, and says why", () => {
  using logs = captureLogs();
  const { r } = role({ noConfigure: true });
  r.apply({ encapPort: 7000 }, true);
  deepStrictEqual(r.encapPort, 6080);
  deepStrictEqual(
    logs.records.some((l) =>
      l.msg === "cannot apply the encap port of the model: no node settings written"
    ),
    true,
  );
});

Deno.test("LB node role: not selected → not serving (readyz), logged and counted; selected again → serving", () => {
  using logs = captureLogs();
  const { r, registry } = role();
  r.apply({ lbNodes: ["lb1"] }, false);
  deepStrictEqual(r.serving, false);
  deepStrictEqual(
    logs.records.at(-1)?.msg,
    "not an LB node: lbNodeSelector does not select node lb2",
  );
  deepStrictEqual(registry.expose().includes("holdfast_agent_lb_node 0"), true);
  r.apply({ lbNodes: ["lb1", "lb2"] }, true);
  deepStrictEqual(r.serving, true);
  deepStrictEqual(logs.records.at(-1)?.msg, "LB node: lbNodeSelector selects node lb2");
  deepStrictEqual(registry.expose().includes("holdfast_agent_lb_node 1"), true);
});
