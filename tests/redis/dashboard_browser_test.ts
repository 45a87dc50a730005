/**
 * The dashboard in a real browser (headless Debian Chromium through playwright-core,
 * `tests/harness/browser.ts`) against a real redis-server and a real LB agent's /metrics
 * (`_status_scene.ts`): while the page is open the egress NAT pod holding an address "dies" —
 * its lease is released and the next pod acquires it with a higher epoch, as
 * `controller/egress/lease.ts` does on a failover — and the page must show the new owner and
 * epoch, and the failover in its timeline (server-sent events). Saves a screenshot (its path is
 * printed; `HF_SCREENSHOT=PATH` names it: docs/images/dashboard.png is one).
 * Every wait is bounded polling for what the page must show, never a fixed sleep.
 * Run: `deno test -P=redis tests/redis/dashboard_browser_test.ts`.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { startDashboard } from "../../controller/status/dashboard.ts";
import { captureLogs } from "../../lib/log.ts";
import { startRedis } from "../../lab/redis_server.ts";
import { launchChromium } from "../harness/browser.ts";
import { EGRESS, EGRESS_ADDR, startStatusScene } from "./_status_scene.ts";

/** Bound of each wait for the page (it is fed every 200 ms here). */
const WAIT_MS = 30_000;

Deno.test("dashboard in Chromium: an egress failover shows as the new owner and in the timeline", async () => {
  using logs = captureLogs();
  await using redis = await startRedis();
  await using scene = await startStatusScene(redis.url, logs);
  const dashboard = await startDashboard({
    redis: redis.url,
    agents: [scene.agentUrl],
    intervalMs: 200,
  });
  try {
    await using chromium = await launchChromium(WAIT_MS);
    const page = await chromium.context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    await page.goto(dashboard.url);
    const row = `#egress tr[data-key="${EGRESS}|${EGRESS_ADDR}"]`;
    const owner = page.locator(`${row} td[data-field=owner]`);
    await owner.filter({ hasText: "nat1/boot-a" }).waitFor();
    await page.locator("#conn", { hasText: "live" }).waitFor();
    await page.locator("#addresses td", { hasText: "lb-b" }).waitFor();

    // The failover: nat1 is gone (its lease dropped), nat2 takes the address with a new epoch.
    const first = scene.lease;
    ok(await scene.leases.release(EGRESS_ADDR, "nat1/boot-a", first.epoch));
    const second = await scene.leases.acquire(EGRESS_ADDR, "nat2/boot-b", 60_000);
    ok(second.acquired && second.epoch > first.epoch, JSON.stringify(second));

    await owner.filter({ hasText: "nat2/boot-b" }).waitFor();
    deepStrictEqual(
      await page.locator(`${row} td[data-field=epoch]`).textContent(),
      String(second.epoch),
    );
    const failover = page.locator("#timeline li[data-kind=failover]").first();
    await failover.waitFor();
    const text = await failover.textContent() ?? "";
    ok(text.includes(`egress ${EGRESS_ADDR}`) && text.includes("nat2/boot-b"), text);
    // The feed may have read Redis between the release and the acquire: "nat1 → nobody" and
    // "nobody → nat2" are then two events, the newest first.
    ok(/(nat1\/boot-a|nobody) → nat2\/boot-b/.test(text), text);

    const shot = Deno.env.get("HF_SCREENSHOT") ??
      `${await Deno.makeTempDir({ prefix: "hf-dashboard-" })}/dashboard.png`;
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`dashboard screenshot: ${shot}`);
  } finally {
    await dashboard.close();
  }
});
