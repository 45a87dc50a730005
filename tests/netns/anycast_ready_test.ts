/**
 * `main.ts anycast`'s log agrees with `/readyz` (issue 27): a first state it cannot apply leaves it
 * running but not ready — `/readyz` 503 and the log says so, never `anycast agent ready` — and
 * the first state it applies makes it ready in both. Before, `anycast agent ready` was logged
 * whatever became of the first state while `/readyz` answered 503. The agent runs in a namespace
 * of its own (`ip netns exec`); `/readyz` is read from inside it.
 */
import { ok as assert } from "node:assert/strict";
import { createTopology } from "../../lab/mod.ts";
import { rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const OPS_PORT = 9471;

const GOOD = JSON.stringify({
  services: [{
    name: "default/web",
    addresses: ["10.0.100.10", "2001:db8:100::10"],
    ports: ["80/TCP"],
    selector: { app: "web" },
  }],
  pods: [{ name: "default/web-1", node: "n1", labels: { app: "web" }, ready: true }],
});

rootTest("anycast: 'ready' is logged exactly when /readyz says so", async () => {
  await using topo = await createTopology({ hosts: [{ name: "n1" }], links: [] });
  const dir = await Deno.makeTempDir({ prefix: "hf-anycast-ready-" });
  const file = `${dir}/state.json`;
  const readyz = async () => {
    const { stdout } = await topo.exec("n1", [
      Deno.execPath(),
      "eval",
      `const r = await fetch("http://127.0.0.1:${OPS_PORT}/readyz").catch(() => null);` +
      `console.log(r ? r.status : 0); await r?.body?.cancel();`,
    ], { check: false });
    return Number(stdout.trim());
  };
  try {
    await Deno.writeTextFile(file, "services: [ { name: default/web, addresses: [10.0.100.10]");
    const agent = topo.spawn("n1", [
      Deno.execPath(),
      ...["run", "-P=anycast", "--no-prompt", "--quiet", "--config", `${ROOT}deno.json`],
      ...[`${ROOT}main.ts`, "anycast", "--node-name", "n1", "--state", file, "--poll-ms", "100"],
      ...["--listen", `127.0.0.1:${OPS_PORT}`],
    ]);
    await agent.waitForLine((l) => l.includes("not ready until a state applies"), {
      timeoutMs: 20_000,
    });
    assert(!agent.lines.some((l) => l.includes('"msg":"anycast agent ready"')), "ready logged");
    let status = 0;
    for (let i = 0; i < 50 && status === 0; i++) {
      status = await readyz();
      if (status === 0) await new Promise((r) => setTimeout(r, 100));
    }
    assert(status === 503, `/readyz answered ${status} with no state applied`);
    await Deno.writeTextFile(file, GOOD);
    await agent.waitForLine((l) => l.includes('"msg":"anycast agent ready"'), {
      timeoutMs: 20_000,
    });
    status = await readyz();
    assert(status === 200, `/readyz answered ${status} once ready was logged`);
    await agent.stop();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
